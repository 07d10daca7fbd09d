package rpcapi

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/snowflake"
)

// scratch is a call's pooled memory: no allocation per ID once warm.
type scratch struct {
	d      idgen.Drawn
	ranges []allocator.IDRange
}

// maxPooledIDs keeps a rare huge call from pinning its memory in the pool.
const maxPooledIDs = 1 << 19

func (s *Server) putScratch(sc *scratch) {
	if cap(sc.d.IDs) > maxPooledIDs || cap(sc.ranges) > maxPooledIDs {
		return
	}
	s.pool.Put(sc)
}

type idService struct{ s *Server }

// draw takes n IDs of ns ("" for Snowflake) into sc, with source and token.
func (s *Server) draw(ctx context.Context, ns string, n int, sc *scratch) (idgenv1.Source, *idgenv1.FencingToken, error) {
	d := &sc.d
	if err := s.svc.Draw(ctx, callInfoOf(ctx).caller, idgen.DrawRequest{Namespace: ns, Count: n}, d); err != nil {
		return 0, nil, s.errorOf(ctx, err, ns)
	}
	switch d.Source {
	case idgen.SourceSnowflake:
		sc.ranges = appendRanges(sc.ranges[:0], d.IDs)
		return idgenv1.Source_SOURCE_SNOWFLAKE, leaseToken(d.Lease), nil
	case idgen.SourceFallback:
		sc.ranges = append(sc.ranges[:0], d.Ranges...)
		return idgenv1.Source_SOURCE_FALLBACK, leaseToken(d.Lease), nil
	}
	sc.ranges = append(sc.ranges[:0], d.Ranges...)
	if d.Revision > 0 {
		return idgenv1.Source_SOURCE_SEGMENT, &idgenv1.FencingToken{Token: &idgenv1.FencingToken_Revision{Revision: &idgenv1.RevisionToken{Revision: d.Revision}}}, nil
	}
	return idgenv1.Source_SOURCE_SEGMENT, nil, nil
}

// leaseToken is the fencing token of tok; nil without a fencing version.
func leaseToken(tok allocator.LeaseToken) *idgenv1.FencingToken {
	if tok.FencingVersion == 0 {
		return nil
	}
	return &idgenv1.FencingToken{Token: &idgenv1.FencingToken_Lease{Lease: &idgenv1.LeaseToken{
		Datacenter: int32(tok.DatacenterID), Worker: int32(tok.WorkerID), FencingVersion: tok.FencingVersion,
	}}}
}

// appendRanges appends the maximal runs of consecutive IDs; a Snowflake
// batch makes about one per millisecond.
func appendRanges(dst []allocator.IDRange, ids []int64) []allocator.IDRange {
	for i := 0; i < len(ids); {
		first := ids[i]
		j := i + 1
		// Compare without forming first+n, which could overflow.
		for j < len(ids) && ids[j]-first == int64(j-i) {
			j++
		}
		dst = append(dst, allocator.IDRange{First: first, Last: ids[j-1]})
		i = j
	}
	return dst
}

// setRanges sets *list to rs reusing its messages, so streams send
// without allocating; texts (which allocate) only with a form in enc.
func setRanges(list *[]*idgenv1.IdRange, rs []allocator.IDRange, enc idgen.Encoding) {
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
		if enc.Named() {
			l[i].FirstText, l[i].LastText = enc.String(r.First), enc.String(r.Last)
		}
	}
	*list = l
}

func (s *Server) checkCount(field string, n int32) error {
	if n < 1 || int(n) > s.svc.MaxCount() {
		return connectError(idgen.Errorf(idgen.Invalid, "%s must be from 1 to %d, got %d", field, s.svc.MaxCount(), n))
	}
	return nil
}

// NextIds serves IdService.NextIds over connect.
func (h idService) NextIds(ctx context.Context, req *connect.Request[idgenv1.NextIdsRequest]) (*connect.Response[idgenv1.NextIdsResponse], error) {
	return response(h.s.nextIDs(ctx, req.Msg))
}

func response[T any](msg *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(msg), nil
}

// nextIDs is IdService.NextIds, for connect and grpc-go alike.
func (s *Server) nextIDs(ctx context.Context, m *idgenv1.NextIdsRequest) (*idgenv1.NextIdsResponse, error) {
	if err := s.checkCount("count", m.GetCount()); err != nil {
		return nil, err
	}
	enc, err := s.encoding(ctx, m.GetNamespace(), m.GetFormat())
	if err != nil {
		return nil, err
	}
	sc := s.pool.Get().(*scratch)
	defer s.putScratch(sc)
	source, token, err := s.draw(ctx, m.GetNamespace(), int(m.GetCount()), sc)
	if err != nil {
		return nil, err
	}
	out := &idgenv1.NextIdsResponse{
		Ids:          append(make([]int64, 0, len(sc.d.IDs)), sc.d.IDs...),
		Namespace:    m.GetNamespace(),
		Source:       source,
		FencingToken: token,
	}
	setRanges(&out.Ranges, sc.ranges, idgen.Encoding{})
	if enc.Named() {
		out.IdTexts = make([]string, len(sc.d.IDs))
		for i, id := range sc.d.IDs {
			out.IdTexts[i] = enc.String(id)
		}
		out.Format = idgenv1.IdFormat(enc.Format)
	}
	return out, nil
}

