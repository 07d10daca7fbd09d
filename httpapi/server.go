// Package httpapi is idgen's HTTP interface, built on echo v4.
//
// It serves Snowflake IDs from a lease keeper (GET /ids), dense per-namespace
// IDs from the segment allocator (GET /ids?namespace=NS), the decomposition
// of an ID (GET /ids/{id}), health and readiness probes, Prometheus metrics,
// a small HTML status page and, when an admin token is configured, an admin
// API for leases and namespaces. Every error is an application/problem+json
// document whose "code" member says what went wrong; a node that cannot
// prove its lease answers 503 with Retry-After.
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
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
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

// Config configures a Server.
type Config struct {
	// Keeper issues Snowflake IDs; it must be started by the caller.
	Keeper *allocator.Keeper
	// Segments serves namespace IDs.
	Segments *allocator.Segments
	// Store is read by the admin API, the status page and the readiness
	// probe (Ping), and written by the admin API (namespaces).
	Store allocator.Store
	// MaxCount is the largest count one request may ask for; 0 means
	// DefaultMaxCount. At most allocator.MaxDrawCount.
	MaxCount int
	// AdminToken enables the admin API under /admin/ for requests carrying
	// "Authorization: Bearer <AdminToken>". Empty disables it (404).
	AdminToken string
	// Logger receives errors and, at debug level, one line per request.
	// Nil discards them.
	Logger *slog.Logger
	// Version is shown on the status page and in idgen_build_info.
	Version string
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
	keeper   *allocator.Keeper
	segments *allocator.Segments
	store    allocator.Store
	maxCount int
	adminKey [32]byte // SHA-256 of the admin token
	admin    bool
	log      *slog.Logger
	version  string
	layout   snowflake.Layout

	echo    *echo.Echo
	routes  []Route
	metrics *metrics
	scratch sync.Pool // *scratch
	status  *template.Template

	ping pingCache

	// Header values set on every JSON answer, shared so that setting them
	// costs no allocation. net/http never changes them.
	hdrJSON    []string
	hdrNoStore []string
	hdrNoSniff []string
}

// New returns a Server for cfg. It returns an error when the keeper,
// segments or store is missing or MaxCount is out of range.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Keeper == nil:
		return nil, errors.New("httpapi: Config.Keeper is nil")
	case cfg.Segments == nil:
		return nil, errors.New("httpapi: Config.Segments is nil")
	case cfg.Store == nil:
		return nil, errors.New("httpapi: Config.Store is nil")
	case cfg.MaxCount < 0 || cfg.MaxCount > allocator.MaxDrawCount:
		return nil, fmt.Errorf("httpapi: max count %d not in 1..%d", cfg.MaxCount, allocator.MaxDrawCount)
	}
	s := &Server{
		keeper:     cfg.Keeper,
		segments:   cfg.Segments,
		store:      cfg.Store,
		maxCount:   cfg.MaxCount,
		log:        cfg.Logger,
		version:    cfg.Version,
		layout:     cfg.Keeper.Layout(),
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
	if s.version == "" {
		s.version = "dev"
	}
	if cfg.AdminToken != "" {
		s.admin = true
		s.adminKey = tokenDigest(cfg.AdminToken)
	}
	s.scratch.New = func() any { return new(scratch) }
	s.ping.store = cfg.Store

	tmpl, err := statusTemplate()
	if err != nil {
		return nil, fmt.Errorf("httpapi: status page: %w", err)
	}
	s.status = tmpl

	m, err := newMetrics(s)
	if err != nil {
		return nil, err
	}
	s.metrics = m

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe)
	s.echo = e

	s.add(e.GET, "/", s.handleStatus)
	s.add(e.GET, "/ids", s.handleIDs)
	s.add(e.GET, "/ids/:id", s.handleParse)
	s.add(e.GET, "/healthz", s.handleHealth)
	s.add(e.GET, "/readyz", s.handleReady)
	s.add(e.GET, "/metrics", echo.WrapHandler(m.handler()))

	g := e.Group("/admin", s.authorize)
	s.add(g.GET, "/leases", s.handleAdminLeases)
	s.add(g.GET, "/namespaces", s.handleAdminNamespaces)
	s.add(g.POST, "/namespaces", s.handleAdminCreateNamespace)
	s.add(g.GET, "/namespaces/:name", s.handleAdminNamespace)
	s.add(g.PATCH, "/namespaces/:name", s.handleAdminUpdateNamespace)

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
	store allocator.Store
	mu    sync.Mutex
	at    time.Time
	err   error
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
	p.err = p.store.Ping(ctx)
	p.at = time.Now()
	return p.err
}
