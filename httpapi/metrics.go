package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// routeUnmatched labels requests that matched no route, so that random
// paths cannot grow the number of series.
const routeUnmatched = "unmatched"

// metrics holds the server's Prometheus registry (its own, never the global
// one). Counters of IDs and the request histogram are updated by requests;
// everything about the lease, the database and the namespaces is read from
// the keeper and the segment allocator when Prometheus scrapes.
type metrics struct {
	reg *prometheus.Registry

	issuedSnowflake prometheus.Counter
	issuedSegment   prometheus.Counter
	issuedFallback  prometheus.Counter

	duration *prometheus.HistogramVec
	routes   map[string]bool // route templates; written only while New runs

	mu        sync.RWMutex
	observers map[observerKey]prometheus.Observer
}

type observerKey struct {
	route, method string
	status        int
}

func newMetrics(s *Server) (*metrics, error) {
	m := &metrics{
		reg:       prometheus.NewRegistry(),
		routes:    map[string]bool{},
		observers: map[observerKey]prometheus.Observer{},
	}
	issued := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idgen_ids_issued_total",
		Help: "IDs handed out over HTTP, by source: snowflake (GET /ids), segment (a namespace's counter) or fallback (Snowflake IDs served for a namespace while its database failed).",
	}, []string{"source"})
	m.issuedSnowflake = issued.WithLabelValues("snowflake")
	m.issuedSegment = issued.WithLabelValues("segment")
	m.issuedFallback = issued.WithLabelValues("fallback")
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "idgen_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by route template, method and status code.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method", "code"})
	for _, c := range []prometheus.Collector{
		issued,
		m.duration,
		newStateCollector(s),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) knownRoute(path string) { m.routes[path] = true }

// RegisterMetrics adds collectors to the registry /metrics serves, for the
// parts of a node around the server (the app's background loops). It
// returns the registry's error for a collector whose metrics clash with
// one already there.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// observer returns the histogram child of one route, method and status,
// creating it once.
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

// methodLabel bounds the method label to the methods HTTP defines.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// observe is the middleware of every request: it gives the request its ID
// (assignRequestID), traces it when tracing is on (tracing.go), times it, answers errors (so that the status is known)
// and, at debug level only, logs it. It is the only global middleware:
// echo builds a closure per request for each one.
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
		route := c.Path()
		if !s.metrics.routes[route] {
			route = routeUnmatched
		}
		req := c.Request()
		method := methodLabel(req.Method)
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
// stack) so that the client still gets a problem document. A panic with
// http.ErrAbortHandler is passed on: it asks net/http to drop the
// connection.
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
		err = &apiError{code: codeInternal, detail: "internal error; see the server log", err: fmt.Errorf("panic: %v", r)}
	}()
	return h(c)
}

// stateCollector reports the lease, the database and the namespaces as
// the keeper and the segment allocator see them at scrape time.
type stateCollector struct {
	s       *Server
	retries allocator.RetryCounter // nil if the store does not count its retries
	pool    poolCache

	buildInfo, leaseHeld, ready, leaseAge, leaseValid, fencing, worker, ceiling,
	claims, takeovers, lost, hbFails, offset, dbUp, serialRetries,
	lifetime, poolSize, poolHeld,
	segRunway, segStep, segMaxID, segFetches, segFetchErrors, segLastFetch, segFailing,
	segFallbacks, segFallbackIDs *prometheus.Desc
}

