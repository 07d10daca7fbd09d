package rpcapi

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // gzip requests and answers, as connect serves them
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/idgen-project/idgen"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// Native gRPC: connections whose first request is a gRPC call are served
// by grpc-go's transport (split.go), far cheaper per unary call than
// net/http's HTTP/2 and connect-go. The methods are connect's (ids.go,
// leases.go, health.go), behind one interceptor applying the gate's rules.
// grpc-go reads a unary request first, capped at MaxMessageBytes as sent
// and decompressed.

func (s *Server) newNative() *grpc.Server {
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		// Fixed windows: no BDP ping and ack per call. A request is at most
		// MaxMessageBytes, so 64 KiB windows never hold one up.
		grpc.InitialWindowSize(1<<16),
		grpc.InitialConnWindowSize(1<<16),
		// Reused goroutines, whose stacks have grown.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		// As net/http's HTTP/2 server did: 250 streams per connection, and
		// client keepalive pings welcome (grpc-go's default ends connections
		// pinged more often than every 5 minutes).
		grpc.MaxConcurrentStreams(250),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.InTapHandle(s.tap),
		grpc.UnaryInterceptor(s.nativeUnary),
		grpc.StreamInterceptor(s.nativeStream),
	)
	idgenv1.RegisterIdServiceServer(gs, nativeIDs{s: s})
	idgenv1.RegisterLeaseServiceServer(gs, nativeLeases{l: leaseService{s}})
	idgenv1.RegisterSequenceServiceServer(gs, nativeSequences{q: sequenceService{s}})
	healthpb.RegisterHealthServer(gs, nativeHealth{h: healthChecker{s}})
	opts := reflection.ServerOptions{Services: staticServices{}}
	reflectionv1.RegisterServerReflectionServer(gs, reflection.NewServerV1(opts))
	reflectionv1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(opts))
	return gs
}

// staticServices lists Services() to reflection, as connect's reflector does.
type staticServices struct{}

func (staticServices) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo)
	for _, name := range Services() {
		out[name] = grpc.ServiceInfo{}
	}
	return out
}

// grpcError returns err as grpc-go sends it, metadata as trailers.
func grpcError(ctx context.Context, err error) error {
	var cerr *connect.Error
	if err == nil || !errors.As(err, &cerr) {
		return err
	}
	st := &status.Status{Code: int32(cerr.Code()), Message: cerr.Message()}
	for _, d := range cerr.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	if len(cerr.Meta()) > 0 {
		md := metadata.MD{}
		for k, v := range cerr.Meta() {
			md.Append(k, v...)
		}
		_ = grpc.SetTrailer(ctx, md)
	}
	return grpcstatus.FromProto(st).Err()
}

// codeOf is the status code of a call's error, connect's or grpc-go's.
func codeOf(err error) connect.Code {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr.Code()
	}
	if st, ok := grpcstatus.FromError(err); ok {
		return connect.Code(st.Code())
	}
	return connect.CodeUnknown
}

// mdRequestID is idgen.HeaderRequestID as a metadata key.
const mdRequestID = "x-request-id"

// admitted is what tap puts in the context of an admitted call.
type admitted struct {
	procedure string
	start     time.Time
	requestID string
	caller    idgen.Caller
	call      *call
	span      func(error)
}

type admittedKey struct{}

