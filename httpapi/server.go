// Package httpapi is idgen's HTTP adapter, on echo v4: IDs, probes, the
// admin, lease, sequence and compatibility routes, the status page and
// /metrics. Handlers decode, call the core (package idgen) and encode.
// Every answer carries a request ID; errors are problem+json documents.
package httpapi

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/probe"
	"github.com/idgen-project/idgen/snowflake"
)

// Limits of the HTTP server built by HTTPServer. ReadTimeout ends a stalled
// request: 10 s for 16 KiB of headers and 64 KiB of body asks ~8 KB/s.
const (
	MaxHeaderBytes    = 16 << 10 // larger request headers get 431
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
)

// storeTimeout bounds the store calls of the admin API.
const storeTimeout = 5 * time.Second

// LeaseReporter reports the node's lease (/readyz) and now's smallest
// Snowflake ID (a fallback's max_id_limit): *allocator.Keeper.
type LeaseReporter interface {
	Ready() error
	Status() allocator.KeeperStatus
	SmallestIDNow() int64
}

// SegmentReporter reports this node's buffers (*allocator.Segments).
type SegmentReporter interface {
	NamespaceStats(name string) (allocator.SegmentStats, bool)
}

// AdminStore is what the admin API reads and writes: the store.
type AdminStore interface {
	allocator.LeaseAdmin
	allocator.NamespaceAdmin
}

// Pinger checks that the database answers (/readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures a Server. Service, Auth, Lease, Segments, Admin and
// Database are required.
type Config struct {
	// Service draws the IDs and decides their count and rate limits.
	Service *idgen.Service
	// Auth decides who may call which route.
	Auth *idgen.Authorizer
	// Leases runs /v1/leases; nil, or a broker that is not On: 404.
	Leases   *idgen.Broker
	Lease    LeaseReporter   // the node's *allocator.Keeper
	Segments SegmentReporter // the node's *allocator.Segments
	Admin    AdminStore      // the store
	Database Pinger          // pinged by /readyz: the node's probe.Ping
	// Status serves GET / (package statuspage); nil leaves the route out.
	Status func(http.ResponseWriter, *http.Request) error
	// Metrics serves GET /metrics; nil leaves the route out.
	Metrics http.Handler
	// Logger receives errors and, at debug level, a line per request.
	Logger *slog.Logger
	// Clock stamps the generated_at of GET /api/v1/ids; nil: system clock.
	Clock snowflake.Clock
	// Durability is what the check at start found, shown on /readyz.
	Durability string
	// Space is the database's space and alarms /readyz shows (etcd).
	Space probe.SpaceReporter
	// Tracing, when its Tracer is set, traces requests.
	Tracing Tracing
	// Sequences serves /v1/sequences; nil: the store keeps none (404).
	Sequences *idgen.Sequences
	// AuditClickHouse, when set, is read by GET /admin/audit/who too.
	AuditClickHouse *audit.ClickHouse
	// PublicStatusDetails shows the lease holder on /readyz to everyone.
	PublicStatusDetails bool
}

// Route is one route, in echo's path syntax (e.g. /ids/:id).
type Route struct {
	Method string
	Path   string
}

// Server is idgen's HTTP API; it starts no goroutine. Serve Handler or
// HTTPServer.
type Server struct {
	svc           *idgen.Service
	auth          *idgen.Authorizer
	leases        *idgen.Broker    // nil: the lease API is off
	seqs          *idgen.Sequences // nil: the store keeps no sequences
	lease         LeaseReporter
	segments      SegmentReporter
	admin         AdminStore
	auditCH       *audit.ClickHouse // nil: who reads the store only
	db            Pinger
	log           *slog.Logger
	clock         snowflake.Clock
	layout        snowflake.Layout
	durability    string
	space         probe.SpaceReporter
	publicDetails bool
	tracing       Tracing          // its Tracer is nil when off
	spanNames     map[Route]string // with tracing on

	echo    *echo.Echo
	routes  []Route
	metrics *metrics
	scratch sync.Pool // *scratch

	// Header values shared so that setting them allocates nothing.
	hdrJSON, hdrText, hdrNoStore, hdrNoSniff []string
}