func newStateCollector(s *Server) *stateCollector {
	ns := []string{"namespace"}
	poolLabels := []string{"datacenter", "workers"}
	c := &stateCollector{
		s:              s,
		buildInfo:      prometheus.NewDesc("idgen_build_info", "Always 1; the version label says which idgen runs.", []string{"version"}, nil),
		leaseHeld:      prometheus.NewDesc("idgen_lease_held", "1 while this node holds a worker lease.", nil, nil),
		ready:          prometheus.NewDesc("idgen_ready", "1 while this node can prove its lease and issue Snowflake IDs.", nil, nil),
		leaseAge:       prometheus.NewDesc("idgen_lease_age_seconds", "Time since the lease held was claimed, in database time.", nil, nil),
		leaseValid:     prometheus.NewDesc("idgen_lease_valid_seconds", "Time until the local lease deadline; 0 when passed or no lease is held.", nil, nil),
		fencing:        prometheus.NewDesc("idgen_lease_fencing_version", "Fencing version of the lease held.", nil, nil),
		worker:         prometheus.NewDesc("idgen_lease_worker_id", "Worker ID of the lease held, -1 when none.", nil, nil),
		ceiling:        prometheus.NewDesc("idgen_lease_ceiling_ms", "Highest Snowflake timestamp (Unix ms) the database has committed for this holder.", nil, nil),
		claims:         prometheus.NewDesc("idgen_lease_claims_total", "Leases claimed by this node.", nil, nil),
		takeovers:      prometheus.NewDesc("idgen_lease_takeovers_total", "Leases claimed after another holder's lease expired.", nil, nil),
		lost:           prometheus.NewDesc("idgen_lease_lost_total", "Leases this node found taken over or gone.", nil, nil),
		hbFails:        prometheus.NewDesc("idgen_lease_heartbeat_failures_total", "Heartbeats that failed.", nil, nil),
		offset:         prometheus.NewDesc("idgen_clock_offset_seconds", "Database time minus this node's clock, as last measured.", nil, nil),
		dbUp:           prometheus.NewDesc("idgen_database_up", "1 when the database answered a ping (cached for a second).", nil, nil),
		lifetime:       prometheus.NewDesc("idgen_layout_remaining_seconds", "Time until the last millisecond the Snowflake layout can represent (its epoch + 2^time_bits ms), by the clock IDs are made with; 0 once it has passed: from then on no Snowflake ID can be issued.", nil, nil),
		poolSize:       prometheus.NewDesc("idgen_worker_pool_size", "Worker IDs in this node's pool: the datacenter it claims in and its worker ID range (--datacenter, --worker-ids).", poolLabels, nil),
		poolHeld:       prometheus.NewDesc("idgen_worker_pool_held", "Worker IDs of this node's pool held by a lease that has not expired, this node's included, as the lease table said at most 10 s ago; absent while the table cannot be read.", poolLabels, nil),
		serialRetries:  prometheus.NewDesc("idgen_store_serialization_retries_total", "Transactions the store ran again after a serialization failure or deadlock.", nil, nil),
		segRunway:      prometheus.NewDesc("idgen_segment_runway", "IDs left in this node's buffers for the namespace.", ns, nil),
		segStep:        prometheus.NewDesc("idgen_segment_step", "IDs the next range fetch of the namespace asks for.", ns, nil),
		segMaxID:       prometheus.NewDesc("idgen_segment_max_id", "Highest max_id this node has seen for the namespace.", ns, nil),
		segFetches:     prometheus.NewDesc("idgen_segment_fetches_total", "Range fetches from the database.", ns, nil),
		segFetchErrors: prometheus.NewDesc("idgen_segment_fetch_errors_total", "Range fetches that failed.", ns, nil),
		segLastFetch:   prometheus.NewDesc("idgen_segment_last_fetch_seconds", "Latency of the last range fetch.", ns, nil),
		segFailing:     prometheus.NewDesc("idgen_segment_failing", "1 from a failed fetch until the next successful one.", ns, nil),
		segFallbacks:   prometheus.NewDesc("idgen_segment_fallbacks_total", "Draws served by the Snowflake fallback.", ns, nil),
		segFallbackIDs: prometheus.NewDesc("idgen_segment_fallback_ids_total", "IDs served by the Snowflake fallback.", ns, nil),
	}
	c.retries = s.retries
	return c
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.leaseHeld, c.ready, c.leaseAge, c.leaseValid, c.fencing,
		c.worker, c.ceiling, c.claims, c.takeovers, c.lost, c.hbFails, c.offset, c.dbUp,
		c.lifetime, c.poolSize, c.poolHeld,
		c.segRunway, c.segStep, c.segMaxID, c.segFetches, c.segFetchErrors, c.segLastFetch, c.segFailing,
		c.segFallbacks, c.segFallbackIDs} {
		ch <- d
	}
	if c.retries != nil {
		ch <- c.serialRetries
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.buildInfo, 1, c.s.version)

	st := c.s.lease.Status()
	gauge(c.leaseHeld, bool01(st.Held))
	gauge(c.ready, bool01(st.Ready))
	var age, valid float64
	worker, fencing := -1.0, 0.0
	if st.Held {
		dbNow := time.Now().Add(st.ClockOffset)
		age = max(dbNow.Sub(st.Lease.AcquiredAt).Seconds(), 0)
		valid = max(st.ValidFor.Seconds(), 0)
		worker = float64(st.Lease.WorkerID)
		fencing = float64(st.Lease.FencingVersion)
	}
	gauge(c.leaseAge, age)
	gauge(c.leaseValid, valid)
	gauge(c.fencing, fencing)
	gauge(c.worker, worker)
	gauge(c.ceiling, float64(st.CeilingMS))
	counter(c.claims, float64(st.Claims))
	counter(c.takeovers, float64(st.Takeovers))
	counter(c.lost, float64(st.Lost))
	counter(c.hbFails, float64(st.HeartbeatFails))
	gauge(c.offset, st.ClockOffset.Seconds())
	gauge(c.dbUp, bool01(c.s.ping.check(context.Background()) == nil))
	if c.retries != nil {
		counter(c.serialRetries, float64(c.retries.SerializationRetries()))
	}
	gauge(c.lifetime, layoutRemaining(c.s.layout, c.s.snowflakes.SmallestIDNow()))
	dc, workers := strconv.FormatInt(st.DatacenterID, 10), fmt.Sprintf("%d-%d", st.Pool.Min, st.Pool.Max)
	gauge(c.poolSize, float64(st.Pool.Max-st.Pool.Min+1), dc, workers)
	if held, err := c.pool.held(c.s.admin, st, time.Now().Add(st.ClockOffset)); err == nil {
		gauge(c.poolHeld, float64(held), dc, workers)
	}

	for _, ns := range c.s.segments.Stats() {
		gauge(c.segRunway, float64(ns.Runway), ns.Namespace)
		gauge(c.segStep, float64(ns.Step), ns.Namespace)
		gauge(c.segMaxID, float64(ns.MaxID), ns.Namespace)
		counter(c.segFetches, float64(ns.Fetches), ns.Namespace)
		counter(c.segFetchErrors, float64(ns.FetchErrors), ns.Namespace)
		gauge(c.segLastFetch, ns.LastFetchLatency.Seconds(), ns.Namespace)
		gauge(c.segFailing, bool01(ns.Failing), ns.Namespace)
		counter(c.segFallbacks, float64(ns.Fallbacks), ns.Namespace)
		counter(c.segFallbackIDs, float64(ns.FallbackIDs), ns.Namespace)
	}
}

