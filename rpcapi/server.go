// Package rpcapi is idgen's gRPC API: IdService, LeaseService and
// SequenceService of proto/idgen/v1, health and reflection, on the HTTP
// API's listener. Listen sends h2c gRPC connections to grpc-go (native.go,
// split.go) and the rest to the HTTP server, where Mount serves gRPC,
// gRPC-Web and Connect with connect-go; both call the same methods. It
// only decodes, calls the core (package idgen) and encodes. Tokens are
// checked from headers before the body is read, and bodies are capped as
// sent and decompressed (gate.go, native.go).
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

// ReadyChecker decides IdService's health status (the node's Keeper).
type ReadyChecker interface {
	Ready() error
}

// Config configures a Server.
type Config struct {
	// Service draws the IDs and decides counts and rate limits.
	Service *idgen.Service
	// Auth decides who may call IdService and LeaseService.
	Auth *idgen.Authorizer
	// Leases runs LeaseService; nil or off answers NOT_FOUND.
	Leases *idgen.Broker
	// Sequences serves SequenceService; nil answers NOT_FOUND.
	Sequences *idgen.Sequences
	// Ready, when not nil, decides IdService's (and the server's) health.
	Ready ReadyChecker
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// Tracer, when not nil, traces idgen's services (tracing.go).
	Tracer trace.Tracer
	// StreamSendTimeout bounds each StreamIds send (0: the default); a
	// caller not taking a message that long loses the stream.
	StreamSendTimeout time.Duration
	// ReadTimeout bounds how long a grpc-go call may take to deliver its
	// request, like the HTTP server's (0: DefaultReadTimeout).
	ReadTimeout time.Duration
}

// DefaultReadTimeout is Config.ReadTimeout's default (httpapi.ReadTimeout).
const DefaultReadTimeout = 10 * time.Second

// Server serves the gRPC API. Build it with New, serve Mount on Listen's
// listener; at shutdown call Drain, the HTTP server's Shutdown, Shutdown,
// then Wait. Only Listen starts goroutines.
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

	// drained is closed by Drain; idle once drained with no call under way.
	// callsMu guards closed, calls and inflight.
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

	// Metrics outermost, so every refusal past the gate is counted.
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

// Services returns the served services' full names, as reflection lists.
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

// Mount serves the gRPC API's paths and passes other requests to next
// (the HTTP API, whose first segments never contain a dot).
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

// Drain ends streams (after drainGrace for one blocked on a non-reading
// caller) and calls still waiting for their request, so nothing holds up
// the HTTP server's shutdown; later calls get UNAVAILABLE and health
// NOT_SERVING. It does not wait (see Wait) and is idempotent.
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

// Wait returns once Drain was called and every earlier call returned, or
// ctx's error.
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