// tap admits a call from its headers before grpc-go reads its request, as
// the gate does: token, Drain, request ID. Refusals are counted and
// answered at once (without X-Request-Id: grpc-go sends no server headers).
// The context gets its own cancel for the deadlines (ctxWatch), so the
// request must come within Config.ReadTimeout.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	scope, ok := scopeOf(info.FullMethodName)
	if !ok { // health, reflection: open, as /healthz is
		return ctx, nil
	}
	a := &admitted{procedure: info.FullMethodName, start: time.Now()}
	// grpc-go keeps keys in lower case.
	a.requestID = idgen.RequestID(info.Header[mdRequestID])
	var err error
	if s.draining() {
		err = errShuttingDown()
	} else if a.caller, err = s.auth.Authorize(info.Header["authorization"], scope); err != nil {
		err = s.errorOf(ctx, err, "")
	}
	if err != nil {
		s.metrics.done(a.procedure, a.start, err)
		return ctx, grpcError(ctx, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &ctxWatch{cancel: cancel, reading: true}
	_ = w.SetReadDeadline(a.start.Add(s.readTimeout))
	a.call = &call{rc: w}
	return context.WithValue(ctx, admittedKey{}, a), nil
}

// enter lets in a call tap admitted (Drain, span); an error means refused
// and counted.
func (s *Server) enter(ctx context.Context, stream bool) (context.Context, *admitted, error) {
	a, _ := ctx.Value(admittedKey{}).(*admitted)
	if a == nil { // tap runs for every call of idgen's services
		return ctx, nil, grpcstatus.Error(codes.Internal, "rpcapi: a call not admitted")
	}
	_ = grpc.SetHeader(ctx, metadata.MD{mdRequestID: {a.requestID}})
	c := a.call
	var err error
	if !s.begin() {
		err = errShuttingDown()
	} else if stream && !s.track(c) {
		s.end()
		err = errShuttingDown()
	}
	if err != nil {
		c.stopWatch()
		s.metrics.done(a.procedure, a.start, err)
		return ctx, a, grpcError(ctx, err)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		a.caller.Address = p.Addr.String()
	}
	a.caller.RequestID = a.requestID
	ctx = context.WithValue(ctx, callInfoKey{}, callInfo{caller: a.caller, call: c})
	if s.tracing.tracer != nil {
		md, _ := metadata.FromIncomingContext(ctx)
		var span trace.Span
		ctx, span = s.tracing.start(ctx, a.procedure, mdCarrier(md))
		a.span = func(err error) { end(span, err) }
	}
	return ctx, a, nil
}

// leave ends a call enter let in.
func (s *Server) leave(ctx context.Context, a *admitted, stream bool, err error) error {
	if a.span != nil {
		a.span(err)
	}
	s.metrics.done(a.procedure, a.start, err)
	a.call.stopWatch()
	if stream {
		s.untrack(a.call)
	}
	s.end()
	return grpcError(ctx, err)
}

func (s *Server) nativeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, ok := scopeOf(info.FullMethod); !ok {
		resp, err := handler(ctx, req)
		return resp, grpcError(ctx, err)
	}
	ctx, a, err := s.enter(ctx, false)
	if err != nil {
		return nil, err
	}
	// grpc-go has read the request: a unary call has no deadline left.
	a.call.stopWatch()
	resp, err := handler(ctx, req)
	return resp, s.leave(ctx, a, false, err)
}

func (s *Server) nativeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if _, ok := scopeOf(info.FullMethod); !ok {
		return grpcError(ctx, handler(srv, ss))
	}
	// StreamIds lifts the read deadline once it has the request and bounds
	// its sends (gate.go).
	ctx, a, err := s.enter(ctx, true)
	if err != nil {
		return err
	}
	s.metrics.streams.Inc()
	err = handler(srv, &nativeStream{ServerStream: ss, ctx: ctx, sent: s.metrics.sent.WithLabelValues(info.FullMethod)})
	s.metrics.streams.Dec()
	return s.leave(ctx, a, true, err)
}

// nativeStream is a server stream with enter's context, counting sends.
type nativeStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent interface{ Inc() }
}

func (n *nativeStream) Context() context.Context { return n.ctx }

func (n *nativeStream) SendMsg(m any) error {
	err := n.ServerStream.SendMsg(m)
	if err == nil {
		n.sent.Inc()
	}
	return err
}

// mdCarrier carries a trace's context in a call's metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// deadliner bounds a call's I/O: *http.ResponseController or ctxWatch.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// ctxWatch ends a native call at its deadline by cancelling its stream's
// context, ending a wait for the request or a blocked send without
// touching the connection's other calls. The read deadline holds until
// lifted, then the write deadline does.
type ctxWatch struct {
	cancel context.CancelFunc

	mu      sync.Mutex
	reading bool
	timer   *time.Timer
}

func (w *ctxWatch) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.reading {
		return nil
	}
	if t.IsZero() {
		w.reading = false
	}
	w.set(t)
	return nil
}

func (w *ctxWatch) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.reading {
		w.set(t)
	}
	return nil
}

// set moves the timer to t; zero stops it. w.mu is held.
func (w *ctxWatch) set(t time.Time) {
	switch {
	case t.IsZero():
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(time.Until(t), w.cancel)
	default:
		w.timer.Reset(time.Until(t))
	}
}

