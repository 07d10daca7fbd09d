// Package metrics is the node's Prometheus metrics of its lease and pool,
// database, namespaces, IDs issued, rate limit and runtime, all read at
// scrape time (the transports keep their request metrics).
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/probe"
	"github.com/idgen-project/idgen/snowflake"
)

// Lease is what the metrics read of the lease keeper.
type Lease interface {
	Status() allocator.KeeperStatus
	SmallestIDNow() int64
}

// Segments is what the metrics read of the segment allocator.
type Segments interface {
	Stats() []allocator.SegmentStats
}

// LeaseLister reads the lease table (idgen_worker_pool_held).
type LeaseLister interface {
	ListLeases(ctx context.Context) ([]allocator.Lease, error)
}

// Config says what the metrics read. Every field but Retries is required.
type Config struct {
	Service  *idgen.Service // IDs issued, the rate limit, the layout
	Lease    Lease          // the node's *allocator.Keeper
	Segments Segments       // the node's *allocator.Segments
	Leases   LeaseLister    // the store
	// Database is idgen_database_up's ping (the node's shared probe.Ping).
	Database probe.Pinger
	// Retries feeds idgen_store_serialization_retries_total; nil omits it.
	Retries allocator.RetryCounter
	// Space feeds idgen_database_size_bytes and kin (etcd); nil omits it.
	Space   SpaceReporter
	Version string // idgen_build_info's label; "" is "dev"
}

// Collectors returns the node's collectors, for the registry /metrics serves.
func Collectors(cfg Config) []prometheus.Collector {
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	svc := cfg.Service
	cs := []prometheus.Collector{
		newState(cfg),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if cfg.Space != nil {
		cs = append(cs, newSpaceCollector(cfg.Space))
	}
	for _, src := range []idgen.Source{idgen.SourceSnowflake, idgen.SourceSegment, idgen.SourceFallback} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "idgen_ids_issued_total",
			Help:        "IDs handed out, over every transport, by source: snowflake, segment (a namespace's counter) or fallback (Snowflake IDs served for a namespace while its database failed).",
			ConstLabels: prometheus.Labels{"source": src.String()},
		}, func() float64 { return float64(svc.Issued(src)) }))
	}
	// Without a limit the nil limiter counts 0, for dashboards.
	l := svc.Limiter()
	const name, help = "idgen_http_rate_limited_total", "Calls refused for going over the per-caller rate limit, over every transport, by kind of caller: token (a caller of the tokens file) or address (a client address, on a node without tokens)."
	for _, kind := range []string{"token", "address"} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"caller_kind": kind}},
			func() float64 {
				t, a := l.Refused()
				if kind == "token" {
					return float64(t)
				}
				return float64(a)
			}))
	}
	return append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idgen_http_rate_limit_buckets",
		Help: "Callers that have a rate-limit bucket on this node (tokens and client addresses; full buckets are dropped when the table grows); 0 without a limit.",
	}, func() float64 { return float64(l.Size()) }))
}

// Handler serves g's metrics, skipping a failing collector.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// state reports the lease, pool, database and namespaces at scrape time.
type state struct {
	cfg    Config
	layout snowflake.Layout
	pool   poolCache
	descs  []*prometheus.Desc

	buildInfo, leaseHeld, ready, leaseAge, leaseValid, fencing, worker, ceiling,
	claims, takeovers, lost, hbFails, offset, dbUp, serialRetries,
	lifetime, poolSize, poolHeld,
	segRunway, segStep, segMaxID, segFetches, segFetchErrors, segLastFetch, segFailing,
	segFallbacks, segFallbackIDs *prometheus.Desc
}

