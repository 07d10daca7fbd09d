package snowflake

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// jsMaxSafe is Number.MAX_SAFE_INTEGER, 2^53 - 1: the largest integer below
// which every integer is a JavaScript number.
const jsMaxSafe = 1<<53 - 1

// presetNow is the instant preset validity is checked at; Validate with the
// real clock is checked too.
var presetNow = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

func TestPresets(t *testing.T) {
	tests := []struct {
		name     string
		width    int
		workers  int64
		perSec   int64
		describe string
	}{
		{PresetClassic, 63, 1024, 4_096_000, "41/5/5/12, 63 bits: 1,024 workers x 4,096,000 IDs/s, until 2095-09-07 (69.7 years)"},
		{PresetJS53, 53, 32, 128_000, "41/0/5/7, 53 bits: 32 workers x 128,000 IDs/s, until 2095-09-07 (69.7 years)"},
		{PresetJS53Workers, 53, 64, 128_000, "40/0/6/7, 53 bits: 64 workers x 128,000 IDs/s, until 2060-11-03 (34.8 years)"},
		{PresetWorkers4096, 63, 4096, 1_024_000, "41/0/12/10, 63 bits: 4,096 workers x 1,024,000 IDs/s, until 2095-09-07 (69.7 years)"},
	}
	if got, want := len(Presets()), len(tests); got != want {
		t.Fatalf("presets: got %d, want %d (add the new one to this test)", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, ok := PresetLayout(tt.name)
			if !ok {
				t.Fatalf("PresetLayout(%q): not found", tt.name)
			}
			if err := l.validate(presetNow); err != nil {
				t.Errorf("validate: got %v, want valid", err)
			}
			if err := l.Validate(); err != nil {
				t.Errorf("Validate: got %v, want valid", err)
			}
			if got := l.Width(); got != tt.width {
				t.Errorf("Width: got %d, want %d", got, tt.width)
			}
			if got := l.Workers(); got != tt.workers {
				t.Errorf("Workers: got %d, want %d", got, tt.workers)
			}
			if got := l.PerWorkerCap(); got != tt.perSec {
				t.Errorf("PerWorkerCap: got %d, want %d", got, tt.perSec)
			}
			if got := l.Describe(); got != tt.describe {
				t.Errorf("Describe: got %q, want %q", got, tt.describe)
			}
			if got, want := l.Lifetime(), l.End().Sub(l.Epoch); got != want {
				t.Errorf("Lifetime: got %v, want %v", got, want)
			}
		})
	}
	if l, _ := PresetLayout(PresetClassic); l != DefaultLayout() {
		t.Errorf("classic preset: got %s, want the default layout %s", l, DefaultLayout())
	}
	if _, ok := PresetLayout("js52"); ok {
		t.Error(`PresetLayout("js52"): got a layout, want none`)
	}
	if got := PresetNames(); !strings.Contains(got, PresetJS53) {
		t.Errorf("PresetNames: got %q, want it to name %q", got, PresetJS53)
	}
}

// TestJS53PresetsStaySafe runs a generator of every 53-bit preset, on its
// largest datacenter and worker ID, through the first and the last
// milliseconds of the layout's lifetime, and checks that no ID exceeds
// 2^53 - 1 and that past the end it refuses rather than overflow.
func TestJS53PresetsStaySafe(t *testing.T) {
	for _, p := range Presets() {
		l := p.Layout
		if l.Width() > 53 {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			if got := l.MaxID(); got != jsMaxSafe {
				t.Errorf("MaxID: got %d, want %d", got, int64(jsMaxSafe))
			}
			last := l.End().Add(-time.Millisecond)
			for _, start := range []time.Time{l.Epoch, last.Add(-time.Millisecond)} {
				clock := newFakeClock(start)
				g := mustGenerator(t, Settings{Layout: l, DatacenterID: l.MaxDatacenter(), WorkerID: l.MaxWorker(), Clock: clock})
				n := int(2 * (l.MaxSequence() + 1)) // two whole milliseconds
				ids, err := g.NextN(nil, n)
				if err != nil {
					t.Fatalf("NextN from %v: %v", start, err)
				}
				for _, id := range ids {
					if id < 0 || id > jsMaxSafe {
						t.Fatalf("from %v: ID %d outside 0..2^53-1", start, id)
					}
				}
				if start != l.Epoch {
					if got, want := ids[len(ids)-1], l.MaxID(); got != want {
						t.Errorf("the last ID of the lifetime: got %d, want %d", got, want)
					}
					if _, err := g.Next(); !errors.Is(err, ErrTimeOverflow) {
						t.Errorf("Next past the end: got %v, want ErrTimeOverflow", err)
					}
				}
			}
		})
	}
}

