package audit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testkit"
)

// fakeSink keeps what it was sent, by event ID, and fails while down.
type fakeSink struct {
	mu     sync.Mutex
	down   bool
	block  chan struct{} // when not nil, Write waits for it (or ctx)
	byID   map[string]audit.Event
	writes int
}

func newFakeSink() *fakeSink { return &fakeSink{byID: map[string]audit.Event{}} }

func (s *fakeSink) Write(ctx context.Context, events []audit.Event) error {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("sink down")
	}
	s.writes++
	for _, ev := range events {
		s.byID[ev.ID] = ev
	}
	return nil
}

func (s *fakeSink) String() string { return "fake" }
func (s *fakeSink) Close() error   { return nil }

func (s *fakeSink) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *fakeSink) events() map[string]audit.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]audit.Event, len(s.byID))
	for k, v := range s.byID {
		out[k] = v
	}
	return out
}

// TestRecorderKeepsWhatTheBufferHolds: with the sink down, the buffer keeps
// its events and drops the rest, counted; once the sink is back every kept
// event arrives, and the drop counter equals the events missing.
func TestRecorderKeepsWhatTheBufferHolds(t *testing.T) {
	sink := newFakeSink()
	sink.setDown(true)
	rec, err := audit.New(sink, audit.RecorderSettings{Buffer: 10, BatchSize: 4, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	const sent = 25
	ids := make([]string, 0, sent)
	for i := range sent {
		ev := audit.Event{ID: audit.NewID(), Kind: audit.KindHeartbeat, WorkerID: int64(i)}
		ids = append(ids, ev.ID)
		rec.Record(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := rec.Flush(ctx); err == nil {
		t.Fatal("Flush with the sink down: got nil, want the sink's error")
	}
	cancel()
	st := rec.Stats()
	if st.Queued != 10 || st.Dropped != sent-10 || st.LastErr == "" {
		t.Fatalf("sink down: got %+v, want 10 queued, %d dropped and the error", st, sent-10)
	}
	sink.setDown(false)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.events()
	missing := 0
	for i, id := range ids {
		ev, ok := got[id]
		switch {
		case !ok:
			missing++
		case ev.Node != "n1" || ev.WorkerID != int64(i) || ev.TimeMS == 0:
			t.Errorf("event %d: got %+v, want node n1, worker %d and a time", i, ev, i)
		}
	}
	if st := rec.Stats(); int64(missing) != st.Dropped || len(got) != 10 || st.Sent != 10 {
		t.Errorf("got %d delivered, %d missing, stats %+v; want 10 delivered and dropped = missing", len(got), missing, st)
	}
	if _, ok := got[ids[0]]; !ok {
		t.Errorf("the oldest event was not delivered: the buffer keeps what it took and drops the new")
	}
}

// TestRecorderNeverBlocks: a sink that hangs does not hold up Record or
// Block, and the sender retries once it answers.
func TestRecorderNeverBlocks(t *testing.T) {
	sink := newFakeSink()
	sink.block = make(chan struct{})
	rec, err := audit.New(sink, audit.RecorderSettings{Buffer: 100, BatchSize: 10, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	for i := range 1000 {
		rec.Record(audit.Event{Kind: audit.KindAcquire, WorkerID: int64(i)})
		rec.Block(audit.BlockReport{Holder: "h", Block: allocator.Block{Count: 1, FromMS: 1, ToMS: 2}})
	}
	if st := rec.Stats(); st.Queued != 100 || st.Dropped == 0 {
		t.Errorf("got %+v, want a full buffer of 100 and drops", st)
	}
	close(sink.block)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := rec.Stats(); int64(len(sink.events())) != st.Sent || st.Sent != st.Recorded {
		t.Errorf("got %d delivered, stats %+v; want every recorded event sent", len(sink.events()), st)
	}
}

// TestRecorderBlocksPerInterval: a holder's reports within one interval
// make at most one block record per interval; their counts and spans add
// up; another lease has records of its own.
func TestRecorderBlocksPerInterval(t *testing.T) {
	sink := newFakeSink()
	clock := testkit.NewManual(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	rec, err := audit.New(sink, audit.RecorderSettings{BlockInterval: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	a := audit.BlockReport{Holder: "a", LeaseKey: allocator.LeaseKey{WorkerID: 1}, FencingVersion: 7}
	b := audit.BlockReport{Holder: "b", LeaseKey: allocator.LeaseKey{WorkerID: 2}, FencingVersion: 1}
	report := func(r audit.BlockReport, n, from, to int64) {
		r.Block = allocator.Block{Count: n, FromMS: from, ToMS: to}
		rec.Block(r)
	}
	report(a, 10, 100, 110) // first of the interval: recorded now
	report(a, 5, 110, 120)  // pending
	clock.Advance(300 * time.Millisecond)
	report(a, 7, 120, 130) // pending, adds up
	report(b, 3, 50, 60)   // b's own first record
	report(a, 0, 0, 0)     // nothing issued: ignored
	if st := rec.Stats(); st.Queued != 2 {
		t.Fatalf("within one interval: got %d records queued, want 2 (a's first, b's first)", st.Queued)
	}
	clock.Advance(time.Second)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Event
	total := map[string]int64{}
	for _, ev := range sink.events() {
		if ev.Kind != audit.KindBlock {
			t.Errorf("got a %s event, want blocks only", ev.Kind)
		}
		recs = append(recs, ev)
		total[ev.Holder] += ev.Count
		if ev.Holder == "a" && ev.Count == 12 && (ev.FromMS != 110 || ev.ToMS != 130 || ev.FencingVersion != 7) {
			t.Errorf("a's second record: got %+v, want 12 IDs over 110-130 at version 7", ev)
		}
	}
	if len(recs) != 3 || total["a"] != 22 || total["b"] != 3 {
		t.Errorf("got %d records, totals %v; want 3 records, a 22, b 3", len(recs), total)
	}
}

func TestRecorderSettings(t *testing.T) {
	for _, tc := range []struct {
		s    audit.RecorderSettings
		want string
	}{
		{audit.RecorderSettings{Buffer: -1}, "invalid RecorderSettings.Buffer -1"},
		{audit.RecorderSettings{Buffer: 10, BatchSize: 11}, "invalid RecorderSettings.BatchSize 11"},
		{audit.RecorderSettings{FlushInterval: time.Microsecond}, "invalid RecorderSettings.FlushInterval 1µs"},
	} {
		_, err := tc.s.Resolve()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%+v): got %v, want %q", tc.s, err, tc.want)
		}
	}
	s, err := audit.RecorderSettings{}.Resolve()
	if err != nil || s.Buffer != audit.DefaultBuffer || s.BatchSize != audit.DefaultBatchSize || s.BlockInterval != time.Second {
		t.Errorf("zero settings: got %+v, %v; want the defaults", s, err)
	}
}
