package snowflake

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// maxClock is the last instant a clock reading can carry: Next works on
// Unix nanoseconds.
var maxClock = time.Unix(0, math.MaxInt64)

// unixEpoch is 1970-01-01T00:00:00Z, the oldest epoch idgen's docs mention.
var unixEpoch = time.Unix(0, 0).UTC()

// minTimeBits returns the fewest time bits the validator accepts at now for
// a layout starting at epoch (the 10-year rule).
func minTimeBits(tb testing.TB, epoch, now time.Time) int {
	tb.Helper()
	for bits := 1; bits <= 63; bits++ {
		l := Layout{TimeBits: bits, SequenceBits: 63 - bits, Epoch: epoch}
		if l.validate(now) == nil {
			return bits
		}
	}
	tb.Fatalf("no time width is valid for epoch %v at %v", epoch, now)
	return 0
}

// extremeLayouts returns the edges of what Layout.Validate accepts at now:
// the fewest time bits the 10-year rule allows up to 63 (no sequence), no
// datacenter and worker bits, no sequence bits, 22 and more sequence bits,
// from the Unix epoch and from a recent one.
func extremeLayouts(tb testing.TB, now time.Time) []Layout {
	var ls []Layout
	for _, epoch := range []time.Time{unixEpoch, DefaultEpoch, now.Add(-time.Hour).Truncate(time.Millisecond)} {
		tmin := minTimeBits(tb, epoch, now)
		for _, w := range [][4]int{
			{tmin, 0, 0, 63 - tmin},                     // no node bits, the most sequence bits
			{tmin, 0, 63 - tmin - 22, 22},               // exactly 22 sequence bits
			{tmin, 0, 63 - tmin, 0},                     // no sequence bits
			{tmin, (63 - tmin) / 2, (64 - tmin) / 2, 0}, // no sequence bits, both node widths
			{tmin, 5, 5, 63 - tmin - 10},                // classic node widths
			{tmin, 0, 1, 62 - tmin},                     // one worker bit
			{41, 0, 0, 22},                              // the classic time width, no node bits
			{41, 5, 5, 12},                              // the default widths
			{50, 0, 0, 13},
			{62, 0, 0, 1}, // one sequence bit
			{62, 1, 0, 0}, // one datacenter bit, no sequence
			{63, 0, 0, 0}, // time only
		} {
			l := Layout{TimeBits: w[0], DatacenterBits: w[1], WorkerBits: w[2], SequenceBits: w[3], Epoch: epoch}
			if w[0] < tmin || min(w[1], w[2], w[3]) < 0 {
				continue // not valid for this epoch
			}
			if !slices.Contains(ls, l) {
				ls = append(ls, l)
			}
		}
	}
	return ls
}

// nextParts returns the timestamp and sequence that follow (ts, seq) under l
// when the clock does not move: the next sequence number, or the first of
// the next millisecond once the sequence is used up.
func nextParts(l Layout, ts, seq int64) (int64, int64) {
	if seq < l.MaxSequence() {
		return ts, seq + 1
	}
	return ts + 1, 0
}

// TestExtremeLayouts runs a generator on every extreme layout the validator
// accepts: Next and NextN issue exactly the expected IDs, and LastTimestamp
// and Stop return exactly the last timestamp issued, whatever the widths and
// the epoch. The generator runs at the start of the clock reading and, where
// the sequence is small enough to use up, on the layout's last millisecond.
func TestExtremeLayouts(t *testing.T) {
	now := t0
	for _, l := range extremeLayouts(t, now) {
		if err := l.validate(now); err != nil {
			t.Fatalf("%v: the validator refuses it: %v", l, err)
		}
		clocks := []time.Time{now}
		if l.SequenceBits <= 12 && l.End().Before(maxClock) {
			// The last millisecond the layout holds, 0.3 ms in.
			clocks = append(clocks, l.End().Add(-time.Millisecond+300*time.Microsecond))
		}
		for _, at := range clocks {
			t.Run(fmt.Sprintf("%d-%d-%d-%d/epoch=%s/at=%s", l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits,
				l.Epoch.Format("2006-01-02T15:04"), at.Format("2006-01-02")), func(t *testing.T) {
				checkExtremeLayout(t, l, at)
			})
		}
	}
}

