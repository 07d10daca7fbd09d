package snowflake

import (
	"fmt"
	"math"
	"time"
)

// DefaultEpoch is the epoch of the default layout: 2026-01-01T00:00:00Z
// (1767225600000 in Unix milliseconds).
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The widths of the default layout: 41 bits of milliseconds (about 69 years),
// 5 bits of datacenter, 5 bits of worker and 12 bits of sequence.
const (
	DefaultTimeBits       = 41
	DefaultDatacenterBits = 5
	DefaultWorkerBits     = 5
	DefaultSequenceBits   = 12
)

// MinLifetime: Validate refuses a layout running out within it.
// WarnLifetime: Warning warns under it.
const (
	MinLifetime  = 10 * 365 * 24 * time.Hour
	WarnLifetime = 30 * 365 * 24 * time.Hour
)

// Layout is how an ID's bits are split, and the epoch timestamps count
// from. The zero Layout means DefaultLayout. From the top bit down:
//
//	0… | timestamp (TimeBits) | datacenter (DatacenterBits) | worker (WorkerBits) | sequence (SequenceBits)
//
// The widths sum to at most 63 (Width); IDs lie in 0..2^Width-1. 53 bits
// or fewer fit JavaScript numbers (PresetJS53).
type Layout struct {
	TimeBits       int
	DatacenterBits int
	WorkerBits     int
	SequenceBits   int
	// Epoch is the instant of timestamp 0, truncated to the millisecond.
	Epoch time.Time
}

// DefaultLayout returns the classic layout: 41/5/5/12 bits from DefaultEpoch.
func DefaultLayout() Layout {
	return Layout{
		TimeBits:       DefaultTimeBits,
		DatacenterBits: DefaultDatacenterBits,
		WorkerBits:     DefaultWorkerBits,
		SequenceBits:   DefaultSequenceBits,
		Epoch:          DefaultEpoch,
	}
}

// IsZero reports whether l is the zero Layout, which stands for DefaultLayout.
func (l Layout) IsZero() bool {
	return l.TimeBits == 0 && l.DatacenterBits == 0 && l.WorkerBits == 0 &&
		l.SequenceBits == 0 && l.Epoch.IsZero()
}

// orDefault returns DefaultLayout for the zero Layout and l otherwise.
func (l Layout) orDefault() Layout {
	if l.IsZero() {
		return DefaultLayout()
	}
	return l
}

// Width returns the sum of the widths (at most 63).
func (l Layout) Width() int {
	l = l.orDefault()
	return l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits
}

// MaxID returns the largest ID the layout can hold: 2^Width - 1.
func (l Layout) MaxID() ID { return ID(uint64(1)<<min(max(l.Width(), 0), 63) - 1) }

// Workers returns how many datacenter and worker pairs the layout holds.
func (l Layout) Workers() int64 {
	l = l.orDefault()
	return int64(1) << (l.DatacenterBits + l.WorkerBits)
}

// PerWorkerCap returns the most IDs one generator can issue per second:
// 2^SequenceBits per millisecond.
func (l Layout) PerWorkerCap() int64 { return (l.MaxSequence() + 1) * 1000 }

// Lifetime returns 2^TimeBits ms, or the largest time.Duration for 44
// time bits or more. End is exact for every width.
func (l Layout) Lifetime() time.Duration {
	l = l.orDefault()
	if l.TimeBits >= 44 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(int64(1)<<max(l.TimeBits, 0)) * time.Millisecond
}

// EpochMillis returns the epoch in Unix milliseconds.
func (l Layout) EpochMillis() int64 { return l.orDefault().Epoch.UnixMilli() }

// MaxDatacenter returns the largest datacenter ID the layout can hold.
func (l Layout) MaxDatacenter() int64 { return 1<<l.orDefault().DatacenterBits - 1 }

// MaxWorker returns the largest worker ID the layout can hold.
func (l Layout) MaxWorker() int64 { return 1<<l.orDefault().WorkerBits - 1 }

// MaxSequence returns the largest sequence number the layout can hold.
func (l Layout) MaxSequence() int64 { return 1<<l.orDefault().SequenceBits - 1 }

// MaxTimestamp returns the largest timestamp, in ms since the epoch.
func (l Layout) MaxTimestamp() int64 { return 1<<l.orDefault().TimeBits - 1 }

