// Package httpapi is idgen's HTTP interface, built on echo v4.
//
// It serves Snowflake IDs from a lease keeper (GET /ids), dense per-namespace
// IDs from the segment allocator (GET /ids?namespace=NS), the decomposition
// of an ID (GET /ids/{id}), health and readiness probes, Prometheus metrics,
// a small HTML status page and, when an admin token or a token with the
// admin scope is configured, an admin API for leases, their audit trail and
// namespaces. With callers' tokens (auth.go) each route family needs its
// scope, and the lease API (/v1/leases) is on once a token has the leases
// scope. Every answer carries a request ID (requestid.go), which the
// request's log lines and the lease events it causes record. Every error is
// an application/problem+json document whose "code" member says what went
// wrong; a node that cannot prove its lease answers 503 with Retry-After.
//
// The /ids hot path encodes its JSON by appending to pooled buffers, so a
// request costs a fixed number of allocations whatever its count.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/leaseapi"
	"github.com/idgen-project/idgen/snowflake"
)

// DefaultMaxCount is the largest count a request may ask for when
// Config.MaxCount is zero.
const DefaultMaxCount = 10000

// Limits of the HTTP server built by HTTPServer and of request bodies.
const (
	MaxHeaderBytes    = 16 << 10 // larger request headers get 431
	MaxBodyBytes      = 64 << 10 // larger admin request bodies get 413
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
)

// Timeouts of the work a request does.
const (
	// storeTimeout bounds the store calls of the admin API and status page.
	storeTimeout = 5 * time.Second
	// pingTimeout bounds the database ping of /readyz and /metrics, whose
	// result is reused for pingCacheFor.
	pingTimeout  = time.Second
	pingCacheFor = time.Second
)

// The interfaces below are what the server calls, each declared by the
// handlers that use it. *allocator.Keeper is a SnowflakeIssuer and a
// LeaseReporter, *allocator.Segments a SegmentDrawer, and every
// allocator.Store an AdminStore and a Pinger.

// SnowflakeIssuer issues Snowflake IDs: GET /ids, GET /ids/{id}, and the
// max_id_limit the admin API gives a namespace with the Snowflake fallback.
type SnowflakeIssuer interface {
	// NextNFenced appends n Snowflake IDs to dst and returns the token of
	// the lease that made them, or an error wrapping
	// allocator.ErrUnavailable when the node cannot prove its lease.
	NextNFenced(dst []snowflake.ID, n int) ([]snowflake.ID, allocator.LeaseToken, error)
	// Layout returns the Snowflake layout of the IDs.
	Layout() snowflake.Layout
	// SmallestIDNow returns the smallest Snowflake ID of the current
	// millisecond.
	SmallestIDNow() int64
}

// LeaseReporter says whether the node can prove its lease, and how it holds
// it: /readyz, /metrics and the status page.
type LeaseReporter interface {
	// Ready returns nil when IDs can be issued, else why not.
	Ready() error
	// Status returns a snapshot of the lease and its counters.
	Status() allocator.KeeperStatus
}

// SegmentDrawer serves namespace IDs (GET /ids?namespace=NS) and reports on
// the namespaces this node draws from (admin API, /metrics, status page).
type SegmentDrawer interface {
	// Draw fills out with n IDs of namespace name.
	Draw(ctx context.Context, name string, n int, out *allocator.Batch) error
	// NamespaceStats returns the buffer state of one namespace, false when
	// this node has not drawn from it.
	NamespaceStats(name string) (allocator.SegmentStats, bool)
	// Stats returns the buffer state of every namespace drawn from.
	Stats() []allocator.SegmentStats
}

// AdminStore is what the admin API and the status page read and write in
// the database: the lease table and the namespaces.
type AdminStore interface {
	allocator.LeaseAdmin
	allocator.NamespaceAdmin
}

