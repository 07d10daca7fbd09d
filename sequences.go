package idgen

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/sequence"
)

// Sequences is the sequence API's core (docs/sequences.md) for every
// transport. Creating and reading the ledger take the admin scope;
// reserving, confirming and voiding the ids scope, a reservation belonging
// to its token. Reservations are charged their count, like IDs.
type Sequences struct {
	svc *sequence.Service
	ids *Service // the rate limiter
}

// NewSequences returns the sequence core over svc, charging ids's limit.
func NewSequences(svc *sequence.Service, ids *Service) *Sequences {
	return &Sequences{svc: svc, ids: ids}
}

// MaxCount returns the cap of one reservation.
func (s *Sequences) MaxCount() int { return s.svc.MaxCount() }

// Create creates seq, refusing an invalid one before writing.
func (s *Sequences) Create(ctx context.Context, seq sequence.Sequence) (sequence.Sequence, error) {
	created, err := s.svc.Create(ctx, seq)
	if err != nil {
		return sequence.Sequence{}, SequenceError(err, seq.Name)
	}
	return created, nil
}

// Get returns the sequence called name.
func (s *Sequences) Get(ctx context.Context, name string) (sequence.Sequence, error) {
	if err := validSequenceName(name); err != nil {
		return sequence.Sequence{}, err
	}
	seq, err := s.svc.Store().GetSequence(ctx, name)
	if err != nil {
		return sequence.Sequence{}, SequenceError(err, name)
	}
	return seq, nil
}

// List returns every sequence.
func (s *Sequences) List(ctx context.Context) ([]sequence.Sequence, error) {
	all, err := s.svc.Store().ListSequences(ctx)
	if err != nil {
		return nil, SequenceError(err, "")
	}
	return all, nil
}

// Status returns sequence name's current period, last number and open
// reservations, at store time.
func (s *Sequences) Status(ctx context.Context, name string) (sequence.Status, error) {
	if err := validSequenceName(name); err != nil {
		return sequence.Status{}, err
	}
	st, err := s.svc.Store().SequenceStatus(ctx, name)
	if err != nil {
		return sequence.Status{}, SequenceError(err, name)
	}
	return st, nil
}

// Reserve reserves count numbers for caller after charging the rate
// limit; a count outside 1..MaxCount is refused first.
func (s *Sequences) Reserve(ctx context.Context, caller Caller, name string, count int) (sequence.Reservation, error) {
	if err := validSequenceName(name); err != nil {
		return sequence.Reservation{}, err
	}
	if count < 1 || count > s.svc.MaxCount() {
		return sequence.Reservation{}, Errorf(Invalid, "count %d: want 1 to %d numbers in one reservation", count, s.svc.MaxCount())
	}
	if err := s.ids.limiter.Take(caller, count); err != nil {
		return sequence.Reservation{}, err
	}
	r, err := s.svc.Reserve(ctx, name, count, caller.Name, caller.RequestID)
	if err != nil {
		return sequence.Reservation{}, SequenceError(err, name)
	}
	return r, nil
}

// Confirm confirms caller's reservation id of sequence name.
func (s *Sequences) Confirm(ctx context.Context, caller Caller, name, id string) (sequence.Reservation, error) {
	return s.settle(ctx, caller, name, id, s.svc.Confirm)
}

// Void voids caller's reservation id of sequence name.
func (s *Sequences) Void(ctx context.Context, caller Caller, name, id string) (sequence.Reservation, error) {
	return s.settle(ctx, caller, name, id, s.svc.Void)
}

func (s *Sequences) settle(ctx context.Context, caller Caller, name, id string,
	fn func(ctx context.Context, name, id, caller string) (sequence.Reservation, error)) (sequence.Reservation, error) {
	if err := validSequenceName(name); err != nil {
		return sequence.Reservation{}, err
	}
	if id == "" || len(id) > 64 {
		return sequence.Reservation{}, Errorf(Invalid, "reservation ID: want the ID a reservation returned (1 to 64 characters)")
	}
	if err := s.ids.Charge(caller); err != nil {
		return sequence.Reservation{}, err
	}
	r, err := fn(ctx, name, id, caller.Name)
	if err != nil {
		return sequence.Reservation{}, SequenceError(err, name)
	}
	return r, nil
}

// Ledger returns the ledger rows q selects.
func (s *Sequences) Ledger(ctx context.Context, q sequence.LedgerQuery) ([]sequence.Entry, error) {
	if err := validSequenceName(q.Sequence); err != nil {
		return nil, err
	}
	q, err := q.Normalize()
	if err != nil {
		return nil, SequenceError(err, q.Sequence)
	}
	if _, err := s.Get(ctx, q.Sequence); err != nil {
		return nil, err
	}
	rows, err := s.svc.Store().Ledger(ctx, q)
	if err != nil {
		return nil, SequenceError(err, q.Sequence)
	}
	return rows, nil
}

// validSequenceName refuses a malformed sequence name.
func validSequenceName(name string) error {
	if err := allocator.ValidNamespace(name); err != nil {
		return Errorf(Invalid, "sequence name must match ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	return nil
}

// SequenceError returns what a transport answers for err on sequence name:
// another caller's reservation is Forbidden, an expired or settled one
// Conflict, a counter past the format's width NamespaceExhausted.
func SequenceError(err error, name string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	seq := "the sequence"
	if name != "" {
		seq = fmt.Sprintf("sequence %q", name)
	}
	out := &Error{Err: err}
	switch {
	case errors.Is(err, sequence.ErrNotFound):
		out.Code, out.Detail = NotFound, seq+" does not exist"
	case errors.Is(err, sequence.ErrExists):
		out.Code, out.Detail = Conflict, seq+" exists already"
	case errors.Is(err, sequence.ErrReservationNotFound):
		out.Code, out.Detail = NotFound, "no such reservation of "+seq
	case errors.Is(err, sequence.ErrNotYours):
		out.Code, out.Detail = Forbidden, "the reservation was made by another caller; only it may confirm or void it"
	case errors.Is(err, sequence.ErrExpired):
		out.Code, out.Detail = Conflict, "the reservation has expired: its numbers are recorded as expired and can no longer be confirmed or voided"
	case errors.Is(err, sequence.ErrSettled):
		out.Code, out.Detail = Conflict, "the reservation was confirmed or voided already"
	case errors.Is(err, sequence.ErrPeriodExhausted):
		out.Code, out.Detail = NamespaceExhausted, seq+": the period's counter would pass the width of the format's counter field"
	case errors.Is(err, sequence.ErrInvalid):
		msg := err.Error()
		if i := strings.Index(msg, sequence.ErrInvalid.Error()); i >= 0 {
			msg = msg[i:] // the domain's words, without a store's prefix
		}
		out.Code, out.Detail = Invalid, msg
	default:
		return StoreError(err, "")
	}
	return out
}
