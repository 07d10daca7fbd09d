// Package rpcapi is idgen's gRPC API: the services of proto/idgen/v1
// (IdService and LeaseService), gRPC health checking and server
// reflection, on the HTTP API's listener. Listen splits the listener by
// each connection's first request: gRPC calls over h2c go to grpc-go's own
// transport (native.go, split.go), everything else to the HTTP server,
// where Mount serves gRPC, gRPC-Web and the Connect protocol with
// connect-go. Both stacks call the same service methods. It only decodes,
// calls the core (package idgen: Service, Authorizer, Broker) and encodes:
// tokens, scopes, the rate limit, counts, lease rules and error codes are
// the core's, as for the HTTP API. Tokens are checked from a call's
// headers before a byte of its body is read, and bodies are capped as sent
// and as decompressed (gate.go, native.go).
package rpcapi

import (
	"context"
	"errors"
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
	"google.golang.org/grpc"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/snowflake"
)

// Errors of New.
var (
	ErrNoService = errors.New("rpcapi: Config.Service is nil")
	ErrNoAuth    = errors.New("rpcapi: Config.Auth is nil")
)

// ReadyChecker says whether the node can issue Snowflake IDs: the health
// service's status of IdService. The node's *allocator.Keeper is one.
type ReadyChecker interface {
	Ready() error
}

// Config configures a Server.
type Config struct {
	// Service draws the IDs of NextIds and StreamIds, and decides their
	// count and rate limits.
	Service *idgen.Service
	// Auth decides who may call IdService (scope ids) and LeaseService
	// (scope leases).
	Auth *idgen.Authorizer
	// Leases runs LeaseService's calls; nil, or a broker that is not On,
	// leaves LeaseService off (NOT_FOUND).
	Leases *idgen.Broker
	// Sequences serves SequenceService (sequences.go); nil answers
	// NOT_FOUND there: the store keeps no sequences.
	Sequences *idgen.Sequences
	// Ready, when not nil, decides the health status of IdService (and of
	// the whole server, service ""): the node's keeper.
	Ready ReadyChecker
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// Tracer, when not nil, traces the calls of idgen's services
	// (tracing.go); nil traces nothing and costs nothing.
	Tracer trace.Tracer
	// StreamSendTimeout bounds each send of a StreamIds stream: a caller
	// that has not taken a message after this long loses the stream. 0
	// means DefaultStreamSendTimeout.
	StreamSendTimeout time.Duration
	// ReadTimeout bounds how long a gRPC call served by grpc-go (Listen)
	// may take to deliver its request, as the HTTP server's ReadTimeout
	// bounds the others. 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
}

// DefaultReadTimeout is Config.ReadTimeout's default, the HTTP API's
// (httpapi.ReadTimeout).
const DefaultReadTimeout = 10 * time.Second

