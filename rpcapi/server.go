// Package rpcapi is idgen's gRPC API: the services of proto/idgen/v1
// (IdService and LeaseService), standard gRPC health checking and server
// reflection, served with connect-go over gRPC, gRPC-Web and the Connect
// protocol. The app mounts it on the listener of the HTTP API (Mount), so
// one port serves both, with the same tokens and scopes (through the HTTP
// API's Authorize), the same problem codes (internal/problem maps them to
// gRPC status codes, each error carrying a google.rpc.ErrorInfo and, for
// codes to retry later, a google.rpc.RetryInfo) and the same /metrics.
//
// Server starts no goroutine of its own. Drain ends the open streams with
// UNAVAILABLE (and refuses new ones) so that the HTTP server's shutdown is
// not held up by a stream that would run until its caller cancels; Wait
// returns once every call has returned.
package rpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/leaseapi"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/snowflake"
)

// DefaultMaxCount is the largest count or batch size of a call when
// Config.MaxCount is zero: the HTTP API's default.
const DefaultMaxCount = httpapi.DefaultMaxCount

// Errors of New.
var (
	ErrNoSnowflakes = errors.New("rpcapi: Config.Snowflakes is nil")
	ErrNoSegments   = errors.New("rpcapi: Config.Segments is nil")
	ErrMaxCount     = errors.New("rpcapi: max count out of range")
)

// The interfaces below are what the services call, each declared by the
// handlers that use it: *allocator.Keeper is a SnowflakeIssuer and a
// ReadyChecker, *allocator.Segments a SegmentDrawer, *httpapi.Server an
// Authorizer and *leaseapi.Broker a LeaseBroker.

// SnowflakeIssuer issues Snowflake IDs (NextIds and StreamIds without a
// namespace) and knows their layout (Parse, GetLayout).
type SnowflakeIssuer interface {
	// NextNFenced appends n Snowflake IDs to dst and returns the lease
	// they were made under, or an error wrapping allocator.ErrUnavailable
	// when the node cannot prove its lease.
	NextNFenced(dst []snowflake.ID, n int) ([]snowflake.ID, allocator.LeaseToken, error)
	// Layout returns the Snowflake layout of the IDs.
	Layout() snowflake.Layout
}

// SegmentDrawer serves the IDs of namespaces' counters.
type SegmentDrawer interface {
	// Draw fills out with n IDs of namespace name.
	Draw(ctx context.Context, name string, n int, out *allocator.Batch) error
}

// ReadyChecker says whether the node can issue Snowflake IDs: the health
// service's status of IdService.
type ReadyChecker interface {
	Ready() error
}

// Authorizer checks a call's Authorization header against the node's
// tokens for the scope of the service called, as the HTTP routes do.
type Authorizer interface {
	// Authorize returns the caller, or an *httpapi.AuthError.
	Authorize(authorization []string, scope httpapi.Scopes) (httpapi.Caller, error)
	// Admit applies the per-caller rate limit to a call Authorize let
	// through, peerAddr naming a caller without a token: nil, or an
	// *httpapi.AuthError with code too_many and its RetryAfter.
	Admit(caller httpapi.Caller, scope httpapi.Scopes, peerAddr string) error
}

// LeaseBroker runs the lease API's calls: the same checks and store calls
// as the HTTP lease API under /v1/leases.
type LeaseBroker interface {
	// On reports whether the lease API is on.
	On() bool
	// Key checks a lease's datacenter and worker IDs against the layout.
	Key(datacenter, worker int64) (allocator.LeaseKey, error)
	Acquire(ctx context.Context, caller leaseapi.Caller, req leaseapi.AcquireRequest) (leaseapi.Grant, error)
	Heartbeat(ctx context.Context, caller leaseapi.Caller, req leaseapi.HeartbeatRequest) (leaseapi.Extension, error)
	Release(ctx context.Context, caller leaseapi.Caller, req leaseapi.ReleaseRequest) (int64, error)
}

// Config configures a Server.
type Config struct {
	// Snowflakes issues Snowflake IDs: the node's *allocator.Keeper.
	Snowflakes SnowflakeIssuer
	// Segments serves namespace IDs: the node's *allocator.Segments.
	Segments SegmentDrawer
	// Ready, when not nil, decides the health status of IdService (and of
	// the whole server, service ""): the node's keeper.
	Ready ReadyChecker
	// Auth, when not nil, checks every call of IdService (scope ids) and
	// LeaseService (scope leases). Nil leaves IdService open and
	// LeaseService off (NOT_FOUND), as the HTTP API without tokens.
	Auth Authorizer
	// Leases runs LeaseService's calls; nil, or a broker that is not On,
	// leaves LeaseService off (NOT_FOUND).
	Leases LeaseBroker
	// MaxCount is the largest count of NextIds and batch size of
	// StreamIds: 1 to allocator.MaxDrawCount, 0 for DefaultMaxCount.
	MaxCount int
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// Tracer, when not nil, traces the calls of idgen's services
	// (tracing.go); nil traces nothing and costs nothing.
	Tracer trace.Tracer
}

