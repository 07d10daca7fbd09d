package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
)

// routeUnmatched labels requests that matched no route, so that random
// paths cannot grow the number of series.
const routeUnmatched = "unmatched"

// metrics is the HTTP request histogram (the node's other metrics are in
// internal/metrics).
type metrics struct {
	duration *prometheus.HistogramVec
	routes   map[string]bool // route templates; written only while New runs

	mu        sync.RWMutex
	observers map[observerKey]prometheus.Observer
}

type observerKey struct {
	route, method string
	status        int
}

func newMetrics() *metrics {
	return &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idgen_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route template, method and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "code"}),
		routes:    map[string]bool{},
		observers: map[observerKey]prometheus.Observer{},
	}
}

// Collectors returns the HTTP API's metrics, for the registry /metrics
// serves.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.duration}
}

// observer returns the histogram child of one route, method and status.
func (m *metrics) observer(route, method string, status int) prometheus.Observer {
	k := observerKey{route, method, status}
	m.mu.RLock()
	o := m.observers[k]
	m.mu.RUnlock()
	if o != nil {
		return o
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o = m.observers[k]; o == nil {
		o = m.duration.WithLabelValues(route, method, strconv.Itoa(status))
		m.observers[k] = o
	}
	return o
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

// observe is the middleware of every request: its ID, span, timing, error
// answer (so that the status is known) and debug log line. It is the only
// global middleware: echo builds a closure per request for each one.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
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
		d := time.Since(start)
		req := c.Request()
		route, method := s.routeLabel(c), methodLabel(req.Method)
		status := c.Response().Status
		s.metrics.observer(route, method, status).Observe(d.Seconds())
		if s.log.Enabled(req.Context(), slog.LevelDebug) {
			s.log.LogAttrs(s.logContext(c), slog.LevelDebug, "http request",
				slog.String("method", method), slog.String("route", route),
				slog.Int("status", status), slog.Duration("duration", d))
		}
		return nil
	}
}

// call runs h, turning a panic into an internal error (logged with its
// stack) so that the client still gets a problem; http.ErrAbortHandler is
// passed on, to make net/http drop the connection.
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
