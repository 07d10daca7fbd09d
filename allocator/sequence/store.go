package sequence

import (
	"context"
	"fmt"
	"time"
)

// State is the state of a number in the ledger.
type State string

// The states: reserved, then finally confirmed, voided or expired.
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

// Request is one caller's reservation; several go in one transaction.
type Request struct {
	// ID is the reservation ID, made by the Service (Settings.NewID).
	ID string
	// Count is how many numbers, at least 1.
	Count int
	// Caller is the caller's token name; only it may settle.
	Caller string
	// RequestID is the call's request ID, kept in the ledger.
	RequestID string
}

// Reservation is Count consecutive numbers of one period, from First.
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
	// SettledAt is when the number was settled; zero while reserved.
	SettledAt time.Time
}

// Ledger query limits.
const (
	DefaultLedgerLimit = 100
	MaxLedgerLimit     = 1000
)

// LedgerQuery selects ledger rows of one sequence in (period, number)
// order; empty filters select everything.
type LedgerQuery struct {
	Sequence      string
	Period        string
	State         State
	ReservationID string
	Caller        string
	// AfterPeriod and AfterNumber continue a page ("" starts at the top).
	AfterPeriod string
	AfterNumber int64
	// Limit is the most rows, at most MaxLedgerLimit; 0 is the default.
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
	// Period is the current period; LastNumber its last (Start-1 if none).
	Period     string
	LastNumber int64
	// Open counts numbers reserved, unsettled and unexpired.
	Open int64
	// StoreTime is the store's time the status was read at.
	StoreTime time.Time
}

// Store keeps sequences, per-period counters and the ledger, all on store
// time. The stores provide one (their Sequences method); storetest checks
// them alike.
type Store interface {
	// CreateSequence records seq at store time; ErrExists for a name in use.
	CreateSequence(ctx context.Context, seq Sequence) (Sequence, error)
	// GetSequence returns a sequence, or ErrNotFound.
	GetSequence(ctx context.Context, name string) (Sequence, error)
	// ListSequences returns every sequence by name.
	ListSequences(ctx context.Context) ([]Sequence, error)
	// Reserve reserves reqs in order in one transaction at store time: it
	// advances the period's counter and writes a row per number, the first
	// request getting the lowest. A failure writes nothing.
	Reserve(ctx context.Context, name string, reqs []Request) ([]Reservation, error)
	// Settle moves a reservation's numbers from Reserved to to, if caller
	// made it and it has not expired; else ErrReservationNotFound,
	// ErrNotYours, ErrSettled or ErrExpired (after marking them Expired).
	Settle(ctx context.Context, name, reservationID, caller string, to State) (Reservation, error)
	// ExpireReservations marks overdue numbers Expired; it returns how many.
	ExpireReservations(ctx context.Context, name string) (int64, error)
	// Ledger returns the rows q selects (after expiring what has expired).
	Ledger(ctx context.Context, q LedgerQuery) ([]Entry, error)
	// SequenceStatus returns the sequence's current period and counter.
	SequenceStatus(ctx context.Context, name string) (Status, error)
	// Prune deletes the ledger rows of periods before before and returns
	// how many (dryRun: would). It expires first, and refuses, changing
	// nothing: ErrNotFound, ErrInvalid (CheckPrune), ErrOpenReservations.
	// It records PrunedBefore; counters stay, so no number is reissued.
	Prune(ctx context.Context, name, before string, dryRun bool) (int64, error)
}

// TimeShifter is a store whose sequence time tests can move by d
// (ShiftTime) to cross periods and expiries.
type TimeShifter interface {
	ShiftTime(d time.Duration)
}
