package rpcapi

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/problem"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/snowflake"
)

// scratch is the reusable memory of one call: the Snowflake IDs, their
// ranges and a namespace batch. Server.pool keeps them, so that a call
// costs no allocation per ID once the pool has warmed up.
type scratch struct {
	ids    []snowflake.ID
	ranges []allocator.IDRange
	batch  allocator.Batch
}

// maxPooledIDs keeps a rare huge call from pinning its memory in the pool.
const maxPooledIDs = 1 << 19

func (s *Server) putScratch(sc *scratch) {
	if cap(sc.ids) > maxPooledIDs || cap(sc.batch.IDs) > maxPooledIDs {
		return
	}
	s.pool.Put(sc)
}

// idService implements idgenv1connect.IdServiceHandler.
type idService struct{ s *Server }

// drawn is the outcome of one draw, for NextIds and each message of
// StreamIds: ranges and token point into the scratch and are valid until
// the next draw with it.
type drawn struct {
	ranges []allocator.IDRange
	ids    func(dst []int64) []int64 // appends the IDs themselves
	source idgenv1.Source
	token  *idgenv1.FencingToken
}

// draw takes n IDs: Snowflake IDs when ns is empty, else IDs of the
// namespace ns (already validated).
func (s *Server) draw(ctx context.Context, ns string, n int, sc *scratch) (drawn, error) {
	if ns == "" {
		ids, tok, err := s.snowflakes.NextNFenced(sc.ids[:0], n)
		sc.ids = ids[:0]
		if err != nil {
			// IDs made before the refusal are dropped: unique, and never
			// seen by anyone.
			return drawn{}, err
		}
		sc.ranges = appendRanges(sc.ranges[:0], ids)
		return drawn{
			ranges: sc.ranges,
			ids: func(dst []int64) []int64 {
				for _, id := range ids {
					dst = append(dst, int64(id))
				}
				return dst
			},
			source: idgenv1.Source_SOURCE_SNOWFLAKE,
			token:  leaseToken(tok),
		}, nil
	}
	b := &sc.batch
	if err := s.segments.Draw(ctx, ns, n, b); err != nil {
		return drawn{}, err
	}
	d := drawn{
		ranges: b.Ranges,
		ids:    func(dst []int64) []int64 { return append(dst, b.IDs...) },
		source: idgenv1.Source_SOURCE_SEGMENT,
	}
	if b.Source == allocator.SourceSnowflake {
		d.source = idgenv1.Source_SOURCE_FALLBACK
		d.token = leaseToken(b.Lease)
	} else if b.Revision > 0 {
		d.token = &idgenv1.FencingToken{Token: &idgenv1.FencingToken_Revision{Revision: &idgenv1.RevisionToken{Revision: b.Revision}}}
	}
	return d, nil
}

// leaseToken is the fencing token of Snowflake IDs made under tok; nil for
// a token without a fencing version (none is known).
func leaseToken(tok allocator.LeaseToken) *idgenv1.FencingToken {
	if tok.FencingVersion == 0 {
		return nil
	}
	return &idgenv1.FencingToken{Token: &idgenv1.FencingToken_Lease{Lease: &idgenv1.LeaseToken{
		Datacenter: int32(tok.DatacenterID), Worker: int32(tok.WorkerID), FencingVersion: tok.FencingVersion,
	}}}
}

// appendRanges appends the maximal runs of consecutive IDs that ids forms.
// Snowflake IDs of one millisecond and worker are consecutive, so a batch
// makes about one range per millisecond it spans.
func appendRanges(dst []allocator.IDRange, ids []snowflake.ID) []allocator.IDRange {
	for i := 0; i < len(ids); {
		first := int64(ids[i])
		j := i + 1
		// ids[j] == first+(j-i) without forming first+n, which could
		// overflow at the largest ID.
		for j < len(ids) && int64(ids[j])-first == int64(j-i) {
			j++
		}
		dst = append(dst, allocator.IDRange{First: first, Last: int64(ids[j-1])})
		i = j
	}
	return dst
}

// setRanges sets *list to rs, reusing the IdRange messages of its backing
// array: a stream sends one message after another without allocating.
func setRanges(list *[]*idgenv1.IdRange, rs []allocator.IDRange) {
	l := (*list)[:0]
	for i, r := range rs {
		if i < cap(l) {
			l = l[:i+1]
			if l[i] == nil {
				l[i] = new(idgenv1.IdRange)
			}
		} else {
			l = append(l, new(idgenv1.IdRange))
		}
		l[i].First, l[i].Last = r.First, r.Last
	}
	*list = l
}