// Pinger checks that the database answers (/readyz, /metrics, status page).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures a Server.
type Config struct {
	// Snowflakes issues Snowflake IDs: an *allocator.Keeper, started by the
	// caller.
	Snowflakes SnowflakeIssuer
	// Lease reports on the lease the Snowflake IDs are issued under: the
	// same *allocator.Keeper.
	Lease LeaseReporter
	// Segments serves namespace IDs: an *allocator.Segments.
	Segments SegmentDrawer
	// Admin is read by the admin API and the status page, and written by
	// the admin API (namespaces): the store.
	Admin AdminStore
	// Database is pinged by the readiness probe, /metrics and the status
	// page: the store.
	Database Pinger
	// Retries, when not nil, feeds idgen_store_serialization_retries_total:
	// the store, when it is an allocator.RetryCounter.
	Retries allocator.RetryCounter
	// MaxCount is the largest count one request may ask for; 0 means
	// DefaultMaxCount. At most allocator.MaxDrawCount.
	MaxCount int
	// AdminToken enables the admin API under /admin/ for requests carrying
	// "Authorization: Bearer <AdminToken>". Empty disables it (404) unless
	// a token has the admin scope. With Tokens, it is one more credential
	// with the admin scope, whose caller is named AdminTokenName.
	AdminToken string
	// Tokens, when not nil, are the callers' tokens (ParseTokens), and
	// every route family needs its scope: /ids ScopeIDs, /admin/
	// ScopeAdmin, /v1/leases ScopeLeases (see requireScope). Nil leaves
	// /ids open, the admin API on the admin token alone and the lease API
	// off. SetTokens replaces them while the server serves.
	Tokens *TokenSet
	// Logger receives errors and, at debug level, one line per request.
	// Nil discards them.
	Logger *slog.Logger
	// Version is shown on the status page and in idgen_build_info.
	Version string
	// Durability says whether the database's acknowledged commits survive
	// a crash, as checked at start: "ok", or "unsafe: <setting>=<value>
	// (overridden)" when the operator chose to serve anyway. It is shown on
	// /readyz and the status page and does not decide readiness. Empty
	// leaves it out.
	Durability string
	// Status configures the status page and the history of its charts.
	// The server builds the history; its owner starts it (History).
	Status StatusSettings
	// LeaseAPI configures the lease API under /v1/leases (leases.go).
	LeaseAPI LeaseAPIConfig
	// RateLimit limits each caller's request rate (ratelimit.go); the
	// zero value sets no limit.
	RateLimit RateLimit
	// Tracing, when its Tracer is set, traces requests (tracing.go); the
	// zero value traces nothing and costs nothing.
	Tracing Tracing
}

// Route is one route the server answers, in echo's path syntax
// (e.g. /ids/:id).
type Route struct {
	Method string
	Path   string
}

// Server is idgen's HTTP API. It starts no goroutine of its own: build it
// with New and serve Handler, or HTTPServer, until shutdown.
type Server struct {
	snowflakes SnowflakeIssuer
	lease      LeaseReporter
	segments   SegmentDrawer
	admin      AdminStore
	retries    allocator.RetryCounter
	maxCount   int
	adminKey   [32]byte // SHA-256 of the admin token
	adminOn    bool
	// tokens is the token set requests are checked against, the admin
	// token included; nil without tokens. SetTokens swaps it whole.
	tokens  atomic.Pointer[TokenSet]
	log     *slog.Logger
	version string
	layout  snowflake.Layout
	// durability is Config.Durability.
	durability string
	// broker runs the lease API's calls, on Config.LeaseAPI.
	broker *leaseapi.Broker
	// limiter limits callers' request rates; nil without a limit.
	limiter *limiter
	// tracing is Config.Tracing resolved; its tracer is nil when off.
	tracing Tracing
	// spanNames names the requests' spans by route, with tracing on.
	spanNames map[Route]string

	echo    *echo.Echo
	routes  []Route
	metrics *metrics
	scratch sync.Pool // *scratch
	status  *template.Template
	// statusCfg is Config.Status resolved; history samples for the status
	// page's charts once its owner starts it.
	statusCfg StatusSettings
	history   *History

	ping pingCache

	// Header values set on every JSON answer, shared so that setting them
	// costs no allocation. net/http never changes them.
	hdrJSON    []string
	hdrNoStore []string
	hdrNoSniff []string
}

