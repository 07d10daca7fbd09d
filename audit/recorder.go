package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/backoff"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults of RecorderSettings.
const (
	DefaultBuffer        = 65536
	DefaultBatchSize     = 1000
	DefaultFlushInterval = time.Second
	DefaultBlockInterval = time.Second
	DefaultSendTimeout   = 10 * time.Second
	// MaxBuffer bounds RecorderSettings.Buffer (some 500 MiB full).
	MaxBuffer = 1 << 20
)

// Sink is where a Recorder sends its batches.
type Sink interface {
	// Write sends events in order. On an error the batch is sent again;
	// the sink deduplicates by event ID.
	Write(ctx context.Context, events []Event) error
	// String names the sink, without secrets.
	String() string
	// Close releases what the sink holds (a file).
	Close() error
}

// RecorderSettings configure a Recorder; zero fields take the defaults.
type RecorderSettings struct {
	// Node is the recording node's holder name, written to every event.
	Node string
	// Buffer is how many events may wait, 1 to MaxBuffer; beyond it new
	// events are dropped and counted.
	Buffer int
	// BatchSize is the most events per Write, 1 to Buffer; a partial
	// batch waits up to FlushInterval.
	BatchSize int
	// FlushInterval is the longest an event waits to be sent.
	FlushInterval time.Duration
	// BlockInterval: at most one block record per lease per interval.
	BlockInterval time.Duration
	// SendTimeout bounds one Write.
	SendTimeout time.Duration
	// Clock stamps events and times block records; nil is the system clock.
	Clock snowflake.Clock
	// Logger receives the recorder's log; nil discards it.
	Logger *slog.Logger
}

// Resolve returns s with defaults filled in, or an out-of-range error.
func (s RecorderSettings) Resolve() (RecorderSettings, error) {
	if s.Buffer == 0 {
		s.Buffer = DefaultBuffer
	}
	if s.Buffer < 1 || s.Buffer > MaxBuffer {
		return s, fmt.Errorf("invalid RecorderSettings.Buffer %d: want 1 to %d", s.Buffer, MaxBuffer)
	}
	if s.BatchSize == 0 {
		s.BatchSize = min(DefaultBatchSize, s.Buffer)
	}
	if s.BatchSize < 1 || s.BatchSize > s.Buffer {
		return s, fmt.Errorf("invalid RecorderSettings.BatchSize %d: want 1 to the buffer, %d", s.BatchSize, s.Buffer)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"FlushInterval", &s.FlushInterval, DefaultFlushInterval}, {"BlockInterval", &s.BlockInterval, DefaultBlockInterval},
		{"SendTimeout", &s.SendTimeout, DefaultSendTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Millisecond {
			return s, fmt.Errorf("invalid RecorderSettings.%s %s: want at least 1ms", d.name, *d.v)
		}
	}
	return s, nil
}

// Stats are a recorder's counters since it started.
type Stats struct {
	Recorded int64  // events accepted into the buffer
	Sent     int64  // events the sink acknowledged
	Dropped  int64  // events refused because the buffer was full
	Queued   int    // events waiting now, those being sent included
	Failures int64  // failed Writes
	LastErr  string // the last Write's error, "" once one succeeds
	Sink     string // the sink's name
}

// blockKey identifies the lease a block record is about.
type blockKey struct {
	holder string
	allocator.LeaseKey
	version int64
}

// pendingBlock is what a holder reported since its last block record.
type pendingBlock struct {
	ev       Event // Count 0: nothing pending
	lastEmit time.Time
}

// Recorder is the audit pipeline; one goroutine sends the buffer.
type Recorder struct {
	sink  Sink
	s     RecorderSettings
	clock snowflake.Clock
	log   *slog.Logger

	mu       sync.Mutex
	queue    []Event // the buffer; the sender sends its head
	blocks   map[blockKey]*pendingBlock
	recorded int64
	dropped  int64
	sent     int64
	failures int64
	lastErr  string
	dropping bool // dropping since the last event accepted (logged once)

	kickC   chan struct{} // a full batch waits
	sendMu  sync.Mutex    // one sender at a time: the loop or Flush
	started bool
	closed  bool
	stopC   chan struct{}
	doneC   chan struct{}
}

