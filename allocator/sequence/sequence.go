// Package sequence is idgen's model of business numbers: formatted
// ("INV-2026-000123"), restarting every year, month or day in a time zone,
// and each accounted for in a ledger.
//
// A caller reserves N numbers, then confirms or voids them; unsettled ones
// expire. A Store writes one ledger row per number in the transaction that
// advances the counter, so a period's ledger holds every number issued
// exactly once, whatever crashes. Periods are decided by store time, never
// a node's clock. Service combines concurrent reservations of a sequence
// into one store round trip.
package sequence

import (
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without /usr/share/zoneinfo

	"github.com/idgen-project/idgen/allocator"
)

// Errors of the package and of every Store. Stores wrap them with %w.
var (
	// ErrInvalid is a malformed sequence, count, state or ledger query.
	ErrInvalid = errors.New("invalid sequence request")
	// ErrNotFound is a sequence that does not exist.
	ErrNotFound = errors.New("sequence not found")
	// ErrExists is a sequence created under a name in use.
	ErrExists = errors.New("sequence already exists")
	// ErrReservationNotFound is a reservation ID the sequence does not know.
	ErrReservationNotFound = errors.New("reservation not found")
	// ErrNotYours is a settle by a caller other than the reserver.
	ErrNotYours = errors.New("reservation made by another caller")
	// ErrExpired is a confirmation or void of a reservation past its expiry.
	ErrExpired = errors.New("reservation expired")
	// ErrSettled is a settle of a reservation already settled.
	ErrSettled = errors.New("reservation already settled")
	// ErrPeriodExhausted is a reservation past the format's counter width.
	ErrPeriodExhausted = errors.New("period exhausted: the counter would pass the width of the format")
	// ErrOpenReservations is a prune of periods with open reservations.
	ErrOpenReservations = errors.New("reservations still open in the periods to prune")
)

// Reset is how often a sequence's counter restarts at its start value.
type Reset string

// The resets.
const (
	ResetNone    Reset = "none"
	ResetYearly  Reset = "yearly"
	ResetMonthly Reset = "monthly"
	ResetDaily   Reset = "daily"
)

// Defaults and limits of a Sequence.
const (
	DefaultStart = 1
	DefaultTTL   = 5 * time.Minute
	MinTTL       = time.Second
	MaxTTL       = 24 * time.Hour
	// MaxDescriptionLen bounds a description, in bytes.
	MaxDescriptionLen = 256
	// NoPeriod is the period of a sequence that never resets.
	NoPeriod = "all"
)

// Sequence is a sequence's settings; zero fields take defaults (Normalize).
type Sequence struct {
	// Name follows the rule of namespace names (allocator.ValidNamespace).
	Name string
	// Format is the text ParseFormat parses, e.g. "INV-{yyyy}-{seq:06}".
	Format string
	// Reset is when the counter restarts; "" is ResetNone.
	Reset Reset
	// Zone is the IANA zone of periods and dates; "" is "UTC".
	Zone string
	// Start is each period's first number; 0 means DefaultStart.
	Start int64
	// StartZero makes 0 the first number of each period.
	StartZero bool
	// TTL is how long a reservation may stay unsettled; 0 means DefaultTTL.
	TTL time.Duration
	// Description is free text for operators.
	Description string
	// CreatedAt is set by the store.
	CreatedAt time.Time
	// PrunedBefore is set by Prune: periods before it were deleted.
	PrunedBefore string
}

// Pruned reports whether period's ledger was deleted by a Prune.
func (s Sequence) Pruned(period string) bool {
	return s.PrunedBefore != "" && period < s.PrunedBefore
}

// Normalize returns s with its defaults filled in.
func (s Sequence) Normalize() Sequence {
	if s.Reset == "" {
		s.Reset = ResetNone
	}
	if s.Zone == "" {
		s.Zone = "UTC"
	}
	if s.Start == 0 && !s.StartZero {
		s.Start = DefaultStart
	}
	s.StartZero = s.Start == 0
	if s.TTL == 0 {
		s.TTL = DefaultTTL
	}
	return s
}

// Compiled is a valid sequence with its format parsed and zone loaded.
type Compiled struct {
	Sequence
	format Format
	loc    *time.Location
}

