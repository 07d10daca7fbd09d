package snowflake

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Generator states besides the packed (timestamp, sequence) pairs, which
// are never negative: stateNone before the first ID, stateStopped once
// stopped. A packed pair may use all 63 bits (time and sequence widths sum
// to 63 when there are no datacenter and worker bits), so the stopped mark
// cannot be a bit of it: it is a value of its own, and the state it
// replaced is kept in Generator.stoppedAt.
const (
	stateNone    = -1
	stateStopped = math.MinInt64
)

// DefaultMaxBackwardWait is how far the clock may step back before a
// Generator refuses instead of waiting.
const DefaultMaxBackwardWait = 10 * time.Millisecond

// Settings configure a Generator. The zero value is valid: the default
// layout, datacenter 0, worker 0, a 10 ms backward wait and the system clock.
type Settings struct {
	// Layout is the bit layout; the zero Layout means DefaultLayout.
	Layout Layout
	// DatacenterID and WorkerID must fit the layout's widths.
	DatacenterID int64
	WorkerID     int64
	// MaxBackwardWait is the largest backward clock step (or distance below
	// the fence's floor) that is waited out; beyond it Next refuses. Zero
	// means DefaultMaxBackwardWait; a negative value means never wait.
	MaxBackwardWait time.Duration
	// RandomSequenceStart starts each millisecond's sequence at a random
	// value in the lower half of its range, which hides how many IDs a node
	// issues and spreads IDs across shards keyed on their low bits. It
	// lowers the most IDs per millisecond by a quarter on average.
	RandomSequenceStart bool
	// Clock is the time source; nil means SystemClock().
	Clock Clock
	// Fence is the fence in force from the start; the zero Fence allows
	// every timestamp.
	Fence Fence
}

// A Fence bounds the timestamps a Generator may use. Floor and Ceiling are
// Unix milliseconds, inclusive; zero means unbounded. Check, when set, is
// called before every issue and must be cheap and safe for concurrent use;
// while it returns an error the generator issues nothing.
type Fence struct {
	Floor   int64
	Ceiling int64
	Check   func() error
}

// Generator issues Snowflake IDs for one datacenter and worker ID. It is
// safe for concurrent use; its methods never block longer than the wait to
// the next millisecond or a backward step of at most MaxBackwardWait.
type Generator struct {
	// state packs the last timestamp issued (ms since the epoch) above the
	// last sequence number issued; stateNone until the first ID,
	// stateStopped once stopped. Updated only by compare-and-swap, so no
	// lock is held while issuing, and Stop fails every swap that was under
	// way.
	state atomic.Int64
	// stoppedAt is the state Stop replaced with stateStopped. It is written
	// under stopMu before that swap and never after it, so whoever reads
	// stateStopped reads the final stoppedAt.
	stoppedAt atomic.Int64
	stopMu    sync.Mutex
	fence     atomic.Pointer[fenceState]

	// wait lets one goroutine sleep when the sequence is used up (or the
	// fence's floor lies ahead) while the others wait for it.
	wait sleeper
	// cappedTS is the last millisecond (since the epoch) whose sequence
	// ran out. While the one before the current state's did, callers ask
	// for more IDs than a millisecond holds, and a caller of Next that
	// loses a compare-and-swap waits for the next millisecond instead of
	// contending again (see reserve).
	cappedTS atomic.Int64

	clock        Clock
	sys          *systemClock // clock, when it is the system clock: read without an interface call
	layout       Layout
	epochMS      int64
	maxTS        int64
	seqBits      uint
	seqMask      int64
	tsShift      uint
	node         int64 // datacenter and worker bits, in place
	maxWaitMS    int64
	randomStart  bool
	randomBound  int64
	datacenterID int64
	workerID     int64
}

// fenceState is a Fence converted to milliseconds since the epoch.
type fenceState struct {
	floor, ceiling int64 // ms since the epoch; ceiling math.MaxInt64 when unbounded
	check          func() error
	fence          Fence
}