// New returns a recorder sending to sink, not started.
func New(sink Sink, s RecorderSettings) (*Recorder, error) {
	s, err := s.Resolve()
	if err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, errors.New("audit: no sink")
	}
	clock := s.Clock
	if clock == nil {
		clock = snowflake.SystemClock()
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Recorder{sink: sink, s: s, clock: clock, log: log.With("component", "audit"),
		blocks: make(map[blockKey]*pendingBlock), kickC: make(chan struct{}, 1),
		stopC: make(chan struct{}), doneC: make(chan struct{})}, nil
}

// Sink returns the recorder's sink.
func (r *Recorder) Sink() Sink { return r.sink }

// Record stamps ev (ID, time, node, unless set) and buffers it, or drops
// and counts it when the buffer is full. It never blocks.
func (r *Recorder) Record(ev Event) {
	r.mu.Lock()
	r.stamp(&ev)
	kick := r.enqueue(ev)
	r.mu.Unlock()
	if kick {
		r.kick()
	}
}

// SetNode sets the holder name for events recorded from now on.
func (r *Recorder) SetNode(node string) {
	r.mu.Lock()
	r.s.Node = node
	r.mu.Unlock()
}

// stamp fills in ev's ID, time and node. r.mu is held.
func (r *Recorder) stamp(ev *Event) {
	if ev.ID == "" {
		ev.ID = NewID()
	}
	if ev.TimeMS == 0 {
		ev.TimeMS = r.clock.Now().UnixMilli()
	}
	if ev.Node == "" {
		ev.Node = r.s.Node
	}
}

// enqueue buffers or drops ev; true if a full batch waits. r.mu is held.
func (r *Recorder) enqueue(ev Event) bool {
	if len(r.queue) >= r.s.Buffer {
		r.dropped++
		if !r.dropping {
			r.dropping = true
			r.log.Error("audit buffer full: dropping events until the sink takes some",
				"buffer", r.s.Buffer, "sink", r.sink.String(), "dropped_total", r.dropped)
		}
		return false
	}
	if r.dropping {
		r.dropping = false
		r.log.Warn("audit buffer has room again", "dropped_total", r.dropped)
	}
	r.queue = append(r.queue, ev)
	r.recorded++
	return len(r.queue) == r.s.BatchSize
}

func (r *Recorder) kick() {
	select {
	case r.kickC <- struct{}{}:
	default:
	}
}

// BlockReport is what a holder issued under one lease.
type BlockReport struct {
	Holder, Owner string
	allocator.LeaseKey
	FencingVersion int64
	allocator.Block
}

// Block adds b to its lease's pending block record: the first report of
// an interval is recorded at once, later ones add up until BlockInterval
// has passed. Empty reports are ignored.
func (r *Recorder) Block(b BlockReport) {
	if b.Count <= 0 {
		return
	}
	now := r.clock.Now()
	k := blockKey{holder: b.Holder, LeaseKey: b.LeaseKey, version: b.FencingVersion}
	r.mu.Lock()
	p := r.blocks[k]
	if p == nil {
		p = &pendingBlock{}
		r.blocks[k] = p
	}
	if p.ev.Count == 0 {
		p.ev = Event{Kind: KindBlock, Holder: b.Holder, Owner: b.Owner, DatacenterID: b.DatacenterID, WorkerID: b.WorkerID,
			FencingVersion: b.FencingVersion, FromMS: b.FromMS, ToMS: b.ToMS}
	} else {
		p.ev.FromMS = min(p.ev.FromMS, b.FromMS)
		p.ev.ToMS = max(p.ev.ToMS, b.ToMS)
	}
	p.ev.Count += b.Count
	kick := false
	if p.lastEmit.IsZero() || now.Sub(p.lastEmit) >= r.s.BlockInterval {
		kick = r.emitBlock(p, now)
	}
	r.mu.Unlock()
	if kick {
		r.kick()
	}
}