func checkExtremeLayout(t *testing.T, l Layout, at time.Time) {
	clk := newFakeClock(at)
	dc, worker := l.MaxDatacenter(), l.MaxWorker()
	g := mustGenerator(t, Settings{Layout: l, DatacenterID: dc, WorkerID: worker, Clock: clk})
	atTS := at.UnixMilli() - l.EpochMillis()

	want := func(ts, seq int64) ID {
		t.Helper()
		id, err := l.Compose(Parts{Timestamp: ts, Datacenter: dc, Worker: worker, Sequence: seq})
		if err != nil {
			t.Fatalf("Compose(ts %d, seq %d): %v", ts, seq, err)
		}
		return id
	}

	id, err := g.Next()
	if err != nil {
		t.Fatalf("first Next: %v", err)
	}
	if w := want(atTS, 0); id != w {
		t.Fatalf("first Next: got %d (%+v), want %d (%+v)", id, l.Decompose(id), w, l.Decompose(w))
	}
	ts, seq := atTS, int64(0)
	if got := g.LastTimestamp(); got != at.UnixMilli() {
		t.Errorf("LastTimestamp after the first ID: got %d, want %d", got, at.UnixMilli())
	}

	// A batch that, for small sequences, runs into the next millisecond
	// (or, on the last millisecond, past the layout's end).
	n := int(min(l.MaxSequence()+2, 5))
	var wantIDs []ID
	for range n {
		nts, nseq := nextParts(l, ts, seq)
		if nts > l.MaxTimestamp() {
			break
		}
		ts, seq = nts, nseq
		wantIDs = append(wantIDs, want(ts, seq))
	}
	ids, err := g.NextN(nil, n)
	switch {
	case len(wantIDs) < n:
		if !errors.Is(err, ErrTimeOverflow) {
			t.Fatalf("NextN(%d) on the last millisecond: got %v, want ErrTimeOverflow after %d IDs", n, err, len(wantIDs))
		}
	case err != nil:
		t.Fatalf("NextN(%d): %v", n, err)
	}
	if len(ids) != len(wantIDs) {
		t.Fatalf("NextN(%d): got %d IDs, want %d", n, len(ids), len(wantIDs))
	}
	for i, id := range ids {
		if id != wantIDs[i] {
			t.Fatalf("NextN ID %d: got %d (%+v), want %d (%+v)", i, id, l.Decompose(id), wantIDs[i], l.Decompose(wantIDs[i]))
		}
	}

	if nts, nseq := nextParts(l, ts, seq); nts <= l.MaxTimestamp() {
		id, err = g.Next()
		if err != nil {
			t.Fatalf("Next after NextN: %v", err)
		}
		ts, seq = nts, nseq
		if w := want(ts, seq); id != w {
			t.Fatalf("Next after NextN: got %d (%+v), want %d (%+v)", id, l.Decompose(id), w, l.Decompose(w))
		}
	} else if _, err := g.Next(); !errors.Is(err, ErrTimeOverflow) {
		t.Fatalf("Next past the layout's end: got %v, want ErrTimeOverflow", err)
	}

	lastMS := ts + l.EpochMillis()
	if got := g.LastTimestamp(); got != lastMS {
		t.Errorf("LastTimestamp: got %d, want %d", got, lastMS)
	}
	for i := range 2 {
		if got := g.Stop(); got != lastMS {
			t.Errorf("Stop #%d: got %d, want %d (the last timestamp issued)", i+1, got, lastMS)
		}
	}
	if got := g.LastTimestamp(); got != lastMS {
		t.Errorf("LastTimestamp after Stop: got %d, want %d", got, lastMS)
	}
	if _, err := g.Next(); !errors.Is(err, ErrStopped) {
		t.Errorf("Next after Stop: got %v, want ErrStopped", err)
	}
	if got, err := g.NextN(nil, 2); !errors.Is(err, ErrStopped) || len(got) != 0 {
		t.Errorf("NextN after Stop: got %d IDs, %v; want none and ErrStopped", len(got), err)
	}
}