// NewGenerator returns a Generator for s. It returns an error wrapping
// ErrInvalidLayout for widths that cannot make IDs and ErrInvalidSettings
// for IDs that do not fit them. It does not check the layout's lifetime
// against the clock: that is Layout.Validate's job, done once when a service
// starts, so that a running service can always build a generator again (the
// lease keeper builds one per lease). A generator whose clock lies outside
// the layout's time range refuses with ErrTimeOverflow.
func NewGenerator(s Settings) (*Generator, error) {
	l := s.Layout.orDefault()
	// Only what makes a generator impossible: the layout's lifetime is
	// checked once when a service starts (Layout.Validate), and a clock past
	// the layout's end makes Next refuse with ErrTimeOverflow.
	if err := l.checkWidths(); err != nil {
		return nil, err
	}
	if s.DatacenterID < 0 || s.DatacenterID > l.MaxDatacenter() {
		return nil, fmt.Errorf("%w: datacenter ID %d not in 0..%d", ErrInvalidSettings, s.DatacenterID, l.MaxDatacenter())
	}
	if s.WorkerID < 0 || s.WorkerID > l.MaxWorker() {
		return nil, fmt.Errorf("%w: worker ID %d not in 0..%d", ErrInvalidSettings, s.WorkerID, l.MaxWorker())
	}
	wait := s.MaxBackwardWait
	switch {
	case wait == 0:
		wait = DefaultMaxBackwardWait
	case wait < 0:
		wait = 0
	}
	clock := s.Clock
	if clock == nil {
		clock = SystemClock()
	}
	g := &Generator{
		clock:        clock,
		layout:       l,
		epochMS:      l.EpochMillis(),
		maxTS:        l.MaxTimestamp(),
		seqBits:      uint(l.SequenceBits),
		seqMask:      l.MaxSequence(),
		tsShift:      uint(l.DatacenterBits + l.WorkerBits + l.SequenceBits),
		node:         s.DatacenterID<<(l.WorkerBits+l.SequenceBits) | s.WorkerID<<l.SequenceBits,
		maxWaitMS:    wait.Milliseconds(),
		randomStart:  s.RandomSequenceStart,
		randomBound:  (l.MaxSequence() + 1) / 2,
		datacenterID: s.DatacenterID,
		workerID:     s.WorkerID,
	}
	g.sys, _ = clock.(*systemClock)
	g.state.Store(stateNone)
	g.cappedTS.Store(math.MinInt64)
	g.SetFence(s.Fence)
	return g, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// DatacenterID returns the generator's datacenter ID.
func (g *Generator) DatacenterID() int64 { return g.datacenterID }

// WorkerID returns the generator's worker ID.
func (g *Generator) WorkerID() int64 { return g.workerID }

// MaxBackwardWait returns the backward clock step the generator waits out
// (Settings.MaxBackwardWait resolved: the default for zero, 0 for never).
func (g *Generator) MaxBackwardWait() time.Duration {
	return time.Duration(g.maxWaitMS) * time.Millisecond
}

// SetFence replaces the fence; IDs issued after SetFence returns obey it.
func (g *Generator) SetFence(f Fence) {
	fs := &fenceState{floor: math.MinInt64, ceiling: math.MaxInt64, check: f.Check, fence: f}
	if f.Floor != 0 {
		fs.floor = f.Floor - g.epochMS
	}
	if f.Ceiling != 0 {
		fs.ceiling = f.Ceiling - g.epochMS
	}
	g.fence.Store(fs)
}

// Fence returns the fence in force.
func (g *Generator) Fence() Fence { return g.fence.Load().fence }

// LastTimestamp returns the timestamp of the last ID issued, in Unix
// milliseconds, or 0 if none was issued yet.
func (g *Generator) LastTimestamp() int64 { return g.lastTimestamp(g.state.Load()) }

func (g *Generator) lastTimestamp(s int64) int64 {
	if s == stateStopped {
		s = g.stoppedAt.Load()
	}
	if s < 0 {
		return 0
	}
	return s>>g.seqBits + g.epochMS
}

// Stop makes the generator refuse every later call with ErrStopped and
// returns the timestamp of the last ID it issued (Unix milliseconds, 0 if
// none). No ID is issued after Stop returns, not even by a call that was
// under way: the timestamp returned is final. Stop may be called again; it
// returns the same timestamp.
func (g *Generator) Stop() int64 {
	// stopMu orders concurrent Stops, so that stoppedAt holds the state the
	// winning swap replaced. Issuing never takes it.
	g.stopMu.Lock()
	defer g.stopMu.Unlock()
	for {
		old := g.state.Load()
		if old == stateStopped {
			return g.lastTimestamp(old)
		}
		g.stoppedAt.Store(old)
		if g.state.CompareAndSwap(old, stateStopped) {
			return g.lastTimestamp(old)
		}
	}
}

// Next returns the next ID. It returns a *RefusalError, wrapping one of
// ErrClockBackward, ErrBelowFloor, ErrAboveCeiling, ErrFenceCheck or
// ErrTimeOverflow, when it may not issue; it then issues nothing.
func (g *Generator) Next() (ID, error) {
	ts, seq, _, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	return ID(ts<<g.tsShift | g.node | seq), nil
}

// NextN appends n IDs to dst, in increasing order, and returns the extended
// slice. The IDs of one millisecond are reserved with a single atomic
// operation, so a batch costs little more than the sequence cap itself. On
// a refusal it returns the IDs appended so far and a *RefusalError as Next
// does.
func (g *Generator) NextN(dst []ID, n int) ([]ID, error) { return appendN(g, dst, n) }

// AppendInt64s is NextN for a slice of int64, the form the transports
// encode: it appends n IDs to dst with no copy through a slice of ID.
func (g *Generator) AppendInt64s(dst []int64, n int) ([]int64, error) { return appendN(g, dst, n) }

// appendN is NextN for any slice of 64-bit integers.
func appendN[T ~int64](g *Generator, dst []T, n int) ([]T, error) {
	for n > 0 {
		ts, seq, got, err := g.reserve(int64(n))
		if err != nil {
			return dst, err
		}
		base := ts<<g.tsShift | g.node | seq
		for i := int64(0); i < got; i++ {
			dst = append(dst, T(base+i))
		}
		n -= int(got)
	}
	return dst, nil
}

// reserve takes up to want consecutive sequence numbers of one millisecond
// and returns the timestamp (ms since the epoch), the first sequence number
// and how many it took (at least 1).
func (g *Generator) reserve(want int64) (ts, seq, got int64, err error) {
	ts, seq, got, d, wait, err := g.take(want)
	if !wait {
		return ts, seq, got, err
	}
	return g.reserveAfterWaits(want, d)
}

// reserveAfterWaits is reserve for a caller that must wait d first, and
// maybe again after that. A caller given its turn by another
// (sleeper.sleep) passes it on when it leaves, with IDs, an error or a
// panic (a Clock or a fence check that panics), unless it waits again. The
// path that issues without waiting (take, then return) has no deferred
// call: one cost about 10 ns per ID.
func (g *Generator) reserveAfterWaits(want int64, d time.Duration) (ts, seq, got int64, err error) {
	turn := false
	defer func() {
		if turn {
			g.wait.passOn()
		}
	}()
	for {
		turn = g.wait.sleep(g.clock, d)
		var wait bool
		if ts, seq, got, d, wait, err = g.take(want); !wait {
			return ts, seq, got, err
		}
	}
}

// take is reserve up to the first wait: when wait is true it has taken
// nothing, and the caller waits about d and calls it again.
func (g *Generator) take(want int64) (ts, seq, got int64, d time.Duration, wait bool, err error) {
	var nowNS int64
	lost := false // the last compare-and-swap failed: nowNS may be reused
	for {
		// Load the state before reading the clock: a reading taken before a
		// preemption could otherwise look older than IDs issued meanwhile
		// and pass for a backward step. With this order, a stale state only
		// makes the compare-and-swap fail.
		old := g.state.Load()
		// After a lost swap the reading, taken after the state that lost,
		// is reused unless the winner's timestamp lies beyond it: callers
		// contending at the cap then read the clock once per ID, not once
		// per attempt. (Reused, it can only be behind the winner's
		// millisecond, never pass for a backward step.)
		if !lost || old>>g.seqBits > nowNS/1e6-g.epochMS {
			if g.sys != nil {
				nowNS = g.sys.unixNano()
			} else {
				nowNS = g.clock.Now().UnixNano()
			}
		}
		nowMS := nowNS / 1e6
		now := nowMS - g.epochMS
		f := g.fence.Load()
		if old == stateStopped {
			return 0, 0, 0, 0, false, &RefusalError{Err: ErrStopped, NowMS: nowMS}
		}
		last := old >> g.seqBits
		lastSeq := old & g.seqMask

		switch {
		case now > last:
			ts = now
			seq = 0
			if g.randomStart && g.randomBound > 1 {
				seq = rand.Int64N(g.randomBound)
			}
		case old == stateNone:
			// Nothing issued yet and the clock lies before the epoch.
			return 0, 0, 0, 0, false, &RefusalError{Err: ErrTimeOverflow, NowMS: nowMS, LimitMS: g.maxTS + g.epochMS}
		case last-now > g.maxWaitMS:
			return 0, 0, 0, 0, false, &RefusalError{Err: ErrClockBackward, NowMS: nowMS, LimitMS: last + g.epochMS}
		case lastSeq < g.seqMask:
			// Same millisecond, or a clock step back small enough to wait
			// out: carry on from the last timestamp issued.
			ts = last
			seq = lastSeq + 1
		default:
			// The millisecond's sequence is used up: wait for the boundary.
			if g.cappedTS.Load() < last {
				g.cappedTS.Store(last)
			}
			return 0, 0, 0, time.Duration((last+1+g.epochMS)*1e6 - nowNS), true, nil
		}

		if ts < f.floor {
			if f.floor-now > g.maxWaitMS {
				return 0, 0, 0, 0, false, &RefusalError{Err: ErrBelowFloor, NowMS: nowMS, LimitMS: f.floor + g.epochMS}
			}
			return 0, 0, 0, time.Duration((f.floor+g.epochMS)*1e6 - nowNS), true, nil
		}
		if ts > f.ceiling {
			return 0, 0, 0, 0, false, &RefusalError{Err: ErrAboveCeiling, NowMS: nowMS, LimitMS: f.ceiling + g.epochMS}
		}
		if ts < 0 || ts > g.maxTS {
			return 0, 0, 0, 0, false, &RefusalError{Err: ErrTimeOverflow, NowMS: nowMS, LimitMS: g.maxTS + g.epochMS}
		}
		if f.check != nil {
			if cerr := f.check(); cerr != nil {
				return 0, 0, 0, 0, false, &RefusalError{Err: ErrFenceCheck, Cause: cerr, NowMS: nowMS}
			}
		}

		got = min(want, g.seqMask-seq+1)
		if g.state.CompareAndSwap(old, ts<<g.seqBits|(seq+got-1)) {
			return ts, seq, got, 0, false, nil
		}
		if want == 1 {
			if yd, yield := g.yieldAtCap(nowNS); yield {
				return 0, 0, 0, yd, true, nil
			}
		}
		lost = true
	}
}

// yieldAtCap is called by a caller of Next that lost a compare-and-swap.
// When the millisecond before the winner's ran out of sequence numbers,
// the callers ask for more IDs than a millisecond holds and each of them
// waits for a boundary sooner or later; retrying at once would keep two
// cores contending for the state, each attempt a cache miss on both, for
// as long as the millisecond's IDs last (docs/benchmarks.md, "the loser of
// a swap waits"). So the loser waits for the next millisecond with the
// sleeper, and the winner issues on alone. wait reports that the loser
// waits, about d.
//
// The millisecond loses no IDs as long as the winner or a later caller
// keeps asking; if none does, the next millisecond follows one that did
// not run out, and losers retry at once again.
func (g *Generator) yieldAtCap(nowNS int64) (d time.Duration, wait bool) {
	cur := g.state.Load()
	if cur < 0 {
		return 0, false // none issued yet, or stopped: the loop decides
	}
	curTS := cur >> g.seqBits
	if g.cappedTS.Load() < curTS-1 {
		return 0, false
	}
	return time.Duration((curTS+1+g.epochMS)*1e6 - nowNS), true
}

// A sleeper makes the goroutines that must wait for the clock share one
// sleep: the first to arrive sleeps on the clock, the others queue. At the
// sequence cap every waiting caller needs the same thing, the next
// millisecond, so one precise sleep per generator serves them all, however
// many there are, instead of each running its own (every precise sleep
// holds an OS thread in a system call and costs a wake-up).
//
// The queue is woken one caller at a time, first come first: the sleep's
// end gives the first its turn, and a caller given its turn passes it on to
// the next when it leaves reserve, with IDs or with an error. A caller given
// its turn that finds the millisecond used up sleeps again instead, and the
// next sleep's end goes on with the queue. So callers are served in the
// order they came, and at the cap a millisecond wakes about as many callers
// as it serves rather than every caller waiting (docs/benchmarks.md, "one
// turn at a time").
//
// It starts no goroutine: the sleeper is whichever caller came first. The
// path that issues without waiting never touches it.
//
// Lock discipline: mu guards sleeping and queue; nobody holds it while
// sleeping on the clock or waiting for a turn.
type sleeper struct {
	mu       sync.Mutex
	sleeping bool            // a caller is sleeping on the clock
	queue    []chan struct{} // the turns of the callers waiting, in arrival order
}

// sleep blocks the caller for about d: on the clock when nobody else is
// sleeping, else until it is given its turn. A caller woken early (the sleep
// under way aimed at an earlier instant) finds out when it reads the clock
// again and calls sleep again. The callers' compare-and-swap decides who
// issues what, so the order of the turns cannot break the order of the IDs.
// woken reports a turn given by another caller, which the caller must pass
// on (passOn) unless it calls sleep again.
func (s *sleeper) sleep(clock Clock, d time.Duration) (woken bool) {
	s.mu.Lock()
	if s.sleeping {
		turn := make(chan struct{}, 1)
		s.queue = append(s.queue, turn)
		s.mu.Unlock()
		<-turn
		return true
	}
	s.sleeping = true
	s.mu.Unlock()
	defer s.wake() // also when a Clock's Sleep panics: nobody waits forever
	clock.Sleep(d)
	return false
}

// wake ends the sleep on the clock and gives the first caller queued its
// turn.
func (s *sleeper) wake() {
	s.mu.Lock()
	s.sleeping = false
	s.passOnLocked()
	s.mu.Unlock()
}

// passOn gives the next caller queued its turn.
func (s *sleeper) passOn() {
	s.mu.Lock()
	s.passOnLocked()
	s.mu.Unlock()
}

func (s *sleeper) passOnLocked() {
	if len(s.queue) == 0 {
		return
	}
	turn := s.queue[0]
	n := copy(s.queue, s.queue[1:])
	s.queue[n] = nil
	s.queue = s.queue[:n]
	turn <- struct{}{} // buffered: never blocks
}