// Server serves the gRPC API. Build it with New, serve Mount's handler on
// the listener Listen returns, and at shutdown call Drain, then the HTTP
// server's Shutdown, then Shutdown, then Wait. Only Listen starts
// goroutines; Shutdown stops them and waits for them.
type Server struct {
	svc         *idgen.Service
	auth        *idgen.Authorizer
	leases      *idgen.Broker    // nil: LeaseService is off
	seqs        *idgen.Sequences // nil: SequenceService answers NOT_FOUND
	ready       ReadyChecker
	sendTimeout time.Duration
	readTimeout time.Duration
	layout      snowflake.Layout
	log         *slog.Logger
	metrics     *metrics
	tracing     tracingInterceptor // tracer nil: no tracing

	native   *grpc.Server // serves the gRPC connections of split
	splitMu  sync.Mutex
	split    *splitter // nil until Listen
	shutdown bool      // Shutdown was called

	mux        *http.ServeMux
	gate       http.Handler
	errors     *connect.ErrorWriter
	procedures map[string]bool // of idgen's services, for the metrics

	// drained is closed by Drain; idle once Drain was called and no call
	// is under way. callsMu guards closed, calls and inflight.
	drainOnce sync.Once
	drained   chan struct{}
	idle      chan struct{}
	callsMu   sync.Mutex
	closed    bool
	calls     int // calls of idgen's services under way
	inflight  map[*call]struct{}

	pool sync.Pool // *scratch
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Service == nil:
		return nil, ErrNoService
	case cfg.Auth == nil:
		return nil, ErrNoAuth
	}
	s := &Server{
		svc:         cfg.Service,
		auth:        cfg.Auth,
		leases:      cfg.Leases,
		seqs:        cfg.Sequences,
		ready:       cfg.Ready,
		sendTimeout: cfg.StreamSendTimeout,
		layout:      cfg.Service.Layout(),
		log:         cfg.Logger,
		drained:     make(chan struct{}),
		idle:        make(chan struct{}),
		inflight:    make(map[*call]struct{}),
	}
	if s.readTimeout = cfg.ReadTimeout; s.readTimeout <= 0 {
		s.readTimeout = DefaultReadTimeout
	}
	if s.sendTimeout <= 0 {
		s.sendTimeout = DefaultStreamSendTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.leases != nil && !s.leases.On() {
		s.leases = nil
	}
	s.pool.New = func() any { return new(scratch) }
	s.metrics = newMetrics()

	// The metrics interceptor is the outermost, so that every refusal
	// past the gate (which counts its own) is counted too.
	interceptors := []connect.Interceptor{s.metrics, s.lifecycle()}
	if cfg.Tracer != nil {
		s.tracing = tracingInterceptor{tracer: cfg.Tracer, prop: propagation.TraceContext{}}
		interceptors = append(interceptors, s.tracing)
	}
	opts := handlerOptions(interceptors...)
	open := handlerOptions(s.metrics)
	mux := http.NewServeMux()
	mux.Handle(idgenv1connect.NewIdServiceHandler(idService{s}, opts))
	mux.Handle(idgenv1connect.NewLeaseServiceHandler(leaseService{s}, opts))
	mux.Handle(idgenv1connect.NewSequenceServiceHandler(sequenceService{s}, opts))
	mux.Handle(grpchealth.NewHandler(healthChecker{s}, open))
	reflector := grpcreflect.NewStaticReflector(Services()...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, open))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, open))
	s.mux = mux
	s.errors = connect.NewErrorWriter(open)
	s.procedures = procedures()
	s.gate = http.HandlerFunc(s.serveGate)
	s.native = s.newNative()
	return s, nil
}

// Services returns the fully-qualified names of the services the server
// serves, as reflection lists them.
func Services() []string {
	return []string{
		idgenv1connect.IdServiceName,
		idgenv1connect.LeaseServiceName,
		idgenv1connect.SequenceServiceName,
		grpchealth.HealthV1ServiceName,
	}
}

// Handler returns the handler of the gRPC API's paths, behind the gate.
func (s *Server) Handler() http.Handler { return s.gate }

func rpcPrefixes() []string {
	return []string{
		"/" + idgenv1connect.IdServiceName + "/",
		"/" + idgenv1connect.LeaseServiceName + "/",
		"/" + idgenv1connect.SequenceServiceName + "/",
		"/" + grpchealth.HealthV1ServiceName + "/",
		"/grpc.reflection.v1.ServerReflection/",
		"/grpc.reflection.v1alpha.ServerReflection/",
	}
}

// Mount returns a handler that serves the gRPC API's paths and passes
// every other request to next (the HTTP API), whose routes never contain
// a dot in their first segment.
func (s *Server) Mount(next http.Handler) http.Handler {
	prefixes := rpcPrefixes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		for _, prefix := range prefixes {
			if strings.HasPrefix(p, prefix) {
				s.gate.ServeHTTP(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Drain ends the streams under way with UNAVAILABLE (one blocked on a
// caller that does not read, after drainGrace) and the calls still waiting
// for their request at once, so that nothing holds the HTTP server's
// shutdown up; later calls fail with UNAVAILABLE, and health reports
// NOT_SERVING. It does not wait (see Wait); calling it again does nothing.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.callsMu.Lock()
		s.closed = true
		if s.calls == 0 {
			close(s.idle)
		}
		now := time.Now()
		for c := range s.inflight {
			c.drain(now)
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
