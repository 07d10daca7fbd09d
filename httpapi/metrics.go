package httpapi

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
)

// routeUnmatched labels requests that matched no route: random paths add
// no series.
const routeUnmatched = "unmatched"

// metrics is the HTTP request histogram (the node's other metrics are in
// internal/metrics).
type metrics struct {
	duration *prometheus.HistogramVec
	routes   map[string]bool // route templates; written only while New runs

	// observers is read without a lock and replaced whole under mu.
	observers atomic.Pointer[map[observerKey]prometheus.Observer]
	mu        sync.Mutex
}

type observerKey struct {
	route, method string
	status        int
}

func newMetrics() *metrics {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idgen_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route template, method and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "code"}),
		routes: map[string]bool{},
	}
	m.observers.Store(&map[observerKey]prometheus.Observer{})
	return m
}

// Collectors returns the HTTP API's metrics.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.duration}
}

// observer returns the histogram child of c's route, method and status.
func (s *Server) observer(c echo.Context, method string, status int) (prometheus.Observer, string) {
	m := s.metrics
	k := observerKey{c.Path(), method, status}
	if o := (*m.observers.Load())[k]; o != nil {
		return o, k.route // only a route's children are kept under its path
	}
	k.route = s.routeLabel(c)
	if o := (*m.observers.Load())[k]; o != nil {
		return o, k.route
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.observers.Load()
	o := cur[k]
	if o == nil {
		o = m.duration.WithLabelValues(k.route, method, strconv.Itoa(status))
		next := maps.Clone(cur)
		next[k] = o
		m.observers.Store(&next)
	}
	return o, k.route
}

// routeLabel is the route template c matched, or routeUnmatched.
func (s *Server) routeLabel(c echo.Context) string {
	if r := c.Path(); s.metrics.routes[r] {
		return r
	}
	return routeUnmatched
}

// methodLabel bounds the method label to the methods HTTP defines.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// monoBase is the timing origin: time.Since then reads only the
// monotonic clock.
var monoBase = time.Now()

// observe is the one global middleware (echo makes a closure per request
// for each): request ID, span, error answer, timing and log line.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Since(monoBase)
		assignRequestID(c)
		var span trace.Span
		if s.tracing.Tracer != nil {
			span = s.startSpan(c)
		}
		if err := s.call(next, c); err != nil {
			c.Error(err)
		}
		if span != nil {
			endSpan(c, span)
		}
		d := time.Since(monoBase) - start
		req := c.Request()
		method, status := methodLabel(req.Method), c.Response().Status
		o, route := s.observer(c, method, status)
		o.Observe(d.Seconds())
		if s.log.Enabled(req.Context(), slog.LevelDebug) {
			s.log.LogAttrs(s.logContext(c), slog.LevelDebug, "http request",
				slog.String("method", method), slog.String("route", route),
				slog.Int("status", status), slog.Duration("duration", d))
		}
		return nil
	}
}

// call runs h, turning a panic into a logged internal error;
// http.ErrAbortHandler is passed on so net/http drops the connection.
func (s *Server) call(h echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if r == http.ErrAbortHandler { //nolint:errorlint // r is the panic value itself, compared as net/http compares it
			panic(r)
		}
		s.log.LogAttrs(s.logContext(c), slog.LevelError, "handler panicked",
			slog.String("route", c.Path()), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		err = &idgen.Error{Code: idgen.Internal, Detail: "internal error; see the server log", Err: fmt.Errorf("panic: %v", r)}
	}()
	return h(c)
}
