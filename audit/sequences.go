package audit

import (
	"context"
	"fmt"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// The kinds of sequence events.
const (
	KindSequenceReserve Kind = "sequence_reserve"
	KindSequenceConfirm Kind = "sequence_confirm"
	KindSequenceVoid    Kind = "sequence_void"
	KindSequenceExpire  Kind = "sequence_expire"
	KindSequencePrune   Kind = "sequence_prune"
)

// Sequences wraps a sequence.Store so that every reservation and state
// change reaches the audit trail once committed, one event per reservation
// (Namespace the sequence, First/Last its numbers, Owner the caller).
type Sequences struct {
	sequence.Store
	rec *Recorder
}

// WrapSequences returns store reporting to rec.
func WrapSequences(store sequence.Store, rec *Recorder) *Sequences {
	return &Sequences{Store: store, rec: rec}
}

func sequenceEvent(kind Kind, r sequence.Reservation) Event {
	return Event{Kind: kind, Namespace: r.Sequence, First: r.First, Last: r.First + int64(r.Count) - 1,
		Count: int64(r.Count), Owner: r.Caller, RequestID: r.RequestID,
		Detail: fmt.Sprintf("period %s, reservation %s", r.Period, r.ID)}
}

// Reserve implements sequence.Store.Reserve and records each reservation.
func (s *Sequences) Reserve(ctx context.Context, name string, reqs []sequence.Request) ([]sequence.Reservation, error) {
	out, err := s.Store.Reserve(ctx, name, reqs)
	if err != nil {
		return out, err
	}
	for _, r := range out {
		s.rec.Record(sequenceEvent(KindSequenceReserve, r))
	}
	return out, nil
}

// Settle implements sequence.Store.Settle and records a confirm or a void.
func (s *Sequences) Settle(ctx context.Context, name, reservationID, caller string, to sequence.State) (sequence.Reservation, error) {
	r, err := s.Store.Settle(ctx, name, reservationID, caller, to)
	if err != nil {
		return r, err
	}
	kind := KindSequenceConfirm
	if to == sequence.Voided {
		kind = KindSequenceVoid
	}
	s.rec.Record(sequenceEvent(kind, r))
	return r, nil
}

// ExpireReservations implements sequence.Store.ExpireReservations and
// records any numbers expired.
func (s *Sequences) ExpireReservations(ctx context.Context, name string) (int64, error) {
	n, err := s.Store.ExpireReservations(ctx, name)
	if err == nil && n > 0 {
		s.rec.Record(Event{Kind: KindSequenceExpire, Namespace: name, Count: n,
			Detail: fmt.Sprintf("%d numbers past their reservation's expiry", n)})
	}
	return n, err
}

// Prune implements sequence.Store.Prune and records a prune that ran (not
// a dry run or refusal).
func (s *Sequences) Prune(ctx context.Context, name, before string, dryRun bool) (int64, error) {
	n, err := s.Store.Prune(ctx, name, before, dryRun)
	if err == nil && !dryRun {
		s.rec.Record(Event{Kind: KindSequencePrune, Namespace: name, Count: n,
			Detail: fmt.Sprintf("ledger of the periods before %s deleted: %d numbers", before, n)})
	}
	return n, err
}
