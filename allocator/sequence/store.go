package sequence

import (
	"context"
	"fmt"
	"time"
)

// State is the state of a number in the ledger.
type State string

// The states. A number is reserved when handed out, and ends confirmed,
// voided or expired; a final state never changes.
const (
	Reserved  State = "reserved"
	Confirmed State = "confirmed"
	Voided    State = "voided"
	Expired   State = "expired"
)

// ParseState returns the state named s.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case Reserved, Confirmed, Voided, Expired:
		return st, nil
	}
	return "", fmt.Errorf("%w: unknown state %q: want reserved, confirmed, voided or expired", ErrInvalid, s)
}

// Request is one caller's reservation, as the Service passes it to the
// store: several are reserved in one transaction, in order.
type Request struct {
	// ID is the reservation ID, made by the Service (Settings.NewID).
	ID string
	// Count is how many numbers, at least 1.
	Count int
	// Caller is the name of the caller's token ("" without tokens); only
	// it may confirm or void the reservation.
	Caller string
	// RequestID is the call's request ID, kept in the ledger.
	RequestID string
}

// Reservation is what a caller reserved: Count consecutive numbers of one
// period, from First.
type Reservation struct {
	ID        string
	Sequence  string
	Period    string
	First     int64
	Count     int
	Formatted []string
	Caller    string
	RequestID string
	// State is Reserved when made; after a Settle, the state set.
	State      State
	ReservedAt time.Time
	ExpiresAt  time.Time
}

// Numbers returns the reservation's numbers as integers.
func (r Reservation) Numbers() []int64 {
	out := make([]int64, r.Count)
	for i := range out {
		out[i] = r.First + int64(i)
	}
	return out
}

// Entry is one row of the ledger: one number ever handed out.
type Entry struct {
	Sequence      string
	Period        string
	Number        int64
	Formatted     string
	State         State
	ReservationID string
	Caller        string
	RequestID     string
	ReservedAt    time.Time
	ExpiresAt     time.Time
	// SettledAt is when the number was confirmed, voided or found expired;
	// zero while reserved.
	SettledAt time.Time
}

// Ledger query limits.
const (
	DefaultLedgerLimit = 100
	MaxLedgerLimit     = 1000
)

// LedgerQuery selects ledger rows of one sequence, in the order of
// (period, number). Empty filters select everything.
type LedgerQuery struct {
	Sequence      string
	Period        string
	State         State
	ReservationID string
	Caller        string
	// AfterPeriod and AfterNumber continue a page: rows after
	// (AfterPeriod, AfterNumber) in (period, number) order; AfterPeriod ""
	// starts at the beginning.
	AfterPeriod string
	AfterNumber int64
	// Limit is how many rows at most: 0 means DefaultLedgerLimit; at most
	// MaxLedgerLimit.
	Limit int
}

// Normalize checks q and fills in its defaults.
func (q LedgerQuery) Normalize() (LedgerQuery, error) {
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLedgerLimit
	case q.Limit < 0 || q.Limit > MaxLedgerLimit:
		return q, fmt.Errorf("%w: limit %d: want 1 to %d", ErrInvalid, q.Limit, MaxLedgerLimit)
	}
	if q.State != "" {
		if _, err := ParseState(string(q.State)); err != nil {
			return q, err
		}
	}
	return q, nil
}

// Status is a sequence's state now, at store time: for the status page.
type Status struct {
	Sequence string
	// Period is the current period; LastNumber the last number issued in
	// it (Start-1 when none was).
	Period     string
	LastNumber int64
	// Open counts the numbers reserved and neither settled nor expired.
	Open int64
	// StoreTime is the store's time the status was read at.
	StoreTime time.Time
}

// Store keeps sequences, their per-period counters and the ledger. Every
// time it records and every period it decides is the store's time (read
// in the transaction), never the node's. allocator/postgres,
// allocator/mysql, allocator/sqlite and allocator/etcd provide one (their
// Sequences method); allocator/storetest checks them alike.
type Store interface {
	// CreateSequence records seq (compiled: valid), with the store's
	// time as its creation time. ErrExists for a name in use.
	CreateSequence(ctx context.Context, seq Sequence) (Sequence, error)
	// GetSequence returns a sequence, or ErrNotFound.
	GetSequence(ctx context.Context, name string) (Sequence, error)
	// ListSequences returns every sequence by name.
	ListSequences(ctx context.Context) ([]Sequence, error)
	// Reserve reserves reqs in order in one transaction: it reads the
	// store's time, decides the period, advances the period's counter by
	// the sum of the counts and writes one ledger row per number. Each
	// request gets consecutive numbers, the first request the lowest.
	// Nothing is written when it fails (ErrPeriodExhausted, ErrNotFound).
	Reserve(ctx context.Context, name string, reqs []Request) ([]Reservation, error)
	// Settle moves every number of a reservation from Reserved to to
	// (Confirmed or Voided), when caller made it and its expiry has not
	// passed at store time. Otherwise it changes nothing and returns
	// ErrReservationNotFound, ErrNotYours, ErrSettled or ErrExpired (the
	// latter after marking the numbers Expired).
	Settle(ctx context.Context, name, reservationID, caller string, to State) (Reservation, error)
	// ExpireReservations marks Expired every number of the sequence still
	// reserved past its expiry at store time, and returns how many.
	ExpireReservations(ctx context.Context, name string) (int64, error)
	// Ledger returns the rows q selects (after expiring what has expired).
	Ledger(ctx context.Context, q LedgerQuery) ([]Entry, error)
	// SequenceStatus returns the sequence's current period and counter.
	SequenceStatus(ctx context.Context, name string) (Status, error)
	// Prune deletes the ledger rows of sequence name's periods before
	// before, the operator's retention rule, and returns how many; with
	// dryRun it deletes nothing and returns how many it would. It first
	// expires what has expired in those periods, and refuses, changing
	// nothing, an unknown sequence (ErrNotFound), a before CheckPrune
	// refuses at store time (ErrInvalid), and periods that still hold
	// numbers reserved and not expired (ErrOpenReservations). It records
	// the largest before as the sequence's PrunedBefore. The counters of
	// the pruned periods stay, so that no number of a pruned period is
	// ever handed out again.
	Prune(ctx context.Context, name, before string, dryRun bool) (int64, error)
}

// TimeShifter is implemented by stores whose sequence calls can run at a
// time other than their database's, for tests: ShiftTime moves the time
// they read from the database by d (negative: back), so that a test can
// cross period boundaries and expiries. Production code never calls it.
type TimeShifter interface {
	ShiftTime(d time.Duration)
}