// New returns a Server for cfg. It returns an error when one of the
// Snowflakes, Lease, Segments, Admin and Database is missing, MaxCount
// is out of range, or Status has a setting out of range.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Snowflakes == nil:
		return nil, errors.New("httpapi: Config.Snowflakes is nil")
	case cfg.Lease == nil:
		return nil, errors.New("httpapi: Config.Lease is nil")
	case cfg.Segments == nil:
		return nil, errors.New("httpapi: Config.Segments is nil")
	case cfg.Admin == nil:
		return nil, errors.New("httpapi: Config.Admin is nil")
	case cfg.Database == nil:
		return nil, errors.New("httpapi: Config.Database is nil")
	case cfg.MaxCount < 0 || cfg.MaxCount > allocator.MaxDrawCount:
		return nil, fmt.Errorf("httpapi: max count %d not in 1..%d", cfg.MaxCount, allocator.MaxDrawCount)
	}
	if err := cfg.LeaseAPI.Validate(); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if err := cfg.RateLimit.Validate(); err != nil {
		return nil, fmt.Errorf("httpapi: rate limit: %w", err)
	}
	s := &Server{
		snowflakes: cfg.Snowflakes,
		lease:      cfg.Lease,
		segments:   cfg.Segments,
		admin:      cfg.Admin,
		retries:    cfg.Retries,
		maxCount:   cfg.MaxCount,
		log:        cfg.Logger,
		version:    cfg.Version,
		durability: cfg.Durability,
		limiter:    newLimiter(cfg.RateLimit),
		tracing:    cfg.Tracing.resolve(),
		layout:     cfg.Snowflakes.Layout(),
		hdrJSON:    []string{"application/json"},
		hdrNoStore: []string{"no-store"},
		hdrNoSniff: []string{"nosniff"},
	}
	if s.maxCount == 0 {
		s.maxCount = DefaultMaxCount
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	// Lines logged with a request's context carry its ID (and caller).
	s.log = slog.New(requestLogHandler{s.log.Handler()})
	if s.version == "" {
		s.version = "dev"
	}
	if cfg.AdminToken != "" {
		s.adminOn = true
		s.adminKey = tokenDigest(cfg.AdminToken)
	}
	s.SetTokens(cfg.Tokens)
	broker, err := leaseapi.New(cfg.LeaseAPI, s.layout, s.log)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	s.broker = broker
	s.scratch.New = func() any { return new(scratch) }
	s.ping.db = cfg.Database

	tmpl, err := statusTemplate()
	if err != nil {
		return nil, fmt.Errorf("httpapi: status page: %w", err)
	}
	s.status = tmpl
	if s.statusCfg, err = cfg.Status.resolve(); err != nil {
		return nil, fmt.Errorf("httpapi: status page: %w", err)
	}

	m, err := newMetrics(s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if err := newRateMetrics(m.reg, s.limiter); err != nil {
		return nil, err
	}
	s.history = newHistory(s.statusCfg, s.readSample)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe)
	s.echo = e

	// /ids is wrapped in its scope check here, once: echo would build a
	// route middleware's closure for every request.
	s.add(e.GET, "/", s.handleStatus)
	s.add(e.GET, "/ids", s.guardIDs(s.handleIDs))
	s.add(e.GET, "/ids/:id", s.guardIDs(s.handleParse))
	s.add(e.GET, "/healthz", s.handleHealth)
	s.add(e.GET, "/readyz", s.handleReady)
	s.add(e.GET, "/metrics", echo.WrapHandler(m.handler()))

	g := e.Group("/admin", s.requireScope(ScopeAdmin))
	s.add(g.GET, "/leases", s.handleAdminLeases)
	s.add(g.POST, "/leases/:datacenter/:worker/evict", s.handleAdminEvict)
	s.add(g.GET, "/lease-events", s.handleAdminLeaseEvents)
	s.add(g.GET, "/namespaces", s.handleAdminNamespaces)
	s.add(g.POST, "/namespaces", s.handleAdminCreateNamespace)
	s.add(g.GET, "/namespaces/:name", s.handleAdminNamespace)
	s.add(g.PATCH, "/namespaces/:name", s.handleAdminUpdateNamespace)
	s.add(g.DELETE, "/namespaces/:name", s.handleAdminDeleteNamespace)

	// The lease API (leases.go): off, 404, while no token has the leases
	// scope.
	s.addLeaseRoutes(e)
	// The API shapes of the designs idgen replaces (compat.go).
	s.addCompatRoutes(e)

	if s.tracing.Tracer != nil {
		s.nameSpans()
	}
	sort.Slice(s.routes, func(i, j int) bool {
		if s.routes[i].Path != s.routes[j].Path {
			return s.routes[i].Path < s.routes[j].Path
		}
		return s.routes[i].Method < s.routes[j].Method
	})
	return s, nil
}

type addFunc func(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route

// add registers h with echo (add is e.GET, g.POST, …) and records the
// route for Routes and the metrics' route label.
func (s *Server) add(add addFunc, path string, h echo.HandlerFunc) {
	r := add(path, h)
	s.routes = append(s.routes, Route{Method: r.Method, Path: r.Path})
	s.metrics.knownRoute(r.Path)
}

// LeaseBroker returns the broker behind the lease API, for another
// transport of the same API on this node (the gRPC LeaseService): one
// broker, one set of rules.
func (s *Server) LeaseBroker() *leaseapi.Broker { return s.broker }

// History returns the history the status page draws its charts from. The
// server does not start it: its owner calls Start, and Close at shutdown.
func (s *Server) History() *History { return s.history }

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// HTTPServer returns an http.Server serving Handler on addr with idgen's
// limits: request headers up to MaxHeaderBytes (431 beyond), and the
// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout constants.
// Keep-alives stay on. The net/http server's own errors go to the
// configured logger at warn level.
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
func (s *Server) Routes() []Route {
	return append([]Route(nil), s.routes...)
}

// pingCache remembers the outcome of the last database ping for a second,
// so that probes and scrapes do not hammer the database.
type pingCache struct {
	db  Pinger
	mu  sync.Mutex
	at  time.Time
	err error
}

// check returns the error of a ping no older than pingCacheFor, pinging
// now if needed.
func (p *pingCache) check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < pingCacheFor {
		return p.err
	}
	// A client that goes away must not leave a failure in the cache.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	p.err = p.db.Ping(ctx)
	p.at = time.Now()
	return p.err
}
