package rpcapi

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// sequenceScope: admin to create, list and read the ledger, ids otherwise.
func sequenceScope(procedure string) idgen.Scopes {
	switch procedure {
	case idgenv1connect.SequenceServiceReserveNumbersProcedure,
		idgenv1connect.SequenceServiceConfirmReservationProcedure,
		idgenv1connect.SequenceServiceVoidReservationProcedure:
		return idgen.ScopeIDs
	}
	return idgen.ScopeAdmin
}

// sequenceService implements SequenceServiceHandler over the core, as
// /v1/sequences does.
type sequenceService struct{ s *Server }

var _ idgenv1connect.SequenceServiceHandler = sequenceService{}

// core returns the sequence core and caller, or NOT_FOUND without one.
func (q sequenceService) core(ctx context.Context) (*idgen.Sequences, idgen.Caller, error) {
	if q.s.seqs == nil {
		return nil, idgen.Caller{}, connectError(&idgen.Error{Code: idgen.NotFound, Detail: "this node's store keeps no sequences"})
	}
	return q.s.seqs, callInfoOf(ctx).caller, nil
}

// errorOf is the answer to a failed call on sequence name, worded by the
// core (idgen.SequenceError).
func (q sequenceService) errorOf(ctx context.Context, err error, name string) error {
	return q.s.errorOf(ctx, idgen.SequenceError(err, name), "")
}

func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func toSequenceMsg(seq sequence.Sequence) *idgenv1.Sequence {
	return &idgenv1.Sequence{
		Name: seq.Name, Format: seq.Format, ResetPeriod: string(seq.Reset), TimeZone: seq.Zone, Start: seq.Start,
		TtlMs: seq.TTL.Milliseconds(), Description: seq.Description, CreatedAtMs: msOf(seq.CreatedAt),
	}
}

func toReservationMsg(r sequence.Reservation) *idgenv1.Reservation {
	return &idgenv1.Reservation{
		ReservationId: r.ID, Sequence: r.Sequence, Period: r.Period, Numbers: r.Numbers(), Formatted: r.Formatted,
		State: string(r.State), Caller: r.Caller, RequestId: r.RequestID,
		ReservedAtMs: msOf(r.ReservedAt), ExpiresAtMs: msOf(r.ExpiresAt),
	}
}

// CreateSequence serves SequenceService.CreateSequence.
func (q sequenceService) CreateSequence(ctx context.Context, req *connect.Request[idgenv1.CreateSequenceRequest]) (*connect.Response[idgenv1.CreateSequenceResponse], error) {
	core, _, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	seq := sequence.Sequence{Name: m.GetName(), Format: m.GetFormat(), Reset: sequence.Reset(m.GetResetPeriod()), Zone: m.GetTimeZone(),
		TTL: time.Duration(m.GetTtlMs()) * time.Millisecond, Description: m.GetDescription()}
	if m.GetHasStart() {
		seq.Start, seq.StartZero = m.GetStart(), m.GetStart() == 0
	}
	if m.GetTtlMs() < 0 {
		return nil, connectError(idgen.Errorf(idgen.Invalid, "ttl_ms %d: want %d to %d", m.GetTtlMs(), sequence.MinTTL.Milliseconds(), sequence.MaxTTL.Milliseconds()))
	}
	created, err := core.Create(ctx, seq)
	if err != nil {
		return nil, q.errorOf(ctx, err, m.GetName())
	}
	return connect.NewResponse(&idgenv1.CreateSequenceResponse{Sequence: toSequenceMsg(created)}), nil
}