// stopWatch lifts a native call's deadlines.
func (c *call) stopWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.rc.SetReadDeadline(time.Time{})
	_ = c.rc.SetWriteDeadline(time.Time{})
}

// nativeIDs serves IdService on grpc-go.
type nativeIDs struct {
	idgenv1.UnimplementedIdServiceServer
	s *Server
}

func (n nativeIDs) NextIds(ctx context.Context, m *idgenv1.NextIdsRequest) (*idgenv1.NextIdsResponse, error) {
	return n.s.nextIDs(ctx, m)
}

func (n nativeIDs) StreamIds(m *idgenv1.StreamIdsRequest, st grpc.ServerStreamingServer[idgenv1.StreamIdsResponse]) error {
	return n.s.streamIDs(st.Context(), m, st.Send)
}

func (n nativeIDs) Parse(ctx context.Context, m *idgenv1.ParseRequest) (*idgenv1.ParseResponse, error) {
	return n.s.parse(ctx, m)
}

func (n nativeIDs) Compose(ctx context.Context, m *idgenv1.ComposeRequest) (*idgenv1.ComposeResponse, error) {
	return n.s.compose(ctx, m)
}

// nativeLeases serves LeaseService on grpc-go.
type nativeLeases struct {
	idgenv1.UnimplementedLeaseServiceServer
	l leaseService
}

func (n nativeLeases) GetLayout(ctx context.Context, m *idgenv1.GetLayoutRequest) (*idgenv1.GetLayoutResponse, error) {
	return n.l.getLayout(ctx, m)
}

func (n nativeLeases) AcquireLease(ctx context.Context, m *idgenv1.AcquireLeaseRequest) (*idgenv1.AcquireLeaseResponse, error) {
	return n.l.acquireLease(ctx, m)
}

func (n nativeLeases) HeartbeatLease(ctx context.Context, m *idgenv1.HeartbeatLeaseRequest) (*idgenv1.HeartbeatLeaseResponse, error) {
	return n.l.heartbeatLease(ctx, m)
}

func (n nativeLeases) ReleaseLease(ctx context.Context, m *idgenv1.ReleaseLeaseRequest) (*idgenv1.ReleaseLeaseResponse, error) {
	return n.l.releaseLease(ctx, m)
}

// nativeSequences serves SequenceService through the connect handlers:
// store round trips, not worth a second copy of each method.
type nativeSequences struct {
	idgenv1.UnimplementedSequenceServiceServer
	q sequenceService
}

// unwrap is the grpc-go answer of a connect handler's.
func unwrap[T any](resp *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (n nativeSequences) CreateSequence(ctx context.Context, m *idgenv1.CreateSequenceRequest) (*idgenv1.CreateSequenceResponse, error) {
	return unwrap(n.q.CreateSequence(ctx, connect.NewRequest(m)))
}

func (n nativeSequences) ListSequences(ctx context.Context, m *idgenv1.ListSequencesRequest) (*idgenv1.ListSequencesResponse, error) {
	return unwrap(n.q.ListSequences(ctx, connect.NewRequest(m)))
}

func (n nativeSequences) ReserveNumbers(ctx context.Context, m *idgenv1.ReserveNumbersRequest) (*idgenv1.ReserveNumbersResponse, error) {
	return unwrap(n.q.ReserveNumbers(ctx, connect.NewRequest(m)))
}

func (n nativeSequences) ConfirmReservation(ctx context.Context, m *idgenv1.ConfirmReservationRequest) (*idgenv1.ConfirmReservationResponse, error) {
	return unwrap(n.q.ConfirmReservation(ctx, connect.NewRequest(m)))
}

func (n nativeSequences) VoidReservation(ctx context.Context, m *idgenv1.VoidReservationRequest) (*idgenv1.VoidReservationResponse, error) {
	return unwrap(n.q.VoidReservation(ctx, connect.NewRequest(m)))
}

func (n nativeSequences) GetLedger(ctx context.Context, m *idgenv1.GetLedgerRequest) (*idgenv1.GetLedgerResponse, error) {
	return unwrap(n.q.GetLedger(ctx, connect.NewRequest(m)))
}

// nativeHealth serves health with connect's checker; Watch is
// unimplemented, as connect's is.
type nativeHealth struct {
	healthpb.UnimplementedHealthServer
	h healthChecker
}

func (n nativeHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	serving, err := n.h.serving(req.GetService())
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	if !serving {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