func newState(cfg Config) *state {
	c := &state{cfg: cfg, layout: cfg.Service.Layout()}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc(name, help, labels, nil)
		c.descs = append(c.descs, desc)
		return desc
	}
	ns, pool := "namespace", []string{"datacenter", "workers"}
	c.buildInfo = d("idgen_build_info", "Always 1; the version label says which idgen runs.", "version")
	c.leaseHeld = d("idgen_lease_held", "1 while this node holds a worker lease.")
	c.ready = d("idgen_ready", "1 while this node can prove its lease and issue Snowflake IDs.")
	c.leaseAge = d("idgen_lease_age_seconds", "Time since the lease held was claimed, in database time.")
	c.leaseValid = d("idgen_lease_valid_seconds", "Time until the local lease deadline; 0 when passed or no lease is held.")
	c.fencing = d("idgen_lease_fencing_version", "Fencing version of the lease held.")
	c.worker = d("idgen_lease_worker_id", "Worker ID of the lease held, -1 when none.")
	c.ceiling = d("idgen_lease_ceiling_ms", "Highest Snowflake timestamp (Unix ms) the database has committed for this holder.")
	c.claims = d("idgen_lease_claims_total", "Leases claimed by this node.")
	c.takeovers = d("idgen_lease_takeovers_total", "Leases claimed after another holder's lease expired.")
	c.lost = d("idgen_lease_lost_total", "Leases this node found taken over or gone.")
	c.hbFails = d("idgen_lease_heartbeat_failures_total", "Heartbeats that failed.")
	c.offset = d("idgen_clock_offset_seconds", "Database time minus this node's clock, as last measured.")
	c.dbUp = d("idgen_database_up", "1 when the database answered a ping (cached for a second).")
	c.lifetime = d("idgen_layout_remaining_seconds", "Time until the last millisecond the Snowflake layout can represent (its epoch + 2^time_bits ms), by the clock IDs are made with; 0 once it has passed: from then on no Snowflake ID can be issued.")
	c.poolSize = d("idgen_worker_pool_size", "Worker IDs in this node's pool: the datacenter it claims in and its worker ID range (--datacenter, --worker-ids).", pool...)
	c.poolHeld = d("idgen_worker_pool_held", "Worker IDs of this node's pool held by a lease that has not expired, this node's included, as the lease table said at most 10 s ago; absent while the table cannot be read.", pool...)
	if cfg.Retries != nil {
		c.serialRetries = d("idgen_store_serialization_retries_total", "Transactions the store ran again after a serialization failure or deadlock.")
	}
	c.segRunway = d("idgen_segment_runway", "IDs left in this node's buffers for the namespace.", ns)
	c.segStep = d("idgen_segment_step", "IDs the next range fetch of the namespace asks for.", ns)
	c.segMaxID = d("idgen_segment_max_id", "Highest max_id this node has seen for the namespace.", ns)
	c.segFetches = d("idgen_segment_fetches_total", "Range fetches from the database.", ns)
	c.segFetchErrors = d("idgen_segment_fetch_errors_total", "Range fetches that failed.", ns)
	c.segLastFetch = d("idgen_segment_last_fetch_seconds", "Latency of the last range fetch.", ns)
	c.segFailing = d("idgen_segment_failing", "1 from a failed fetch until the next successful one.", ns)
	c.segFallbacks = d("idgen_segment_fallbacks_total", "Draws served by the Snowflake fallback.", ns)
	c.segFallbackIDs = d("idgen_segment_fallback_ids_total", "IDs served by the Snowflake fallback.", ns)
	return c
}

func (c *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *state) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.buildInfo, 1, c.cfg.Version)

	st := c.cfg.Lease.Status()
	dbNow := time.Now().Add(st.ClockOffset)
	gauge(c.leaseHeld, bool01(st.Held))
	gauge(c.ready, bool01(st.Ready))
	var age, valid float64
	worker, fencing := -1.0, 0.0
	if st.Held {
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
	gauge(c.dbUp, bool01(c.cfg.Database.Ping(context.Background()) == nil))
	if c.cfg.Retries != nil {
		counter(c.serialRetries, float64(c.cfg.Retries.SerializationRetries()))
	}
	gauge(c.lifetime, layoutRemaining(c.layout, c.cfg.Lease.SmallestIDNow()))
	dc, workers := strconv.FormatInt(st.DatacenterID, 10), fmt.Sprintf("%d-%d", st.Pool.Min, st.Pool.Max)
	gauge(c.poolSize, float64(st.Pool.Max-st.Pool.Min+1), dc, workers)
	if held, err := c.pool.held(c.cfg.Leases, st, dbNow); err == nil {
		gauge(c.poolHeld, float64(held), dc, workers)
	}

	for _, ns := range c.cfg.Segments.Stats() {
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

// layoutRemaining returns the seconds until layout's last millisecond (0
// once begun); float64, as it may outlast a time.Duration.
func layoutRemaining(layout snowflake.Layout, smallestNow int64) float64 {
	ts := layout.Decompose(snowflake.ID(smallestNow)).Timestamp
	return float64(max(layout.MaxTimestamp()-ts, 0)) / 1000
}

// Bounds of the lease table read behind idgen_worker_pool_held.
const (
	poolCacheFor = 10 * time.Second
	poolTimeout  = 2 * time.Second
)

// poolCache counts the pool's live leases, at most once per poolCacheFor.
type poolCache struct {
	mu   sync.Mutex // held across the read, so that scrapes share one
	at   time.Time  // when the last read ended; zero before the first
	n    int
	err  error
	pool poolKey // the pool n was counted for
}

type poolKey struct{ dc, min, max int64 }

// held returns how many worker IDs of st's pool are held past dbNow.
func (p *poolCache) held(store LeaseLister, st allocator.KeeperStatus, dbNow time.Time) (int, error) {
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