// ListSequences serves SequenceService.ListSequences.
func (q sequenceService) ListSequences(ctx context.Context, _ *connect.Request[idgenv1.ListSequencesRequest]) (*connect.Response[idgenv1.ListSequencesResponse], error) {
	core, _, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	all, err := core.List(ctx)
	if err != nil {
		return nil, q.errorOf(ctx, err, "")
	}
	out := &idgenv1.ListSequencesResponse{}
	for _, seq := range all {
		m := toSequenceMsg(seq)
		if st, err := core.Status(ctx, seq.Name); err == nil {
			m.Status = &idgenv1.SequenceStatus{Period: st.Period, LastNumber: st.LastNumber, OpenReservations: st.Open, StoreTimeMs: msOf(st.StoreTime)}
		}
		out.Sequences = append(out.Sequences, m)
	}
	return connect.NewResponse(out), nil
}

// ReserveNumbers serves SequenceService.ReserveNumbers.
func (q sequenceService) ReserveNumbers(ctx context.Context, req *connect.Request[idgenv1.ReserveNumbersRequest]) (*connect.Response[idgenv1.ReserveNumbersResponse], error) {
	core, caller, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	r, err := core.Reserve(ctx, caller, req.Msg.GetSequence(), int(req.Msg.GetCount()))
	if err != nil {
		return nil, q.errorOf(ctx, err, req.Msg.GetSequence())
	}
	return connect.NewResponse(&idgenv1.ReserveNumbersResponse{Reservation: toReservationMsg(r)}), nil
}

// ConfirmReservation serves SequenceService.ConfirmReservation.
func (q sequenceService) ConfirmReservation(ctx context.Context, req *connect.Request[idgenv1.ConfirmReservationRequest]) (*connect.Response[idgenv1.ConfirmReservationResponse], error) {
	core, caller, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	r, err := core.Confirm(ctx, caller, req.Msg.GetSequence(), req.Msg.GetReservationId())
	if err != nil {
		return nil, q.errorOf(ctx, err, req.Msg.GetSequence())
	}
	return connect.NewResponse(&idgenv1.ConfirmReservationResponse{Reservation: toReservationMsg(r)}), nil
}

// VoidReservation serves SequenceService.VoidReservation.
func (q sequenceService) VoidReservation(ctx context.Context, req *connect.Request[idgenv1.VoidReservationRequest]) (*connect.Response[idgenv1.VoidReservationResponse], error) {
	core, caller, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	r, err := core.Void(ctx, caller, req.Msg.GetSequence(), req.Msg.GetReservationId())
	if err != nil {
		return nil, q.errorOf(ctx, err, req.Msg.GetSequence())
	}
	return connect.NewResponse(&idgenv1.VoidReservationResponse{Reservation: toReservationMsg(r)}), nil
}

// GetLedger serves SequenceService.GetLedger.
func (q sequenceService) GetLedger(ctx context.Context, req *connect.Request[idgenv1.GetLedgerRequest]) (*connect.Response[idgenv1.GetLedgerResponse], error) {
	core, _, err := q.core(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	lq := sequence.LedgerQuery{Sequence: m.GetSequence(), Period: m.GetPeriod(), State: sequence.State(m.GetState()),
		ReservationID: m.GetReservationId(), Caller: m.GetCaller(), Limit: int(m.GetLimit()),
		AfterPeriod: m.GetAfterPeriod(), AfterNumber: m.GetAfterNumber()}
	rows, err := core.Ledger(ctx, lq)
	if err != nil {
		return nil, q.errorOf(ctx, err, m.GetSequence())
	}
	limit := lq.Limit
	if limit == 0 {
		limit = sequence.DefaultLedgerLimit
	}
	out := &idgenv1.GetLedgerResponse{More: len(rows) == limit}
	for _, e := range rows {
		out.Entries = append(out.Entries, &idgenv1.LedgerEntry{
			Period: e.Period, Number: e.Number, Formatted: e.Formatted, State: string(e.State), ReservationId: e.ReservationID,
			Caller: e.Caller, RequestId: e.RequestID, ReservedAtMs: msOf(e.ReservedAt), ExpiresAtMs: msOf(e.ExpiresAt),
			SettledAtMs: msOf(e.SettledAt),
		})
	}
	return connect.NewResponse(out), nil
}