// counterValue reads a counter for the status page's history: the request
// path adds to the counter anyway, so the history costs it nothing.
func counterValue(c prometheus.Counter) int64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

// layoutRemaining returns the seconds from the millisecond of smallestNow
// (the smallest Snowflake ID of the current millisecond, by the clock IDs
// carry) to the last millisecond layout can represent; 0 once that has
// begun. Seconds as a float64, not a time.Duration: a layout of more than
// 43 time bits lasts longer than the 292 years a Duration holds.
func layoutRemaining(layout snowflake.Layout, smallestNow int64) float64 {
	ts := layout.Decompose(snowflake.ID(smallestNow)).Timestamp
	return float64(max(layout.MaxTimestamp()-ts, 0)) / 1000
}

// Bounds of the lease table read behind idgen_worker_pool_held.
const (
	poolCacheFor = 10 * time.Second
	poolTimeout  = 2 * time.Second
)

// poolCache counts the live leases of a node's pool from the lease table,
// reading it at most once per poolCacheFor however often Prometheus (or
// several of them) scrapes.
type poolCache struct {
	mu   sync.Mutex // held across the read, so that scrapes share one
	at   time.Time  // when the last read ended; zero before the first
	n    int
	err  error
	pool poolKey // the pool n was counted for
}

type poolKey struct {
	dc       int64
	min, max int64
}

// held returns how many worker IDs of st's pool have a holder and a lease
// that expires after dbNow (database time, as the keeper last measured
// it), reading store's lease table when the last count is older than
// poolCacheFor or was made for another pool.
func (p *poolCache) held(store allocator.LeaseAdmin, st allocator.KeeperStatus, dbNow time.Time) (int, error) {
	key := poolKey{st.DatacenterID, st.Pool.Min, st.Pool.Max}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && p.pool == key && time.Since(p.at) < poolCacheFor {
		return p.n, p.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), poolTimeout)
	defer cancel()
	leases, err := store.ListLeases(ctx)
	p.n, p.err, p.pool, p.at = 0, err, key, time.Now()
	for _, l := range leases {
		if l.DatacenterID == key.dc && l.WorkerID >= key.min && l.WorkerID <= key.max &&
			l.Holder != "" && l.ExpiresAt.After(dbNow) {
			p.n++
		}
	}
	return p.n, p.err
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