// New returns a Server for cfg, or an error for a missing part.
func New(cfg Config) (*Server, error) {
	if cfg.Service == nil || cfg.Auth == nil || cfg.Lease == nil || cfg.Segments == nil || cfg.Admin == nil || cfg.Database == nil {
		return nil, errors.New("httpapi: Service, Auth, Lease, Segments, Admin and Database are required")
	}
	s := &Server{svc: cfg.Service, auth: cfg.Auth, leases: cfg.Leases, seqs: cfg.Sequences, lease: cfg.Lease,
		segments: cfg.Segments, admin: cfg.Admin, auditCH: cfg.AuditClickHouse, db: cfg.Database, log: cfg.Logger,
		clock: cfg.Clock, layout: cfg.Service.Layout(), durability: cfg.Durability, space: cfg.Space,
		publicDetails: cfg.PublicStatusDetails, tracing: cfg.Tracing.resolve(), metrics: newMetrics(),
		hdrJSON: []string{"application/json"}, hdrText: []string{"text/plain; charset=utf-8"},
		hdrNoStore: []string{"no-store"}, hdrNoSniff: []string{"nosniff"}}
	if s.leases != nil && !s.leases.On() {
		s.leases = nil
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = slog.New(requestLogHandler{s.log.Handler()})
	if s.clock == nil {
		s.clock = snowflake.SystemClock()
	}
	s.scratch.New = func() any { return new(scratch) }

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe)
	s.echo = e

	// /ids handlers check the caller themselves: middleware costs a
	// closure per request.
	if page := cfg.Status; page != nil {
		s.add(e.GET, "/", func(c echo.Context) error { return page(c.Response(), c.Request()) })
	}
	s.add(e.GET, "/ids", s.handleIDs)
	s.add(e.GET, "/ids/compose", s.handleCompose) // a static route: echo tries it before /ids/:id
	s.add(e.GET, "/ids/:id", s.handleParse)
	s.add(e.GET, "/healthz", s.handleHealth)
	s.add(e.GET, "/readyz", s.handleReady)
	if cfg.Metrics != nil {
		s.add(e.GET, "/metrics", echo.WrapHandler(cfg.Metrics))
	}

	g := e.Group("/admin", s.requireScope(idgen.ScopeAdmin))
	s.add(g.GET, "/leases", s.handleAdminLeases)
	s.add(g.POST, "/leases/:datacenter/:worker/evict", s.handleAdminEvict)
	s.add(g.GET, "/lease-events", s.handleAdminLeaseEvents)
	s.add(g.GET, "/audit/who/:id", s.handleAdminAuditWho)
	s.add(g.GET, "/namespaces", s.handleAdminNamespaces)
	s.add(g.POST, "/namespaces", s.handleAdminCreateNamespace)
	s.add(g.GET, "/namespaces/:name", s.handleAdminNamespace)
	s.add(g.PATCH, "/namespaces/:name", s.handleAdminUpdateNamespace)
	s.add(g.DELETE, "/namespaces/:name", s.handleAdminDeleteNamespace)

	s.addLeaseRoutes(e)
	s.addSequenceRoutes(e)
	s.addCompatRoutes(e)

	if s.tracing.Tracer != nil {
		s.nameSpans()
	}
	slices.SortFunc(s.routes, func(a, b Route) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return s, nil
}

type addFunc func(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route

// add registers h with echo and for Routes and the route label.
func (s *Server) add(add addFunc, path string, h echo.HandlerFunc) {
	r := add(path, h)
	s.routes = append(s.routes, Route{Method: r.Method, Path: r.Path})
	s.metrics.routes[r.Path] = true
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// HTTPServer returns an http.Server for Handler on addr with the limits
// above, logging its errors at warn level.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.echo,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Routes returns the routes the server answers, ordered by path and method.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }
