package allocator

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/internal/backoff"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults and limits of KeeperSettings.
const (
	DefaultLeaseTTL        = 30 * time.Second
	DefaultMaxCeilingAhead = 5 * time.Second
	DefaultMaxClockOffset  = 5 * time.Second
	// MinLeaseTTL is the shortest lease: a heartbeat must make the round
	// trip within it, with time to retry.
	MinLeaseTTL = time.Second
	// MaxBackwardWaitLimit bounds KeeperSettings.MaxBackwardWait.
	MaxBackwardWaitLimit = time.Second
	// MaxClockOffsetLimit bounds KeeperSettings.MaxClockOffset, and so how
	// long beyond ttl a crashed holder can keep its worker ID.
	MaxClockOffsetLimit = time.Minute
)

// Claims back off from claimBackoffMin up to one heartbeat interval, at
// most claimBackoffMax, so a node claims again soon after its database is back.
const (
	claimBackoffMin = 100 * time.Millisecond
	claimBackoffMax = 5 * time.Second
)

// Errors of the lease keeper, wrapped with ErrUnavailable when they stop issuing.
var (
	// ErrNoLease: the keeper holds no lease.
	ErrNoLease = errors.New("no worker lease held")
	// ErrLeaseExpired: the local lease deadline passed without a heartbeat.
	ErrLeaseExpired = errors.New("lease deadline passed without a heartbeat")
	// ErrClockOffset: the clock is too far from database time.
	ErrClockOffset = errors.New("clock offset from database time too large")
	// ErrKeeperClosed: Close was called.
	ErrKeeperClosed = errors.New("lease keeper closed")
)

// WorkerRange is an inclusive range of worker IDs.
type WorkerRange struct{ Min, Max int64 }

// KeeperSettings configure a Keeper; the zero value means the defaults.
// Resolve fills them in and checks each field's rule.
type KeeperSettings struct {
	// Layout is the Snowflake layout; zero means the default.
	Layout snowflake.Layout
	// DatacenterID must fit the layout.
	DatacenterID int64
	// WorkerIDs is the pool (nil: every worker ID of the layout), at most
	// MaxPoolSize IDs.
	WorkerIDs *WorkerRange
	// Holder names this node (at most MaxHolderLen bytes, not starting with
	// RemoteHolderPrefix); "" means host/pid/random.
	Holder string
	// TTL is the lease time to live: at least MinLeaseTTL, default 30 s.
	TTL time.Duration
	// Heartbeat is the heartbeat interval: up to TTL/2, default TTL/3.
	Heartbeat time.Duration
	// Margin is taken off the local deadline (monotonic send time + TTL):
	// below TTL/2, default TTL/10.
	Margin time.Duration
	// MaxCeilingAhead: skip worker IDs whose ceiling lies further ahead of
	// this clock (default 5 s).
	MaxCeilingAhead time.Duration
	// MaxClockOffset: beyond this offset from database time the node refuses
	// to issue; ceilings lie at most TTL + MaxClockOffset ahead (default 5 s).
	MaxClockOffset time.Duration
	// MaxBackwardWait is the largest backward clock step waited out: zero
	// means the snowflake default, negative never waits.
	MaxBackwardWait time.Duration
	// RandomSequenceStart: see snowflake.Settings.
	RandomSequenceStart bool
	// Clock is the wall clock IDs carry (nil: system clock); deadlines use
	// the monotonic clock.
	Clock snowflake.Clock
	// Logger receives lease events; nil discards them.
	Logger *slog.Logger
}

// Resolve returns s with defaults filled in (not Holder, Clock or Logger),
// or an error wrapping snowflake.ErrInvalidLayout or ErrInvalidSettings
// that names the field. It is idempotent.
func (s KeeperSettings) Resolve() (KeeperSettings, error) {
	if s.Layout.IsZero() {
		s.Layout = snowflake.DefaultLayout()
	}
	l := s.Layout
	if err := l.Validate(); err != nil {
		return KeeperSettings{}, err
	}
	if s.DatacenterID < 0 || s.DatacenterID > l.MaxDatacenter() {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.DatacenterID %d: the layout allows 0 to %d", s.DatacenterID, l.MaxDatacenter())
	}
	if r := s.WorkerIDs; r != nil {
		switch {
		case r.Min < 0 || r.Max > l.MaxWorker() || r.Min > r.Max:
			return KeeperSettings{}, invalidSettings("invalid KeeperSettings.WorkerIDs %d-%d: the layout allows 0 to %d", r.Min, r.Max, l.MaxWorker())
		case r.Max-r.Min >= MaxPoolSize:
			return KeeperSettings{}, invalidSettings("invalid KeeperSettings.WorkerIDs %d-%d: %d worker IDs, want at most %d",
				r.Min, r.Max, r.Max-r.Min+1, MaxPoolSize)
		}
	} else if n := l.MaxWorker() + 1; n > MaxPoolSize {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.WorkerIDs (left out): the layout has %d worker IDs, "+
			"more than the %d one pool may hold; give a range of at most %d", n, MaxPoolSize, MaxPoolSize)
	}
	if len(s.Holder) > MaxHolderLen {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.Holder of %d bytes: want at most %d", len(s.Holder), MaxHolderLen)
	}
	if strings.HasPrefix(s.Holder, RemoteHolderPrefix) {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.Holder %q: names starting with %q belong to holders of the lease API", s.Holder, RemoteHolderPrefix)
	}
	if s.TTL == 0 {
		s.TTL = DefaultLeaseTTL
	}
	if s.TTL < MinLeaseTTL {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.TTL %s: want at least %s", s.TTL, MinLeaseTTL)
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = DefaultHeartbeat(s.TTL)
	}
	if s.Heartbeat < 0 || s.Heartbeat > s.TTL/2 {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.Heartbeat %s: want more than 0 and at most half of KeeperSettings.TTL %s",
			s.Heartbeat, s.TTL)
	}
	if s.Margin == 0 {
		s.Margin = DefaultMargin(s.TTL)
	}
	if s.Margin < 0 || s.Margin >= s.TTL/2 {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.Margin %s: want at least 0 and less than half of KeeperSettings.TTL %s", s.Margin, s.TTL)
	}
	if s.MaxCeilingAhead == 0 {
		s.MaxCeilingAhead = DefaultMaxCeilingAhead
	}
	if s.MaxCeilingAhead < 0 {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.MaxCeilingAhead %s: want at least 0", s.MaxCeilingAhead)
	}
	if s.MaxClockOffset == 0 {
		s.MaxClockOffset = DefaultMaxClockOffset
	}
	if s.MaxClockOffset < 0 || s.MaxClockOffset > MaxClockOffsetLimit {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.MaxClockOffset %s: want at least 0 and at most %s", s.MaxClockOffset, MaxClockOffsetLimit)
	}
	if s.MaxBackwardWait == 0 {
		s.MaxBackwardWait = snowflake.DefaultMaxBackwardWait
	}
	if s.MaxBackwardWait > MaxBackwardWaitLimit {
		return KeeperSettings{}, invalidSettings("invalid KeeperSettings.MaxBackwardWait %s: want at most %s", s.MaxBackwardWait, MaxBackwardWaitLimit)
	}
	return s, nil
}

// DefaultHeartbeat is a third of ttl, leaving time to retry a heartbeat.
// Remote holders are told the same.
func DefaultHeartbeat(ttl time.Duration) time.Duration { return ttl / 3 }

// DefaultMargin is a tenth of ttl. Remote holders are told the same.
func DefaultMargin(ttl time.Duration) time.Duration { return ttl / 10 }

func (s KeeperSettings) pool() WorkerRange {
	if s.WorkerIDs != nil {
		return *s.WorkerIDs
	}
	return WorkerRange{0, s.Layout.MaxWorker()}
}

// invalidSettings returns an error wrapping snowflake.ErrInvalidSettings.
func invalidSettings(format string, args ...any) error {
	return &settingsError{msg: fmt.Sprintf(format, args...)}
}

type settingsError struct{ msg string }

func (e *settingsError) Error() string { return e.msg }
func (e *settingsError) Unwrap() error { return snowflake.ErrInvalidSettings }

// leaseState is the lease held; only deadline changes after publishing.
type leaseState struct {
	lease    Lease // as claimed; CeilingMS is the claim's ceiling
	floorMS  int64 // first timestamp this holder may use
	gen      *snowflake.Generator
	deadline atomic.Int64 // monotonic ns (since Keeper.monoBase); 0 revokes
	ceiling  atomic.Int64 // committed ceiling, Unix ms
	hbAt     atomic.Int64 // database time of the last heartbeat, Unix ns
	// issued counts IDs since the last block report; fromMS is where that
	// report ended. Only the run loop and Close touch fromMS.
	issued atomic.Int64
	fromMS int64
}

// takeBlock returns what ls issued since its last report and starts the
// next. The count is taken before the timestamp, so every counted ID lies
// at or below ToMS.
func (ls *leaseState) takeBlock() Block {
	n := ls.issued.Swap(0)
	if n == 0 {
		return Block{}
	}
	b := Block{Count: n, FromMS: max(ls.fromMS, ls.floorMS), ToMS: ls.gen.LastTimestamp()}
	ls.fromMS = b.ToMS
	return b
}

// Keeper claims a worker ID from the lease table, keeps it with heartbeats
// and issues Snowflake IDs only while it can prove it owns it.
//
// Its generator's fence: floor just above the previous holder's ceiling,
// ceiling the one the database last committed, validity ending at the
// local deadline. So two holders of one worker ID use disjoint timestamps
// whatever their clocks or pauses.
type Keeper struct {
	store    LeaseStore
	s        KeeperSettings
	layout   snowflake.Layout
	pool     WorkerRange
	logger   *slog.Logger
	clock    snowflake.Clock
	monoBase time.Time
	mono     func() time.Duration // monotonic time since monoBase; tests substitute a fake clock

	cur atomic.Pointer[leaseState] // nil when no lease is held

	offsetNS  atomic.Int64 // last measured offset of database time from the node's clock
	dbRef     atomic.Pointer[dbReading]
	offsetBad atomic.Bool
	dbOK      atomic.Bool // the last database call succeeded
	poolFull  atomic.Bool // the last claim found no worker ID free (warned once)
	lastErr   atomic.Pointer[string]
	// storeFull: the database is out of space (ErrStoreFull) and no claim or
	// heartbeat has succeeded since; other failures do not clear it.
	storeFull atomic.Bool

	claims, takeovers, lost, heartbeatFailures, releases atomic.Int64

	// kickC asks the loop to look at its schedule now (clock stepped back);
	// kicks coalesce.
	kickC chan struct{}

	// mu guards the lifecycle fields below; the run loop owns lease changes.
	mu      sync.Mutex
	started bool
	closed  bool
	stopC   chan struct{}
	abortC  chan struct{} // Close's ctx ended: cancel the loop's call in flight
	doneC   chan struct{}
}

// NewKeeper returns a keeper for store; it touches nothing until Start.
// Bad settings return errors as Resolve.
func NewKeeper(store LeaseStore, s KeeperSettings) (*Keeper, error) {
	s, err := s.Resolve()
	if err != nil {
		return nil, err
	}
	if s.Holder == "" {
		s.Holder = defaultHolder()
	}
	if s.Clock == nil {
		s.Clock = snowflake.SystemClock()
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	base := time.Now()
	return &Keeper{
		store:    store,
		s:        s,
		layout:   s.Layout,
		pool:     s.pool(),
		logger:   logger.With("component", "lease"),
		clock:    s.Clock,
		monoBase: base,
		mono:     func() time.Duration { return time.Since(base) },
		kickC:    make(chan struct{}, 1),
	}, nil
}

func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = crand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Layout returns the Snowflake layout in use.
func (k *Keeper) Layout() snowflake.Layout { return k.layout }

// Holder returns the name this node uses in the lease table.
func (k *Keeper) Holder() string { return k.s.Holder }

// Start checks the layout recorded in the database (ErrLayoutMismatch)
// and starts the claim loop; Ready says when IDs can be issued.
func (k *Keeper) Start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return ErrKeeperClosed
	}
	if k.started {
		return errors.New("lease keeper already started")
	}
	stored, err := k.store.EnsureLayout(ctx, k.layout)
	if err != nil {
		return fmt.Errorf("check snowflake layout: %w", err)
	}
	if d := k.layout.Diff(stored); d != "" {
		return fmt.Errorf("%w: configured vs stored: %s", ErrLayoutMismatch, d)
	}
	k.started = true
	k.stopC = make(chan struct{})
	k.abortC = make(chan struct{})
	k.doneC = make(chan struct{})
	go k.run()
	return nil
}

// Close stops issuing and releases the lease, lowering its ceiling to the
// last timestamp used. A call in flight is let finish so its block report
// reaches the audit trail; ctx bounds that wait and the release.
func (k *Keeper) Close(ctx context.Context) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	started := k.started
	k.mu.Unlock()
	if started {
		close(k.stopC)
		select {
		case <-k.doneC:
		case <-ctx.Done():
			close(k.abortC)
			<-k.doneC
		}
	}
	ls := k.cur.Swap(nil)
	if ls == nil {
		return nil
	}
	return k.release(ctx, ls)
}

// release stops ls's generator and gives the lease back (ReleaseCeiling).
// A lease already lost is logged, not an error.
func (k *Keeper) release(ctx context.Context, ls *leaseState) error {
	ls.deadline.Store(0)
	last := ls.gen.Stop()
	ceiling, err := k.store.Release(ctx, ReleaseRequest{
		Key: ls.lease.LeaseKey, Holder: k.s.Holder, FencingVersion: ls.lease.FencingVersion, LastTimestampMS: last,
		Block: ls.takeBlock(),
	})
	if errors.Is(err, ErrLeaseLost) {
		k.logger.Warn("lease gone before its release (expired, evicted or taken over); its ceiling stays",
			"datacenter", ls.lease.DatacenterID, "worker", ls.lease.WorkerID, "fencing_version", ls.lease.FencingVersion, "err", err)
		return nil
	}
	if err != nil {
		k.logger.Warn("lease release failed; it will expire", "datacenter", ls.lease.DatacenterID, "worker", ls.lease.WorkerID, "err", err)
		return fmt.Errorf("release worker %d: %w", ls.lease.WorkerID, err)
	}
	k.releases.Add(1)
	k.logger.Info("lease released", "datacenter", ls.lease.DatacenterID, "worker", ls.lease.WorkerID,
		"fencing_version", ls.lease.FencingVersion, "ceiling_ms", ceiling)
	return nil
}

// Next returns a Snowflake ID, or an error wrapping ErrUnavailable (and
// the reason) when it cannot prove its lease.
func (k *Keeper) Next() (snowflake.ID, error) {
	ls := k.cur.Load()
	if ls == nil {
		return 0, k.noLease()
	}
	id, err := ls.gen.Next()
	if err != nil {
		return 0, k.refused(err)
	}
	ls.issued.Add(1)
	return id, nil
}

// LeaseToken identifies the lease that issued IDs; a greater
// FencingVersion is a later holder.
type LeaseToken struct {
	DatacenterID   int64
	WorkerID       int64
	FencingVersion int64
}

// NextSnowflakesFenced appends n IDs from one lease to dst and returns
// them with its token. Errors as Next, with the IDs appended so far.
func (k *Keeper) NextSnowflakesFenced(dst []int64, n int) ([]int64, LeaseToken, error) {
	ls := k.cur.Load()
	if ls == nil {
		return dst, LeaseToken{}, k.noLease()
	}
	tok := LeaseToken{DatacenterID: ls.lease.DatacenterID, WorkerID: ls.lease.WorkerID, FencingVersion: ls.lease.FencingVersion}
	start := len(dst)
	dst, err := ls.gen.AppendInt64s(dst, n)
	ls.issued.Add(int64(len(dst) - start))
	if err != nil {
		return dst, tok, k.refused(err)
	}
	return dst, tok, nil
}

// SmallestIDNow returns the smallest Snowflake ID of this millisecond.
func (k *Keeper) SmallestIDNow() int64 { return int64(k.layout.SmallestID(k.clock.Now())) }

func (k *Keeper) noLease() error {
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrKeeperClosed)
	}
	return k.full(fmt.Errorf("%w: %w", ErrUnavailable, ErrNoLease))
}

func (k *Keeper) refused(err error) error {
	if errors.Is(err, snowflake.ErrClockBackward) {
		// Ask the loop for a worker ID whose ceiling lies below the clock.
		select {
		case k.kickC <- struct{}{}:
		default:
		}
	}
	return k.full(fmt.Errorf("%w: %w", ErrUnavailable, err))
}

// check is the generator's validity check: deadline and clock offset.
func (k *Keeper) check(ls *leaseState) func() error {
	return func() error {
		if int64(k.mono()) >= ls.deadline.Load() {
			return ErrLeaseExpired
		}
		if k.offsetBad.Load() {
			return ErrClockOffset
		}
		return nil
	}
}

// Ready returns nil when a provable lease is held and the clock passed its
// floor, else an error wrapping ErrUnavailable.
func (k *Keeper) Ready() error {
	ls := k.cur.Load()
	if ls == nil {
		return k.noLease()
	}
	if err := k.check(ls)(); err != nil {
		return k.full(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	if now := k.clock.Now().UnixMilli(); now < ls.floorMS {
		return fmt.Errorf("%w: clock %d ms below the lease's floor", ErrUnavailable, ls.floorMS-now)
	}
	if k.clockSteppedBack(ls) {
		return fmt.Errorf("%w: %w", ErrUnavailable, snowflake.ErrClockBackward)
	}
	return nil
}

// KeeperStatus is a snapshot of the keeper for metrics and status pages.
type KeeperStatus struct {
	Holder         string
	DatacenterID   int64       // the datacenter the keeper claims in
	Pool           WorkerRange // the worker IDs it claims from
	Held           bool
	Lease          Lease         // the lease as claimed (valid when Held)
	CeilingMS      int64         // ceiling committed now
	FloorMS        int64         // first timestamp usable under this lease
	ValidFor       time.Duration // until the local deadline; <= 0 when passed
	LastHeartbeat  time.Time     // database time
	ClockOffset    time.Duration // database time minus node time, last measured
	DatabaseOK     bool
	LastError      string
	Ready          bool
	Claims         int64
	Takeovers      int64
	Lost           int64
	HeartbeatFails int64
	Releases       int64
}

// Status returns a snapshot of the keeper.
func (k *Keeper) Status() KeeperStatus {
	st := KeeperStatus{
		Holder:         k.s.Holder,
		DatacenterID:   k.s.DatacenterID,
		Pool:           k.s.pool(),
		ClockOffset:    time.Duration(k.offsetNS.Load()),
		DatabaseOK:     k.dbOK.Load(),
		Ready:          k.Ready() == nil,
		Claims:         k.claims.Load(),
		Takeovers:      k.takeovers.Load(),
		Lost:           k.lost.Load(),
		HeartbeatFails: k.heartbeatFailures.Load(),
		Releases:       k.releases.Load(),
	}
	if p := k.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	if ls := k.cur.Load(); ls != nil {
		st.Held = true
		st.Lease = ls.lease
		st.CeilingMS = ls.ceiling.Load()
		st.FloorMS = ls.floorMS
		st.ValidFor = time.Duration(ls.deadline.Load()) - k.mono()
		st.LastHeartbeat = time.Unix(0, ls.hbAt.Load()).UTC()
	}
	return st
}

// run claims and keeps a lease until stopC closes; only it changes k.cur.
func (k *Keeper) run() {
	defer close(k.doneC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-k.abortC:
			cancel()
		case <-ctx.Done():
		}
	}()
	l := k.newLoop()
	for {
		if !k.sleep(k.step(ctx, l)) {
			return
		}
	}
}

// loop is the run loop's schedule, on the monotonic clock.
type loop struct {
	claimBackoff *backoff.Backoff // claims while no lease is held
	moveBackoff  *backoff.Backoff // moves away from a worker ID the clock stepped back on
	hbBackoff    *backoff.Backoff // heartbeats after a failed one
	nextClaim    time.Duration    // no claim before this
	nextMove     time.Duration    // no move before this
	nextHB       time.Duration    // the next heartbeat is due then
}

func (k *Keeper) newLoop() *loop {
	hi := min(claimBackoffMax, k.s.Heartbeat)
	return &loop{
		claimBackoff: backoff.New(claimBackoffMin, hi),
		moveBackoff:  backoff.New(claimBackoffMin, hi),
		hbBackoff:    backoff.New(k.s.Heartbeat/10, k.s.Heartbeat),
	}
}

// step does what is due and returns the wait until the next step. Kicks
// end the wait early but never make more happen: at most one move per
// backoff step, and heartbeats keep their schedule.
func (k *Keeper) step(ctx context.Context, l *loop) time.Duration {
	now := k.mono()
	ls := k.cur.Load()
	if ls == nil {
		if now < l.nextClaim {
			return l.nextClaim - now
		}
		if k.claim(ctx, nil) {
			l.claimBackoff.Reset()
			l.nextHB = k.mono() + k.s.Heartbeat
			return k.s.Heartbeat
		}
		d := l.claimBackoff.Next()
		l.nextClaim = k.mono() + d
		return d
	}

	steppedBack := k.clockSteppedBack(ls)
	if !steppedBack {
		l.moveBackoff.Reset()
		l.nextMove = 0
	} else if now >= l.nextMove {
		// Prefer a worker ID below the clock; else keep refusing on this one.
		if k.claim(ctx, ls) {
			l.moveBackoff.Reset()
			l.nextMove = 0
			l.nextHB = k.mono() + k.s.Heartbeat
			return k.s.Heartbeat
		}
		l.nextMove = k.mono() + l.moveBackoff.Next()
	}

	if now >= l.nextHB {
		switch err := k.heartbeat(ctx, ls); {
		case err == nil:
			l.hbBackoff.Reset()
			l.nextHB = k.mono() + k.s.Heartbeat
		case errors.Is(err, ErrLeaseLost):
			l.nextClaim = 0
			return 0 // claim afresh at once
		case ctx.Err() != nil:
			return 0
		default:
			l.nextHB = k.mono() + l.hbBackoff.Next()
		}
	}
	next := l.nextHB
	if steppedBack {
		next = min(next, l.nextMove)
	}
	return max(next-k.mono(), 0)
}

// sleep waits d, or until kicked; it returns false once the keeper stops.
func (k *Keeper) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-k.stopC:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-k.stopC:
		return false
	case <-t.C:
	case <-k.kickC:
	}
	return true
}

// clockSteppedBack reports a backward step larger than the generator waits.
func (k *Keeper) clockSteppedBack(ls *leaseState) bool {
	last := ls.gen.LastTimestamp()
	return last != 0 && k.clock.Now().UnixMilli() < last-ls.gen.MaxBackwardWait().Milliseconds()
}

// claim claims and publishes a worker ID. With old set (clock stepped
// back) it only takes one whose ceiling is below the clock, then releases
// old. It reports whether it claimed a lease.
func (k *Keeper) claim(ctx context.Context, old *leaseState) bool {
	nowMS := k.clock.Now().UnixMilli()
	ceiling := k.proposeCeiling()
	maxPrev := nowMS + k.s.MaxCeilingAhead.Milliseconds()
	if old != nil {
		maxPrev = nowMS - 1
	}
	sent := k.mono()
	cctx, cancel := context.WithTimeout(ctx, k.s.TTL-k.s.Margin)
	res, err := k.store.Claim(cctx, ClaimRequest{
		DatacenterID:     k.s.DatacenterID,
		MinWorkerID:      k.pool.Min,
		MaxWorkerID:      k.pool.Max,
		Holder:           k.s.Holder,
		TTL:              k.s.TTL,
		CeilingMS:        ceiling,
		MaxClockOffset:   k.s.MaxClockOffset,
		MaxPrevCeilingMS: maxPrev,
	})
	cancel()
	if err != nil {
		k.noteErr(err)
		if errors.Is(err, ErrNoWorkerAvailable) {
			k.dbOK.Store(true)
			if old == nil {
				// Warn once per spell of a full pool.
				level := slog.LevelDebug
				if !k.poolFull.Swap(true) {
					level = slog.LevelWarn
				}
				k.logger.Log(context.Background(), level, "no worker ID available; retrying", "datacenter", k.s.DatacenterID,
					"pool", fmt.Sprintf("%d-%d", k.pool.Min, k.pool.Max))
			}
		} else {
			k.dbOK.Store(false)
			k.logger.Warn("claim failed", "err", err)
		}
		return false
	}
	k.dbOK.Store(true)
	k.lastErr.Store(nil)
	k.noteOK()
	k.poolFull.Store(false)
	k.measureOffset(res.DBNow, sent)

	ls := &leaseState{lease: res.Lease, floorMS: res.PrevCeilingMS + 1}
	ls.deadline.Store(int64(sent + k.s.TTL - k.s.Margin))
	ls.ceiling.Store(res.Lease.CeilingMS)
	ls.hbAt.Store(res.DBNow.UnixNano())
	gen, err := snowflake.NewGenerator(snowflake.Settings{
		Layout:              k.layout,
		DatacenterID:        res.Lease.DatacenterID,
		WorkerID:            res.Lease.WorkerID,
		MaxBackwardWait:     k.s.MaxBackwardWait,
		RandomSequenceStart: k.s.RandomSequenceStart,
		Clock:               k.clock,
		Fence:               snowflake.Fence{Floor: ls.floorMS, Ceiling: res.Lease.CeilingMS, Check: k.check(ls)},
	})
	if err != nil { // settings were validated in NewKeeper
		k.logger.Error("cannot build generator for claimed lease", "err", err)
		return false
	}
	ls.gen = gen
	k.cur.Store(ls)
	k.claims.Add(1)
	if res.PrevHolder != "" && res.PrevHolder != k.s.Holder {
		k.takeovers.Add(1)
	}
	k.logger.Info("lease acquired", "datacenter", res.Lease.DatacenterID, "worker", res.Lease.WorkerID,
		"fencing_version", res.Lease.FencingVersion, "floor_ms", ls.floorMS, "ceiling_ms", res.Lease.CeilingMS,
		"previous_holder", res.PrevHolder)
	if old != nil {
		rctx, cancel := context.WithTimeout(ctx, k.s.TTL-k.s.Margin)
		_ = k.release(rctx, old)
		cancel()
	}
	return true
}

