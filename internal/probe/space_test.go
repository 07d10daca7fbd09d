package probe

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// fakeSpace answers Space with what the test sets.
type fakeSpace struct {
	sp  allocator.StoreSpace
	err error
}

func (f *fakeSpace) Space(context.Context) (allocator.StoreSpace, error) { return f.sp, f.err }

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSpaceSamples: the report carries the latest sample, the growth over
// the last minute, the alarms; the log names an alarm once when raised and
// once when cleared, and the size once when it passes SpaceAttention.
func TestSpaceSamples(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeSpace{sp: allocator.StoreSpace{Size: 1000, InUse: 500, Quota: 10_000}}
	logs := &logBuffer{}
	s := NewSpace(src, Compaction{Text: "none seen"}, func() time.Time { return now }, slog.New(slog.NewTextHandler(logs, nil)))
	if r := s.Report(); r.Sampled || r.Compaction.Text != "none seen" {
		t.Errorf("report before a sample: got %+v, want not sampled, with the compaction", r)
	}
	steps := []struct {
		advance time.Duration
		size    int64
		alarms  []string
		growth  float64
	}{
		{0, 1000, nil, 0},
		{10 * time.Second, 2000, nil, 100},
		{10 * time.Second, 7000, nil, 300},                         // past 60%
		{50 * time.Second, 9000, []string{"NOSPACE"}, 7000.0 / 60}, // from the oldest sample a minute back; the first left
		{10 * time.Second, 9000, []string{"NOSPACE"}, 2000.0 / 60},
		{10 * time.Second, 3000, nil, -4000.0 / 70}, // defragmented
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		src.sp.Size, src.sp.Alarms = st.size, st.alarms
		s.Sample(context.Background())
		r := s.Report()
		if !r.Sampled || r.Size != st.size || r.NoSpace() != (len(st.alarms) > 0) || !near(r.Growth, st.growth) {
			t.Errorf("step %d: got size %d growth %.2f no space %v, want %d, %.2f, %v", i, r.Size, r.Growth, r.NoSpace(), st.size, st.growth, len(st.alarms) > 0)
		}
	}
	for what, n := range map[string]int{"database alarm raised": 1, "database alarms cleared": 1, "database past 60% of its quota": 1} {
		if got := strings.Count(logs.String(), what); got != n {
			t.Errorf("log lines %q: got %d, want %d\n%s", what, got, n, logs)
		}
	}

	// A failed sample keeps the last figures and says why.
	src.err = errors.New("context deadline exceeded")
	s.Sample(context.Background())
	if r := s.Report(); r.Err == nil || r.Size != 3000 || !r.Sampled {
		t.Errorf("after a failed sample: got %+v, want the last figures and the error", r)
	}
}

func near(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 }

func TestSpaceReport(t *testing.T) {
	r := SpaceReport{Sampled: true, StoreSpace: allocator.StoreSpace{Size: 600, Quota: 1000, Alarms: []string{"NOSPACE", "CORRUPT"}}, Growth: 10}
	if got := r.Share(); got != 0.6 {
		t.Errorf("Share: got %v, want 0.6", got)
	}
	if d, ok := r.UntilFull(); !ok || d != 40*time.Second {
		t.Errorf("UntilFull: got %s, %v; want 40s", d, ok)
	}
	if text := r.AlarmText(); !strings.HasPrefix(text, "NOSPACE: ") || !strings.Contains(text, "; CORRUPT: ") || !strings.Contains(text, "docs/operations.md") {
		t.Errorf("AlarmText: got %q, want NOSPACE and CORRUPT explained", text)
	}
	for _, r := range []SpaceReport{{}, {StoreSpace: allocator.StoreSpace{Size: 1, Quota: 10}}, {StoreSpace: allocator.StoreSpace{Size: 1}, Growth: 5}} {
		if _, ok := r.UntilFull(); ok {
			t.Errorf("UntilFull of %+v: got a time, want none (no quota or no growth)", r)
		}
	}
}