// End returns the first instant the layout cannot represent, exact for
// every width (2^63 ms is added as seconds to avoid overflow).
func (l Layout) End() time.Time {
	l = l.orDefault()
	span := uint64(1) << min(max(l.TimeBits, 0), 63) // ms
	e := l.EpochMillis()
	sec, ms := e/1000, e%1000
	if ms < 0 {
		sec, ms = sec-1, ms+1000
	}
	sec += int64(span / 1000)
	ms += int64(span % 1000)
	return time.Unix(sec, ms*int64(time.Millisecond)).UTC()
}

// Validate checks l's widths and, against the wall clock, that its epoch
// is not in the future and it lasts beyond MinLifetime; the error wraps
// ErrInvalidLayout. NewGenerator checks only the widths.
func (l Layout) Validate() error { return l.validate(time.Now()) }

func (l Layout) validate(now time.Time) error {
	l = l.orDefault()
	if err := l.checkWidths(); err != nil {
		return err
	}
	if l.Epoch.After(now) {
		return fmt.Errorf("%w: epoch %s lies in the future", ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339))
	}
	if end := l.End(); end.Before(now.Add(MinLifetime)) {
		return fmt.Errorf("%w: %d time bits from epoch %s run out at %s, less than 10 years from now",
			ErrInvalidLayout, l.TimeBits, l.Epoch.UTC().Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return nil
}

// checkWidths checks what makes l unusable whatever the clock: widths out
// of range or over 63 in sum, no time bits, no epoch.
func (l Layout) checkWidths() error {
	l = l.orDefault()
	for _, f := range []struct {
		name string
		bits int
	}{
		{"time", l.TimeBits}, {"datacenter", l.DatacenterBits},
		{"worker", l.WorkerBits}, {"sequence", l.SequenceBits},
	} {
		if f.bits < 0 || f.bits > 63 {
			return fmt.Errorf("%w: %s bits %d out of range 0..63", ErrInvalidLayout, f.name, f.bits)
		}
	}
	if l.TimeBits < 1 {
		return fmt.Errorf("%w: time bits must be at least 1", ErrInvalidLayout)
	}
	if sum := l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits; sum > 63 {
		return fmt.Errorf("%w: widths sum to %d (time %d + datacenter %d + worker %d + sequence %d), want at most 63",
			ErrInvalidLayout, sum, l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits)
	}
	if l.Epoch.IsZero() {
		return fmt.Errorf("%w: epoch is not set", ErrInvalidLayout)
	}
	return nil
}

// Warning returns a message when valid l runs out within 30 years (baidu
// uid-generator's default ran out in 2024), else "".
func (l Layout) Warning() string { return l.warning(time.Now()) }

func (l Layout) warning(now time.Time) string {
	if l.validate(now) != nil {
		return ""
	}
	if end := l.End(); end.Before(now.Add(WarnLifetime)) {
		return fmt.Sprintf("snowflake layout runs out at %s, less than 30 years from now", end.Format(time.RFC3339))
	}
	return ""
}

// String returns the layout in the form used by the lease table and error
// messages, e.g. "time=41 datacenter=5 worker=5 sequence=12 epoch=2026-01-01T00:00:00Z".
func (l Layout) String() string {
	l = l.orDefault()
	return fmt.Sprintf("time=%d datacenter=%d worker=%d sequence=%d epoch=%s",
		l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits,
		l.Epoch.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// Diff describes how other differs from l field by field, "" when the
// same; epochs compare to the millisecond.
func (l Layout) Diff(other Layout) string {
	a, b := l.orDefault(), other.orDefault()
	var s string
	add := func(name string, x, y any) {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %v != %v", name, x, y)
	}
	if a.TimeBits != b.TimeBits {
		add("time bits", a.TimeBits, b.TimeBits)
	}
	if a.DatacenterBits != b.DatacenterBits {
		add("datacenter bits", a.DatacenterBits, b.DatacenterBits)
	}
	if a.WorkerBits != b.WorkerBits {
		add("worker bits", a.WorkerBits, b.WorkerBits)
	}
	if a.SequenceBits != b.SequenceBits {
		add("sequence bits", a.SequenceBits, b.SequenceBits)
	}
	if a.EpochMillis() != b.EpochMillis() {
		add("epoch", a.Epoch.UTC().Format(time.RFC3339Nano), b.Epoch.UTC().Format(time.RFC3339Nano))
	}
	return s
}