// Server serves the gRPC API. Build it with New, serve Handler (or Mount),
// and at shutdown call Drain, then Wait.
type Server struct {
	snowflakes SnowflakeIssuer
	segments   SegmentDrawer
	ready      ReadyChecker
	auth       Authorizer
	leases     LeaseBroker
	maxCount   int
	layout     snowflake.Layout
	log        *slog.Logger
	metrics    *metrics

	mux *http.ServeMux

	// drained is closed by Drain; idle is closed once Drain was called
	// and no call is under way. callsMu guards closed and calls.
	drainOnce sync.Once
	drained   chan struct{}
	idle      chan struct{}
	callsMu   sync.Mutex
	closed    bool // Drain was called
	calls     int  // calls under way

	pool sync.Pool // *scratch
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Snowflakes == nil:
		return nil, ErrNoSnowflakes
	case cfg.Segments == nil:
		return nil, ErrNoSegments
	case cfg.MaxCount < 0 || cfg.MaxCount > allocator.MaxDrawCount:
		return nil, fmt.Errorf("%w: %d, want 1 to %d", ErrMaxCount, cfg.MaxCount, allocator.MaxDrawCount)
	}
	s := &Server{
		snowflakes: cfg.Snowflakes,
		segments:   cfg.Segments,
		ready:      cfg.Ready,
		auth:       cfg.Auth,
		leases:     cfg.Leases,
		maxCount:   cfg.MaxCount,
		layout:     cfg.Snowflakes.Layout(),
		log:        cfg.Logger,
		drained:    make(chan struct{}),
		idle:       make(chan struct{}),
	}
	if s.maxCount == 0 {
		s.maxCount = DefaultMaxCount
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pool.New = func() any { return new(scratch) }
	s.metrics = newMetrics()

	// The metrics interceptor is the outermost, so that refusals by the
	// auth interceptor are counted too.
	interceptors := []connect.Interceptor{s.metrics, s.lifecycle(), authInterceptor{s}}
	if cfg.Tracer != nil {
		// Inside the auth interceptor: the span gets the call's request
		// ID and caller.
		interceptors = append(interceptors, tracingInterceptor{tracer: cfg.Tracer, prop: propagation.TraceContext{}})
	}
	opts := connect.WithInterceptors(interceptors...)
	mux := http.NewServeMux()
	mux.Handle(idgenv1connect.NewIdServiceHandler(idService{s}, opts))
	mux.Handle(idgenv1connect.NewLeaseServiceHandler(leaseService{s}, opts))
	mux.Handle(grpchealth.NewHandler(healthChecker{s}, connect.WithInterceptors(s.metrics)))
	reflector := grpcreflect.NewStaticReflector(Services()...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, connect.WithInterceptors(s.metrics)))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, connect.WithInterceptors(s.metrics)))
	s.mux = mux
	return s, nil
}

// Services returns the fully-qualified names of the services the server
// serves, as reflection lists them.
func Services() []string {
	return []string{
		idgenv1connect.IdServiceName,
		idgenv1connect.LeaseServiceName,
		grpchealth.HealthV1ServiceName,
	}
}

// Handler returns the handler of the gRPC API: every path under
// /<service>/ of the services above and of reflection.
func (s *Server) Handler() http.Handler { return s.mux }

// rpcPrefixes are the paths the gRPC API answers: "/<service>/".
func rpcPrefixes() []string {
	return []string{
		"/" + idgenv1connect.IdServiceName + "/",
		"/" + idgenv1connect.LeaseServiceName + "/",
		"/" + grpchealth.HealthV1ServiceName + "/",
		"/grpc.reflection.v1.ServerReflection/",
		"/grpc.reflection.v1alpha.ServerReflection/",
	}
}

// Mount returns a handler that serves the gRPC API's paths and passes
// every other request to next (the HTTP API). Paths starting with a
// service name cannot clash with the HTTP API's routes, which never
// contain a dot in their first segment.
//
// The HTTP server's read and write deadlines bound a whole request; a
// stream of IDs runs until its total or its caller's cancel, so the
// deadlines are lifted for streaming calls: Drain, not a timeout, ends
// them at shutdown.
func (s *Server) Mount(next http.Handler) http.Handler {
	prefixes := rpcPrefixes()
	stream := "/" + idgenv1connect.IdServiceName + "/StreamIds"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		for _, prefix := range prefixes {
			if strings.HasPrefix(p, prefix) {
				if p == stream {
					rc := http.NewResponseController(w)
					_ = rc.SetWriteDeadline(time.Time{})
					_ = rc.SetReadDeadline(time.Time{})
				}
				s.mux.ServeHTTP(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Drain ends the streams under way with UNAVAILABLE ("the node is shutting
// down") and makes every later call of IdService and LeaseService fail the
// same way; the health service reports NOT_SERVING from then on. It does
// not wait: see Wait. Calling it again does nothing.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.callsMu.Lock()
		s.closed = true
		if s.calls == 0 {
			close(s.idle)
		}
		s.callsMu.Unlock()
		close(s.drained)
	})
}

// Wait returns once Drain was called and every call that started before it
// has returned, or ctx's error when ctx ends first.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// draining reports whether Drain was called.
func (s *Server) draining() bool {
	select {
	case <-s.drained:
		return true
	default:
		return false
	}
}

// begin registers a call under way; false after Drain.
func (s *Server) begin() bool {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.closed {
		return false
	}
	s.calls++
	return true
}

// end registers the end of a call that begin let in.
func (s *Server) end() {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	s.calls--
	if s.closed && s.calls == 0 {
		close(s.idle)
	}
}