// TestStopBeforeAnyIDOnExtremeLayouts: a generator stopped before it issued
// reports 0 and refuses, on every extreme layout.
func TestStopBeforeAnyIDOnExtremeLayouts(t *testing.T) {
	for _, l := range extremeLayouts(t, t0) {
		g := mustGenerator(t, Settings{Layout: l, Clock: newFakeClock(t0)})
		if got := g.Stop(); got != 0 {
			t.Errorf("%v: Stop before any ID: got %d, want 0", l, got)
		}
		if got := g.LastTimestamp(); got != 0 {
			t.Errorf("%v: LastTimestamp after Stop: got %d, want 0", l, got)
		}
		if _, err := g.Next(); !errors.Is(err, ErrStopped) {
			t.Errorf("%v: Next after Stop: got %v, want ErrStopped", l, err)
		}
	}
}

// TestGeneratorNearLayoutEnd: the lifetime rule belongs to the start of the
// service (Layout.Validate), not to NewGenerator, which the lease keeper
// calls at every claim: a layout 9 years from its end is refused by
// Validate, but a generator on it builds and issues.
func TestGeneratorNearLayoutEnd(t *testing.T) {
	now := time.Now()
	const timeBits = 41
	span := time.Duration(1<<timeBits) * time.Millisecond
	nineYears := 9 * 365 * 24 * time.Hour
	l := Layout{TimeBits: timeBits, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12,
		Epoch: now.Add(nineYears - span).Truncate(time.Millisecond)}
	if err := l.Validate(); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("Validate on a layout 9 years from its end: got %v, want ErrInvalidLayout", err)
	}
	g, err := NewGenerator(Settings{Layout: l, WorkerID: 3, Clock: newFakeClock(now)})
	if err != nil {
		t.Fatalf("NewGenerator on a layout 9 years from its end: %v", err)
	}
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if got, want := l.Decompose(id).Time.UnixMilli(), now.UnixMilli(); got != want {
		t.Errorf("timestamp: got %d, want %d", got, want)
	}
	if got, want := g.Stop(), now.UnixMilli(); got != want {
		t.Errorf("Stop: got %d, want %d", got, want)
	}
}

// TestNewGeneratorIgnoresLifetime: NewGenerator refuses what makes a
// generator impossible (widths, IDs that do not fit) and nothing that
// depends on the clock; a clock outside the layout's range makes Next
// refuse with ErrTimeOverflow instead.
func TestNewGeneratorIgnoresLifetime(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		l       Layout
		clock   time.Time
		wantNew error // from NewGenerator
		wantErr error // from Next
	}{
		{"run out within 10 years", Layout{TimeBits: 38, DatacenterBits: 5, WorkerBits: 8, SequenceBits: 12, Epoch: now.Add(-time.Hour)}, now, nil, nil},
		{"past its end", Layout{TimeBits: 20, DatacenterBits: 5, WorkerBits: 8, SequenceBits: 30, Epoch: now.Add(-time.Hour)}, now, nil, ErrTimeOverflow},
		{"epoch in the future", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, Epoch: now.Add(time.Hour)}, now, nil, ErrTimeOverflow},
		{"widths sum to 64", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 13, Epoch: DefaultEpoch}, now, ErrInvalidLayout, nil},
		{"no time bits", Layout{TimeBits: 0, DatacenterBits: 20, WorkerBits: 20, SequenceBits: 23, Epoch: DefaultEpoch}, now, ErrInvalidLayout, nil},
		{"no epoch", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12}, now, ErrInvalidLayout, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGenerator(Settings{Layout: tt.l, Clock: newFakeClock(tt.clock)})
			if !errors.Is(err, tt.wantNew) || (tt.wantNew == nil && err != nil) {
				t.Fatalf("NewGenerator: got %v, want %v", err, tt.wantNew)
			}
			if err != nil {
				return
			}
			_, err = g.Next()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Next: got %v, want %v", err, tt.wantErr)
			}
		})
	}
}