// emitBlock moves p's pending record into the buffer. r.mu is held.
func (r *Recorder) emitBlock(p *pendingBlock, now time.Time) bool {
	ev := p.ev
	p.ev = Event{}
	p.lastEmit = now
	r.stamp(&ev)
	return r.enqueue(ev)
}

// emitDueBlocks records due pending blocks (all, with all) and forgets
// holders quiet for an interval.
func (r *Recorder) emitDueBlocks(all bool) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.blocks {
		due := now.Sub(p.lastEmit) >= r.s.BlockInterval
		switch {
		case p.ev.Count > 0 && (due || all):
			r.emitBlock(p, now)
		case p.ev.Count == 0 && due:
			delete(r.blocks, k)
		}
	}
}

// Stats returns the recorder's counters.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Recorded: r.recorded, Sent: r.sent, Dropped: r.dropped, Queued: len(r.queue),
		Failures: r.failures, LastErr: r.lastErr, Sink: r.sink.String()}
}

// Start starts the sender. Close stops it.
func (r *Recorder) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	go r.run()
}

// run sends the buffer every FlushInterval and on a full batch, retrying
// with backoff, until stopC closes.
func (r *Recorder) run() {
	defer close(r.doneC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stopC:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(r.s.FlushInterval)
	defer t.Stop()
	retry := backoff.New(min(100*time.Millisecond, r.s.FlushInterval), max(5*time.Second, r.s.FlushInterval))
	for {
		select {
		case <-r.stopC:
			return
		case <-t.C:
		case <-r.kickC:
		}
		r.emitDueBlocks(false)
		for {
			sent, err := r.sendOne(ctx)
			if err != nil {
				if backoff.Sleep(ctx, retry.Next()) != nil {
					return
				}
				continue
			}
			retry.Reset()
			if sent == 0 {
				break
			}
		}
	}
}

// sendOne sends up to BatchSize events from the head of the buffer,
// removing them once acknowledged.
func (r *Recorder) sendOne(ctx context.Context) (int, error) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	n := min(len(r.queue), r.s.BatchSize)
	batch := r.queue[:n:n] // appends after it go elsewhere
	r.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	sctx, cancel := context.WithTimeout(ctx, r.s.SendTimeout)
	err := r.sink.Write(sctx, batch)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failures++
		msg := err.Error()
		if r.lastErr == "" {
			r.log.Warn("audit sink failed; events wait in the buffer", "sink", r.sink.String(), "queued", len(r.queue), "err", msg)
		}
		r.lastErr = msg
		return 0, err
	}
	if r.lastErr != "" {
		r.log.Info("audit sink answers again", "sink", r.sink.String(), "queued", len(r.queue))
	}
	r.lastErr = ""
	r.sent += int64(n)
	r.queue = append(r.queue[:0:0], r.queue[n:]...)
	return n, nil
}

// Flush records pending blocks and sends the buffer until empty or ctx
// ends, then returning the last Write's error.
func (r *Recorder) Flush(ctx context.Context) error {
	r.emitDueBlocks(true)
	retry := backoff.New(10*time.Millisecond, time.Second)
	for {
		n, err := r.sendOne(ctx)
		if err != nil {
			if serr := backoff.Sleep(ctx, retry.Next()); serr != nil {
				return err
			}
			continue
		}
		if n == 0 {
			return nil
		}
	}
}

// Close stops the sender, records pending blocks, sends the buffer within
// ctx and closes the sink; what remains is dropped, counted and logged.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	started, closed := r.started, r.closed
	r.started, r.closed = true, true // no Start after Close
	r.mu.Unlock()
	if closed {
		return nil
	}
	close(r.stopC)
	if started {
		<-r.doneC
	}
	err := r.Flush(ctx)
	if err != nil {
		r.mu.Lock()
		lost := len(r.queue)
		r.dropped += int64(lost)
		r.queue = nil
		r.mu.Unlock()
		r.log.Error("audit events not sent at shutdown", "events", lost, "sink", r.sink.String(), "err", err)
		err = fmt.Errorf("audit: %d events not sent: %w", lost, err)
	}
	return errors.Join(err, r.sink.Close())
}