// heartbeat extends ls, moving the ceiling only after the database
// committed it. On ErrLeaseLost it stops issuing and drops ls.
func (k *Keeper) heartbeat(ctx context.Context, ls *leaseState) error {
	ceiling := k.proposeCeiling()
	sent := k.mono()
	// Give up on a heartbeat that could not land before the deadline.
	timeout := max(time.Duration(ls.deadline.Load())-sent, k.s.Heartbeat)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	block := ls.takeBlock()
	lease, dbNow, err := k.store.Heartbeat(hctx, HeartbeatRequest{
		Key: ls.lease.LeaseKey, Holder: k.s.Holder, FencingVersion: ls.lease.FencingVersion,
		TTL: k.s.TTL, CeilingMS: ceiling, MaxClockOffset: k.s.MaxClockOffset, Block: block,
	})
	cancel()
	switch {
	case err == nil:
		k.dbOK.Store(true)
		k.lastErr.Store(nil)
		k.noteOK()
		k.measureOffset(dbNow, sent)
		ls.ceiling.Store(lease.CeilingMS)
		f := ls.gen.Fence()
		f.Ceiling = lease.CeilingMS
		ls.gen.SetFence(f)
		ls.hbAt.Store(dbNow.UnixNano())
		ls.deadline.Store(int64(sent + k.s.TTL - k.s.Margin))
		return nil
	case errors.Is(err, ErrLeaseLost):
		k.dbOK.Store(true)
		ls.deadline.Store(0)
		last := ls.gen.Stop()
		k.cur.CompareAndSwap(ls, nil)
		k.lost.Add(1)
		k.noteErr(err)
		k.logger.Error("lease lost; stopped issuing and claiming afresh", "datacenter", ls.lease.DatacenterID,
			"worker", ls.lease.WorkerID, "fencing_version", ls.lease.FencingVersion, "last_timestamp_ms", last)
		ev := LeaseEvent{LeaseKey: ls.lease.LeaseKey, Holder: k.s.Holder, FencingVersion: ls.lease.FencingVersion,
			Kind: EventLost, Detail: fmt.Sprintf("heartbeat matched no row; last timestamp used %d", last), Block: ls.takeBlock()}
		ectx, cancel := context.WithTimeout(ctx, k.s.Heartbeat)
		if rerr := k.store.RecordLeaseEvent(ectx, ev); rerr != nil {
			k.logger.Warn("could not record lost lease", "err", rerr)
		}
		cancel()
		return err
	default:
		k.dbOK.Store(false)
		k.heartbeatFailures.Add(1)
		k.noteErr(err)
		k.logger.Warn("heartbeat failed", "worker", ls.lease.WorkerID, "valid_for", time.Duration(ls.deadline.Load())-k.mono(), "err", err)
		return err
	}
}