// Compile validates s (after Normalize). Errors wrap ErrInvalid (or
// allocator.ErrInvalidNamespace for the name).
func (s Sequence) Compile() (*Compiled, error) {
	s = s.Normalize()
	if err := allocator.ValidNamespace(s.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f, err := ParseFormat(s.Format)
	if err != nil {
		return nil, err
	}
	loc, err := loadZone(s.Zone)
	if err != nil {
		return nil, err
	}
	switch s.Reset {
	case ResetNone:
	case ResetYearly:
		if !f.year {
			return nil, fmt.Errorf("%w: a sequence reset yearly needs the year in its format ({yyyy} or {yy}), or its numbers would repeat from one year to the next", ErrInvalid)
		}
	case ResetMonthly:
		if !f.year || !f.month {
			return nil, fmt.Errorf("%w: a sequence reset monthly needs the year and month in its format ({yyyy}{MM}), or its numbers would repeat", ErrInvalid)
		}
	case ResetDaily:
		if !f.year || !f.month || !f.day {
			return nil, fmt.Errorf("%w: a sequence reset daily needs the year, month and day in its format ({yyyyMMdd}), or its numbers would repeat", ErrInvalid)
		}
	default:
		return nil, fmt.Errorf("%w: unknown reset %q: want none, yearly, monthly or daily", ErrInvalid, s.Reset)
	}
	switch {
	case s.Start < 0:
		return nil, fmt.Errorf("%w: start %d is negative", ErrInvalid, s.Start)
	case s.Start > f.MaxNumber():
		return nil, fmt.Errorf("%w: start %d does not fit the counter's %d digits", ErrInvalid, s.Start, f.width)
	case s.TTL < MinTTL || s.TTL > MaxTTL:
		return nil, fmt.Errorf("%w: ttl %v: want %v to %v", ErrInvalid, s.TTL, MinTTL, MaxTTL)
	case len(s.Description) > MaxDescriptionLen:
		return nil, fmt.Errorf("%w: description is %d bytes long, at most %d allowed", ErrInvalid, len(s.Description), MaxDescriptionLen)
	}
	if s.TTL%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: ttl %v: want whole milliseconds", ErrInvalid, s.TTL)
	}
	return &Compiled{Sequence: s, format: f, loc: loc}, nil
}

// loadZone loads an IANA zone; "Local" is refused, as nodes would disagree.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, fmt.Errorf("%w: time zone \"Local\" is the node's own; name an IANA zone such as Europe/Berlin", ErrInvalid)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown time zone %q: name an IANA zone such as Europe/Berlin or UTC", ErrInvalid, name)
	}
	return loc, nil
}

// Location returns the sequence's time zone.
func (c *Compiled) Location() *time.Location { return c.loc }

// MaxNumber returns the largest number the sequence issues in a period.
func (c *Compiled) MaxNumber() int64 { return c.format.MaxNumber() }

// PeriodAt returns the period of store time t in the sequence's zone:
// "2026", "2026-11", "2026-11-27" or NoPeriod.
func (c *Compiled) PeriodAt(t time.Time) string {
	lt := t.In(c.loc)
	switch c.Reset {
	case ResetYearly:
		return lt.Format("2006")
	case ResetMonthly:
		return lt.Format("2006-01")
	case ResetDaily:
		return lt.Format("2006-01-02")
	}
	return NoPeriod
}

// periodLayout is the periods' time layout; "" when it never resets.
func (c *Compiled) periodLayout() string {
	switch c.Reset {
	case ResetYearly:
		return "2006"
	case ResetMonthly:
		return "2006-01"
	case ResetDaily:
		return "2006-01-02"
	}
	return ""
}

// CheckPrune checks that periods before before may be pruned at current:
// the sequence resets, before has its granularity and is not later than
// current. Errors wrap ErrInvalid.
func (c *Compiled) CheckPrune(before, current string) error {
	layout := c.periodLayout()
	if layout == "" {
		return fmt.Errorf("%w: sequence %q never resets: its one period never closes, and its ledger is never pruned", ErrInvalid, c.Name)
	}
	if t, err := time.Parse(layout, before); err != nil || t.Format(layout) != before {
		return fmt.Errorf("%w: period %q: sequence %q resets %s, its periods are written like %s", ErrInvalid, before, c.Name, c.Reset,
			time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).Format(layout))
	}
	if before > current {
		return fmt.Errorf("%w: period %s is later than the current period %s of sequence %q: only closed periods are pruned (--before %s prunes every one)",
			ErrInvalid, before, current, c.Name, current)
	}
	return nil
}

// Write returns number n as the sequence writes it at store time t.
func (c *Compiled) Write(t time.Time, n int64) string {
	return c.format.Write(t.In(c.loc), n)
}
