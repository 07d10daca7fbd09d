package snowflake

import (
	"fmt"
	"strings"
	"time"
)

// A Preset is a named layout counting from DefaultEpoch.
type Preset struct {
	// Name is what `idgen serve --layout` accepts in place of widths.
	Name string
	// Summary says what the preset is for, in a line.
	Summary string
	// Layout is the preset's layout.
	Layout Layout
}

// The names of the presets.
const (
	// PresetClassic is the default layout: 41/5/5/12, 63 bits.
	PresetClassic = "classic"
	// PresetJS53 is the default JavaScript-safe layout: 41/0/5/7, 53 bits,
	// so IDs survive a JavaScript number or double-reading JSON parser.
	PresetJS53 = "js53"
	// PresetJS53Workers: JavaScript-safe, more workers, shorter life: 40/0/6/7.
	PresetJS53Workers = "js53-workers"
	// PresetWorkers4096 is a 63-bit layout for large fleets: 41/0/12/10.
	PresetWorkers4096 = "workers4096"
)

// Presets returns the named layouts, the default one first.
func Presets() []Preset {
	l := func(t, d, w, s int) Layout {
		return Layout{TimeBits: t, DatacenterBits: d, WorkerBits: w, SequenceBits: s, Epoch: DefaultEpoch}
	}
	return []Preset{
		{PresetClassic, "the classic Snowflake layout (the default)", l(41, 5, 5, 12)},
		{PresetJS53, "JavaScript-safe IDs (at most 2^53-1)", l(41, 0, 5, 7)},
		{PresetJS53Workers, "JavaScript-safe IDs, more workers, shorter lifetime", l(40, 0, 6, 7)},
		{PresetWorkers4096, "many workers, a lower cap per worker", l(41, 0, 12, 10)},
	}
}

// PresetLayout returns the layout of preset name; false if unknown.
func PresetLayout(name string) (l Layout, ok bool) {
	for _, p := range Presets() {
		if p.Name == name {
			return p.Layout, true
		}
	}
	return Layout{}, false
}

// PresetNames returns the preset names, comma-separated.
func PresetNames() string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// Describe returns the layout's capacity in one line, e.g. "41/0/5/7, 53
// bits: 32 workers x 128,000 IDs/s, until 2095-09-07 (69.7 years)".
func (l Layout) Describe() string {
	l = l.orDefault()
	return fmt.Sprintf("%d/%d/%d/%d, %d bits: %s workers x %s IDs/s, until %s (%.1f years)",
		l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits, l.Width(),
		groupThousands(l.Workers()), groupThousands(l.PerWorkerCap()),
		l.End().Format(time.DateOnly), l.End().Sub(l.Epoch).Hours()/(24*365.25))
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