// proposeCeiling returns clock + ttl, capped at the allowed offset beyond
// the expected database time, so a wall clock jump cannot push a ceiling
// out of reach. The store applies the same bound; this is the second line.
func (k *Keeper) proposeCeiling() int64 {
	c := k.clock.Now().UnixMilli() + k.s.TTL.Milliseconds()
	if ref := k.dbRef.Load(); ref != nil {
		expected := ref.dbNow.Add(k.mono() - ref.mono)
		c = min(c, expected.Add(k.s.TTL+k.s.MaxClockOffset).UnixMilli())
	}
	return c
}

// dbReading is a database time and the monotonic time it was taken at.
type dbReading struct {
	dbNow time.Time
	mono  time.Duration
}

// measureOffset records database minus node time at the round trip's middle.
func (k *Keeper) measureOffset(dbNow time.Time, sent time.Duration) {
	if dbNow.IsZero() {
		return
	}
	k.dbRef.Store(&dbReading{dbNow: dbNow, mono: sent + (k.mono()-sent)/2})
	rtt := k.mono() - sent
	local := k.clock.Now().Add(-rtt / 2)
	off := dbNow.Sub(local)
	k.offsetNS.Store(int64(off))
	bad := off > k.s.MaxClockOffset || off < -k.s.MaxClockOffset
	if bad != k.offsetBad.Swap(bad) {
		if bad {
			k.logger.Error("clock offset from database time beyond the limit; refusing to issue", "offset", off, "limit", k.s.MaxClockOffset)
		} else {
			k.logger.Info("clock offset back within the limit", "offset", off)
		}
	}
}

func (k *Keeper) noteErr(err error) {
	s := err.Error()
	k.lastErr.Store(&s)
	if errors.Is(err, ErrStoreFull) && !k.storeFull.Swap(true) {
		k.logger.Error("the database is out of space and refuses every write: the lease cannot be claimed or renewed "+
			"until an operator frees space (etcd: compact, defragment, disarm the NOSPACE alarm; see docs/operations.md)", "err", err)
	}
}

// noteOK records that a claim or heartbeat got through.
func (k *Keeper) noteOK() {
	if k.storeFull.Swap(false) {
		k.logger.Info("the database accepts writes again")
	}
}

// full returns err, also naming ErrStoreFull while storeFull.
func (k *Keeper) full(err error) error {
	if k.storeFull.Load() {
		return fmt.Errorf("%w (%w)", err, ErrStoreFull)
	}
	return err
}
