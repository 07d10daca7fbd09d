package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/idgen-project/idgen/internal/testkit"
)

// fakeHistory is a historyStore whose revision the test sets.
type fakeHistory struct {
	rev        int64
	revErr     error
	compacted  []int64
	compactErr error
	outside    int64
	outsideErr error
	seen       bool
}

func (f *fakeHistory) Revision(context.Context) (int64, error) { return f.rev, f.revErr }
func (f *fakeHistory) CompactHistory(_ context.Context, rev int64) error {
	if f.compactErr != nil {
		return f.compactErr
	}
	f.compacted = append(f.compacted, rev)
	return nil
}
func (f *fakeHistory) HistoryCompacted(context.Context) (bool, error) { return f.seen, nil }
func (f *fakeHistory) KeysOutsidePrefix(context.Context) (int64, error) {
	return f.outside, f.outsideErr
}
func (f *fakeHistory) Prefix() string { return "/idgen/" }

// TestCompactorKeepsTheRetention: the compactor compacts up to the newest
// revision it noted at least the retention ago, never the ones after, and
// never the same revision twice.
func TestCompactorKeepsTheRetention(t *testing.T) {
	clock := testkit.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store := &fakeHistory{}
	c := newCompactor(store, 10*time.Second, clock, slog.New(slog.DiscardHandler))
	if c.interval != time.Second {
		t.Errorf("interval for a retention of 10s: got %s, want 1s", c.interval)
	}
	steps := []struct {
		advance time.Duration
		rev     int64
		want    []int64 // compacted so far
	}{
		{0, 100, nil},
		{4 * time.Second, 200, nil},
		{5 * time.Second, 300, nil},
		{time.Second, 400, []int64{100}},                // 100 is 10s old
		{3 * time.Second, 500, []int64{100}},            // 200 is 9s old
		{time.Second, 600, []int64{100, 200}},           // 200 is 10s old
		{10 * time.Second, 600, []int64{100, 200, 600}}, // 300, 400, 500, 600 are old: the newest
		{10 * time.Second, 600, []int64{100, 200, 600}}, // compacted already
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		store.rev = st.rev
		c.run(context.Background())
		if got := store.compacted; !equalInts(got, st.want) {
			t.Fatalf("step %d (revision %d): compacted %v, want %v", i, st.rev, got, st.want)
		}
	}
	if got := value(t, c.compactions); got != 3 {
		t.Errorf("idgen_etcd_compactions_total: got %v, want 3", got)
	}
	if got := value(t, c.compacted); got != 600 {
		t.Errorf("idgen_etcd_compacted_revision: got %v, want 600", got)
	}
}

// TestCompactorFailures: a failed read or compaction is counted and logged
// once per spell, and the next run tries again.
func TestCompactorFailures(t *testing.T) {
	clock := testkit.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store := &fakeHistory{rev: 10, compactErr: errors.New("etcdserver: request timed out")}
	logs := &syncBuffer{}
	c := newCompactor(store, time.Second, clock, slog.New(slog.NewTextHandler(logs, nil)))
	for range 3 {
		c.run(context.Background())
		clock.Advance(time.Second)
	}
	if got := value(t, c.failures); got != 2 {
		t.Errorf("idgen_etcd_compaction_errors_total: got %v, want 2 (the first run has nothing old enough)", got)
	}
	if n := strings.Count(logs.String(), "compacting the etcd history failed"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs)
	}
	store.compactErr = nil
	c.run(context.Background())
	if len(store.compacted) != 1 || !strings.Contains(logs.String(), "compacting the etcd history succeeds again") {
		t.Errorf("after the store recovered: compacted %v, log:\n%s; want one compaction and the recovery logged", store.compacted, logs)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPlanCompaction: who compacts, by the setting and what the cluster
// holds, and the warning when nobody is seen to.
func TestPlanCompaction(t *testing.T) {
	tests := []struct {
		name      string
		retention time.Duration
		store     fakeHistory
		byNode    bool
		kept      time.Duration
		seen      bool
		warn      bool
	}{
		{"auto, idgen's own cluster", 0, fakeHistory{}, true, DefaultEtcdCompactRetention, false, false},
		{"auto, shared, compacted by others", 0, fakeHistory{outside: 3, seen: true}, false, 0, true, false},
		{"auto, shared, never compacted", 0, fakeHistory{outside: 3}, false, 0, false, true},
		{"auto, keys outside unreadable", 0, fakeHistory{outsideErr: errors.New("etcdserver: permission denied")}, false, 0, false, true},
		{"explicit on a shared cluster", time.Minute, fakeHistory{outside: 3}, true, time.Minute, false, false},
		{"off, never compacted", NoEtcdCompaction, fakeHistory{}, false, 0, false, true},
		{"off, compacted by etcd", NoEtcdCompaction, fakeHistory{seen: true}, false, 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncBuffer{}
			got := planCompaction(context.Background(), &tt.store, tt.retention, slog.New(slog.NewTextHandler(logs, nil)))
			if got.ByNode != tt.byNode || got.Retention != tt.kept || got.Seen != tt.seen || got.Text == "" {
				t.Errorf("got %+v, want by node %v, retention %s, seen %v, with a text", got, tt.byNode, tt.kept, tt.seen)
			}
			warned := strings.Contains(logs.String(), "level=WARN") &&
				strings.Contains(logs.String(), "--auto-compaction-retention") && strings.Contains(logs.String(), "--etcd-compact-retention")
			if warned != tt.warn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.warn, logs)
			}
		})
	}
}

// value returns the value of a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// syncBuffer collects a log written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