// randomLayout returns a random layout of at most 63 bits that validates
// at presetNow.
func randomLayout(r *rand.Rand) Layout {
	for {
		width := 39 + r.IntN(25) // 39..63: fewer than 39 ms bits last under 10 years
		tb := 39 + r.IntN(width-38)
		rest := width - tb
		db := r.IntN(rest + 1)
		wb := r.IntN(rest - db + 1)
		l := Layout{TimeBits: tb, DatacenterBits: db, WorkerBits: wb, SequenceBits: rest - db - wb, Epoch: DefaultEpoch}
		if l.validate(presetNow) == nil {
			return l
		}
	}
}

// testLayouts returns every preset and n random valid layouts.
func testLayouts(r *rand.Rand, n int) []Layout {
	var ls []Layout
	for _, p := range Presets() {
		ls = append(ls, p.Layout)
	}
	for range n {
		ls = append(ls, randomLayout(r))
	}
	return ls
}

// randomID returns an ID of l from random parts.
func randomID(t *testing.T, r *rand.Rand, l Layout) ID {
	t.Helper()
	upTo := func(hi int64) int64 { return int64(r.Uint64N(uint64(hi) + 1)) }
	id, err := l.Compose(Parts{
		Timestamp:  upTo(l.MaxTimestamp()),
		Datacenter: upTo(l.MaxDatacenter()),
		Worker:     upTo(l.MaxWorker()),
		Sequence:   upTo(l.MaxSequence()),
	})
	if err != nil {
		t.Fatalf("Compose under %s: %v", l, err)
	}
	return id
}

func TestBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range testLayouts(r, 50) {
		for _, at := range []time.Time{
			l.Epoch,
			l.Epoch.Add(time.Duration(r.Int64N(int64(min(l.Lifetime(), 100*365*24*time.Hour))))),
			l.End().Add(-time.Millisecond),
		} {
			first, last, err := l.Bounds(at)
			if err != nil {
				t.Fatalf("%s: Bounds(%v): %v", l, at, err)
			}
			pf, pl := l.Decompose(first), l.Decompose(last)
			ms := at.UnixMilli()
			if pf.Time.UnixMilli() != ms || pl.Time.UnixMilli() != ms {
				t.Errorf("%s: Bounds(%v): got times %v and %v, want both %d", l, at, pf.Time, pl.Time, ms)
			}
			if pf.Datacenter != 0 || pf.Worker != 0 || pf.Sequence != 0 {
				t.Errorf("%s: first %d: got parts %+v, want zero node and sequence", l, first, pf)
			}
			if pl.Datacenter != l.MaxDatacenter() || pl.Worker != l.MaxWorker() || pl.Sequence != l.MaxSequence() {
				t.Errorf("%s: last %d: got parts %+v, want the largest node and sequence", l, last, pl)
			}
			// Every ID of that millisecond lies inside; the neighbours' lie outside.
			id, _ := l.Compose(Parts{Timestamp: pf.Timestamp, Datacenter: r.Int64N(l.MaxDatacenter() + 1), Worker: r.Int64N(l.MaxWorker() + 1), Sequence: r.Int64N(l.MaxSequence() + 1)})
			if id < first || id > last {
				t.Errorf("%s: ID %d of the millisecond outside [%d, %d]", l, id, first, last)
			}
			if next, _, err := l.Bounds(at.Add(time.Millisecond)); err == nil && next != last+1 {
				t.Errorf("%s: the next millisecond's first ID: got %d, want %d", l, next, last+1)
			}
		}
		for _, out := range []time.Time{l.Epoch.Add(-time.Millisecond), l.End()} {
			if _, _, err := l.Bounds(out); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("%s: Bounds(%v): got %v, want ErrOutOfRange", l, out, err)
			}
		}
	}
}