// encoding returns the core's Encoding for ns in format f, or
// INVALID_ARGUMENT.
func (s *Server) encoding(ctx context.Context, ns string, f idgenv1.IdFormat) (idgen.Encoding, error) {
	format, err := idgen.FormatNumber(int32(f))
	if err != nil {
		return idgen.Encoding{}, s.errorOf(ctx, err, "")
	}
	return s.svc.Encoding(idgen.DrawRequest{Namespace: ns, Format: format}), nil
}

// StreamIds serves IdService.StreamIds: batches as ranges until total or
// cancel. Cancel and Drain are checked before making and before sending a
// batch, so at most the one being made is lost (never reissued).
func (h idService) StreamIds(ctx context.Context, req *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	return h.s.streamIDs(ctx, req.Msg, stream.Send)
}

// streamIDs is IdService.StreamIds for both stacks; send sends a message.
func (s *Server) streamIDs(ctx context.Context, m *idgenv1.StreamIdsRequest, send func(*idgenv1.StreamIdsResponse) error) error {
	if err := s.checkCount("batch_size", m.GetBatchSize()); err != nil {
		return err
	}
	if err := s.svc.Check(idgen.DrawRequest{Namespace: m.GetNamespace(), Count: 1}); err != nil {
		return s.errorOf(ctx, err, "")
	}
	total := m.GetTotal()
	if total < 0 {
		return connectError(idgen.Errorf(idgen.Invalid, "total must be 0 (until cancelled) or more, got %d", total))
	}
	enc, err := s.encoding(ctx, m.GetNamespace(), m.GetFormat())
	if err != nil {
		return err
	}
	c := callInfoOf(ctx).call
	if err := c.startStream(s.sendTimeout); err != nil {
		return err
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
		// Each message is charged like a unary call: an empty bucket ends
		// the stream with RESOURCE_EXHAUSTED rather than hold it open.
		source, token, err := s.draw(ctx, m.GetNamespace(), int(n), sc)
		if err != nil {
			return err
		}
		if err := s.stopped(ctx); err != nil {
			return err
		}
		setRanges(&msg.Ranges, sc.ranges, enc)
		msg.Source, msg.FencingToken = source, token
		if err := c.beforeSend(s.sendTimeout); err != nil {
			return err
		}
		if err := send(msg); err != nil {
			return err
		}
		sent += n
	}
	return nil
}

// stopped returns the error that ends a cancelled or drained stream.
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

// Parse serves IdService.Parse over connect.
func (h idService) Parse(ctx context.Context, req *connect.Request[idgenv1.ParseRequest]) (*connect.Response[idgenv1.ParseResponse], error) {
	return response(h.s.parse(ctx, req.Msg))
}

// parse is IdService.Parse: Decode, or DecodeText with text.
func (s *Server) parse(ctx context.Context, m *idgenv1.ParseRequest) (*idgenv1.ParseResponse, error) {
	h := idService{s}
	caller := callInfoOf(ctx).caller
	var id snowflake.ID
	var p snowflake.Parts
	var err error
	if m.GetText() != "" {
		var f snowflake.Format
		if f, err = idgen.FormatNumber(int32(m.GetFormat())); err == nil {
			id, p, err = h.s.svc.DecodeText(caller, m.GetText(), f)
		}
	} else {
		id = snowflake.ID(m.GetId())
		p, err = h.s.svc.Decode(caller, m.GetId())
	}
	if err != nil {
		return nil, h.s.errorOf(ctx, err, "")
	}
	forms := h.s.svc.Forms(id)
	return &idgenv1.ParseResponse{
		Id:          int64(id),
		Time:        timestamppb.New(p.Time),
		TimestampMs: p.Time.UnixMilli(),
		Datacenter:  int32(p.Datacenter),
		Worker:      int32(p.Worker),
		Sequence:    int32(p.Sequence),
		Forms:       &idgenv1.IdForms{Decimal: forms[0], Base32: forms[1], Base62: forms[2], Hex: forms[3]},
	}, nil
}

// Compose serves IdService.Compose over connect.
func (h idService) Compose(ctx context.Context, req *connect.Request[idgenv1.ComposeRequest]) (*connect.Response[idgenv1.ComposeResponse], error) {
	return response(h.s.compose(ctx, req.Msg))
}

// compose is IdService.Compose.
func (s *Server) compose(ctx context.Context, m *idgenv1.ComposeRequest) (*idgenv1.ComposeResponse, error) {
	h := idService{s}
	if m.GetTime() == nil {
		return nil, connectError(idgen.Errorf(idgen.Invalid, "time is required"))
	}
	if err := m.GetTime().CheckValid(); err != nil {
		return nil, connectError(idgen.Errorf(idgen.Invalid, "time is not a valid timestamp: %v", err))
	}
	enc, err := h.s.encoding(ctx, "", m.GetFormat())
	if err != nil {
		return nil, err
	}
	got, err := h.s.svc.Compose(callInfoOf(ctx).caller, m.GetTime().AsTime())
	if err != nil {
		return nil, h.s.errorOf(ctx, err, "")
	}
	out := &idgenv1.ComposeResponse{First: int64(got.First), Last: int64(got.Last), Time: timestamppb.New(got.Time)}
	if enc.Named() {
		out.FirstText, out.LastText = enc.String(int64(got.First)), enc.String(int64(got.Last))
	}
	return out, nil
}
