package rpcapi

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gzip requests and answers, as connect serves them
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	grpcstatus "google.golang.org/grpc/status"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/idgen-project/idgen"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// Native gRPC: the connections whose first request is a gRPC call
// (content-type application/grpc over HTTP/2 with prior knowledge) are
// served by grpc-go's own HTTP/2 transport (split.go), which costs a
// unary call a fraction of what net/http's HTTP/2 server and connect-go
// cost. The services are the same methods connect calls (ids.go,
// leases.go, health.go), behind one interceptor that applies the gate's
// rules: the token from the call's metadata before the handler runs,
// Drain and Wait, the request ID, the metrics and the trace. grpc-go reads
// a unary request before any interceptor, capped at MaxMessageBytes as
// sent and as decompressed (grpc.MaxRecvMsgSize).

func (s *Server) newNative() *grpc.Server {
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		// Fixed windows: grpc-go then sends no BDP ping after a request's
		// DATA, which with one call in flight on a connection is a ping and
		// its acknowledgement per call. A request is at most
		// MaxMessageBytes, so 64 KiB windows never hold one up.
		grpc.InitialWindowSize(1<<16),
		grpc.InitialConnWindowSize(1<<16),
		// Calls run on reused goroutines, whose stacks have grown, rather
		// than a new goroutine each.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.UnaryInterceptor(s.nativeUnary),
		grpc.StreamInterceptor(s.nativeStream),
	)
	idgenv1.RegisterIdServiceServer(gs, nativeIDs{s: s})
	idgenv1.RegisterLeaseServiceServer(gs, nativeLeases{l: leaseService{s}})
	healthpb.RegisterHealthServer(gs, nativeHealth{h: healthChecker{s}})
	opts := reflection.ServerOptions{Services: staticServices{}}
	reflectionv1.RegisterServerReflectionServer(gs, reflection.NewServerV1(opts))
	reflectionv1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(opts))
	return gs
}

// staticServices lists Services() to reflection, as connect's reflector
// does (not the reflection services themselves).
type staticServices struct{}

func (staticServices) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo)
	for _, name := range Services() {
		out[name] = grpc.ServiceInfo{}
	}
	return out
}

// grpcError returns err as grpc-go sends it: a *connect.Error's code,
// message and details, and its metadata (Retry-After) as trailers.
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

// nativeCall is the part of a native call the interceptors share.
type nativeCall struct {
	procedure string
	start     time.Time
	span      func(error)
}

// enter admits a native call of procedure, needing scope, as the gate and
// the connect interceptors do: the request ID, the token, Drain, then the
// span. On an error the call was refused (and counted).
func (s *Server) enter(ctx context.Context, procedure string, scope idgen.Scopes, c *call) (context.Context, nativeCall, error) {
	nc := nativeCall{procedure: procedure, start: time.Now()}
	md, _ := metadata.FromIncomingContext(ctx)
	requestID := idgen.RequestID(md.Get(idgen.HeaderRequestID))
	_ = grpc.SetHeader(ctx, metadata.Pairs(idgen.HeaderRequestID, requestID))
	var caller idgen.Caller
	var err error
	if s.draining() {
		err = errShuttingDown()
	} else if caller, err = s.auth.Authorize(md.Get("authorization"), scope); err != nil {
		err = s.errorOf(ctx, err, "")
	} else if !s.begin() {
		err = errShuttingDown()
	} else if c != nil && !s.track(c) {
		s.end()
		err = errShuttingDown()
	}
	if err != nil {
		s.metrics.done(procedure, nc.start, err)
		return ctx, nc, grpcError(ctx, err)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		caller.Address = p.Addr.String()
	}
	caller.RequestID = requestID
	ctx = context.WithValue(ctx, callInfoKey{}, callInfo{caller: caller, call: c})
	if s.tracing.tracer != nil {
		var span trace.Span
		ctx, span = s.tracing.start(ctx, procedure, mdCarrier(md))
		nc.span = func(err error) { end(span, err) }
	}
	return ctx, nc, nil
}

// leave ends a call enter let in.
func (s *Server) leave(ctx context.Context, nc nativeCall, c *call, err error) error {
	if nc.span != nil {
		nc.span(err)
	}
	s.metrics.done(nc.procedure, nc.start, err)
	if c != nil {
		c.stopWatch()
		s.untrack(c)
	}
	s.end()
	return grpcError(ctx, err)
}

func (s *Server) nativeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	scope, ok := scopeOf(info.FullMethod)
	if !ok { // health, reflection: open, as /healthz is
		resp, err := handler(ctx, req)
		return resp, grpcError(ctx, err)
	}
	ctx, nc, err := s.enter(ctx, info.FullMethod, scope, nil)
	if err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	return resp, s.leave(ctx, nc, nil, err)
}

func (s *Server) nativeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	scope, ok := scopeOf(info.FullMethod)
	if !ok {
		return grpcError(ctx, handler(srv, ss))
	}
	// The send deadlines of a stream (gate.go) close its connection: a
	// send blocked on a caller that does not read cannot be ended
	// otherwise.
	c := &call{rc: s.sendWatch(ctx)}
	c.body.done.Store(true) // grpc-go reads the request itself
	ctx, nc, err := s.enter(ctx, info.FullMethod, scope, c)
	if err != nil {
		return err
	}
	s.metrics.streams.Inc()
	err = handler(srv, &nativeStream{ServerStream: ss, ctx: ctx, sent: s.metrics.sent.WithLabelValues(info.FullMethod)})
	s.metrics.streams.Dec()
	return s.leave(ctx, nc, c, err)
}

// nativeStream is a server stream with the context enter made, counting
// the messages sent.
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

// sendWatch returns the deadlines of a native stream: a timer that
// closes the stream's connection when a send has not finished by its write
// deadline. Without a known connection (a grpc-go server not behind the
// split), the deadlines do nothing.
func (s *Server) sendWatch(ctx context.Context) deadliner {
	p, ok := peer.FromContext(ctx)
	s.splitMu.Lock()
	sp := s.split
	s.splitMu.Unlock()
	if !ok || p.Addr == nil || sp == nil {
		return noDeadlines{}
	}
	conn := sp.conn(p.Addr.String())
	if conn == nil {
		return noDeadlines{}
	}
	return &connWatch{conn: conn}
}

// deadliner bounds a call's reading and writing: an
// *http.ResponseController, or a native stream's connWatch.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

type noDeadlines struct{}

func (noDeadlines) SetReadDeadline(time.Time) error  { return nil }
func (noDeadlines) SetWriteDeadline(time.Time) error { return nil }

// connWatch closes conn at the write deadline. The request of a native
// call is in before its handler runs, so there is no read deadline.
type connWatch struct {
	conn  net.Conn
	mu    sync.Mutex
	timer *time.Timer
}

func (w *connWatch) SetReadDeadline(time.Time) error { return nil }

func (w *connWatch) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case t.IsZero():
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(time.Until(t), func() { _ = w.conn.Close() })
	default:
		w.timer.Reset(time.Until(t))
	}
	return nil
}

// stopWatch stops the timer of a native stream's deadlines once it ends.
func (c *call) stopWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// nativeHealth serves the health service on grpc-go with the checker
// connect uses; Watch is unimplemented, as connect's is.
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