// checkCount checks a count or batch size.
func (s *Server) checkCount(field string, n int32) *connect.Error {
	if n < 1 || int(n) > s.maxCount {
		return problem.ConnectError(problem.Invalid, fmt.Sprintf("%s must be from 1 to %d, got %d", field, s.maxCount, n), 0)
	}
	return nil
}

// checkNamespace checks a namespace name; empty is Snowflake IDs.
func checkNamespace(ns string) *connect.Error {
	if ns == "" {
		return nil
	}
	if err := allocator.ValidNamespace(ns); err != nil {
		return problem.ConnectError(problem.Invalid, "namespace must match ^[a-z0-9][a-z0-9_.-]{0,63}$", 0)
	}
	return nil
}

// NextIds serves IdService.NextIds.
func (h idService) NextIds(ctx context.Context, req *connect.Request[idgenv1.NextIdsRequest]) (*connect.Response[idgenv1.NextIdsResponse], error) {
	s := h.s
	m := req.Msg
	if err := s.checkCount("count", m.GetCount()); err != nil {
		return nil, err
	}
	if err := checkNamespace(m.GetNamespace()); err != nil {
		return nil, err
	}
	sc := s.pool.Get().(*scratch)
	defer s.putScratch(sc)
	d, err := s.draw(ctx, m.GetNamespace(), int(m.GetCount()), sc)
	if err != nil {
		return nil, s.domainError(ctx, err)
	}
	out := &idgenv1.NextIdsResponse{
		Ids:          d.ids(make([]int64, 0, m.GetCount())),
		Namespace:    m.GetNamespace(),
		Source:       d.source,
		FencingToken: d.token,
	}
	setRanges(&out.Ranges, d.ranges)
	s.metrics.issued(d.source, int(m.GetCount()))
	return connect.NewResponse(out), nil
}

// StreamIds serves IdService.StreamIds: batches of batch_size IDs, as
// ranges, until total or the caller's cancel. The caller's cancel, and
// Drain, are checked before each batch is made and again before it is
// sent, so that generation stops at once: at most the batch being made
// when the cancel came is lost (never handed out again).
func (h idService) StreamIds(ctx context.Context, req *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	s := h.s
	m := req.Msg
	if err := s.checkCount("batch_size", m.GetBatchSize()); err != nil {
		return err
	}
	if err := checkNamespace(m.GetNamespace()); err != nil {
		return err
	}
	total := m.GetTotal()
	if total < 0 {
		return problem.ConnectError(problem.Invalid, fmt.Sprintf("total must be 0 (until cancelled) or more, got %d", total), 0)
	}
	sc := s.pool.Get().(*scratch)
	defer s.putScratch(sc)
	batch := int64(m.GetBatchSize())
	msg := &idgenv1.StreamIdsResponse{}
	for sent := int64(0); total == 0 || sent < total; {
		if err := s.stopped(ctx); err != nil {
			return err
		}
		n := batch
		if total > 0 {
			n = min(n, total-sent)
		}
		d, err := s.draw(ctx, m.GetNamespace(), int(n), sc)
		if err != nil {
			return s.domainError(ctx, err)
		}
		if err := s.stopped(ctx); err != nil {
			return err
		}
		setRanges(&msg.Ranges, d.ranges)
		msg.Source, msg.FencingToken = d.source, d.token
		if err := stream.Send(msg); err != nil {
			return err
		}
		s.metrics.issued(d.source, int(n))
		sent += n
	}
	return nil
}

// stopped returns the error that ends a stream whose caller cancelled or
// whose server drains, and nil while it may go on.
func (s *Server) stopped(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	case <-s.drained:
		return errShuttingDown()
	default:
		return nil
	}
}

// Parse serves IdService.Parse.
func (h idService) Parse(_ context.Context, req *connect.Request[idgenv1.ParseRequest]) (*connect.Response[idgenv1.ParseResponse], error) {
	id := req.Msg.GetId()
	if id < 0 {
		return nil, problem.ConnectError(problem.Invalid, fmt.Sprintf("id %d is negative: a Snowflake ID is from 0 to %d", id, int64(1<<63-1)), 0)
	}
	p := h.s.layout.Decompose(snowflake.ID(id))
	return connect.NewResponse(&idgenv1.ParseResponse{
		Id:          id,
		Time:        timestamppb.New(p.Time),
		TimestampMs: p.Time.UnixMilli(),
		Datacenter:  int32(p.Datacenter),
		Worker:      int32(p.Worker),
		Sequence:    int32(p.Sequence),
	}), nil
}
