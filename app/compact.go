package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/internal/probe"
	"github.com/idgen-project/idgen/snowflake"
)

// Settings of the etcd history's compaction and of the space watch.
const (
	// DefaultEtcdCompactRetention is the retention used when
	// Config.EtcdCompactRetention is zero and idgen owns the cluster.
	DefaultEtcdCompactRetention = 5 * time.Minute
	// NoEtcdCompaction, as Config.EtcdCompactRetention, never compacts.
	NoEtcdCompaction time.Duration = -1
	// MinEtcdCompactRetention is the shortest retention accepted.
	MinEtcdCompactRetention = time.Second
	// DefaultSpaceInterval is the default Config.SpaceInterval.
	DefaultSpaceInterval = 10 * time.Second
)

// Bounds of the compaction loop, which samples the revision every tenth of
// the retention, clamped to these.
const (
	compactMinInterval = 100 * time.Millisecond
	compactMaxInterval = 5 * time.Minute
	compactRunTimeout  = 30 * time.Second
)

// historyStore is what compaction needs of the etcd store.
type historyStore interface {
	Revision(ctx context.Context) (int64, error)
	CompactHistory(ctx context.Context, rev int64) error
	HistoryCompacted(ctx context.Context) (bool, error)
	KeysOutsidePrefix(ctx context.Context) (int64, error)
	Prefix() string
}

// planCompaction decides at Open whether this node compacts the etcd
// history and with which retention, warning when nobody does. etcd's own
// auto-compaction is seen only by its effect. Read errors are only logged.
func planCompaction(ctx context.Context, hs historyStore, retention time.Duration, log *slog.Logger) probe.Compaction {
	prefix := hs.Prefix()
	switch {
	case retention > 0:
		log.Info("etcd history: this node compacts revisions older than the retention, for the whole cluster "+
			"(--etcd-compact-retention)", "retention", retention)
		return probe.Compaction{ByNode: true, Retention: retention,
			Text: fmt.Sprintf("by idgen: revisions older than %s (--etcd-compact-retention)", fmtWindow(retention))}
	case retention == 0:
		n, err := hs.KeysOutsidePrefix(ctx)
		if err == nil && n == 0 {
			log.Info("etcd history: idgen owns the cluster (no keys outside its prefix), so this node compacts revisions older than the retention",
				"prefix", prefix, "retention", DefaultEtcdCompactRetention)
			return probe.Compaction{ByNode: true, Retention: DefaultEtcdCompactRetention,
				Text: fmt.Sprintf("by idgen: revisions older than %s (idgen owns the cluster)", fmtWindow(DefaultEtcdCompactRetention))}
		}
		why := fmt.Sprintf("the cluster holds %d keys outside %s", n, prefix)
		if err != nil {
			why = "the keys outside " + prefix + " cannot be counted (" + err.Error() + ")"
		}
		log.Info("etcd history: the cluster is shared, so this node leaves compaction to its operator", "why", why)
	}
	seen, err := hs.HistoryCompacted(ctx)
	if err != nil {
		log.Warn("etcd history: cannot tell whether the cluster is compacted", "err", err)
	}
	if seen {
		return probe.Compaction{Seen: true, Text: "by others (etcd's --auto-compaction-* or an operator): a compaction has run"}
	}
	log.Warn("etcd history: no compaction seen on the cluster; etcd keeps every revision of every write until its backend "+
		"passes --quota-backend-bytes and it refuses every write (the NOSPACE alarm)",
		"fix", "start etcd with --auto-compaction-mode=periodic --auto-compaction-retention=5m, "+
			"or let idgen compact the whole cluster with --etcd-compact-retention 5m (see docs/operations.md)")
	return probe.Compaction{Text: "none seen: set etcd's --auto-compaction-retention or idgen's --etcd-compact-retention"}
}

// compactor compacts the etcd history like etcd's periodic compaction, up to
// the newest revision noted at least the retention ago; nodes need no
// coordination.
type compactor struct {
	store     historyStore
	retention time.Duration
	interval  time.Duration
	clock     snowflake.Clock
	log       *slog.Logger

	samples []revSample // oldest first; owned by the loop's goroutine
	done    int64       // the revision last compacted; owned by the loop's goroutine
	fails   probe.FailureLog

	compactions, failures prometheus.Counter
	compacted             prometheus.Gauge

	loop *periodic.Loop // set by start
}

type revSample struct {
	at  time.Time
	rev int64
}

func newCompactor(store historyStore, retention time.Duration, clock snowflake.Clock, log *slog.Logger) *compactor {
	return &compactor{
		store:     store,
		retention: retention,
		interval:  min(max(retention/10, compactMinInterval), compactMaxInterval),
		clock:     clock,
		log:       log,
		compactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_etcd_compactions_total",
			Help: "Compactions of the etcd history this node made (--etcd-compact-retention).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_etcd_compaction_errors_total",
			Help: "Compactions of the etcd history that failed (the next one tries again).",
		}),
		compacted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idgen_etcd_compacted_revision",
			Help: "The revision up to which this node last compacted the etcd history.",
		}),
	}
}

func (c *compactor) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.compactions, c.failures, c.compacted}
}

// start starts the loop; stop stops it and waits.
func (c *compactor) start() { c.loop = periodic.Start(0, c.interval, c.run) }

func (c *compactor) stop() {
	if c.loop != nil {
		c.loop.Stop()
	}
}

// run notes the revision and compacts what is older than the retention.
func (c *compactor) run(loopCtx context.Context) {
	ctx, cancel := context.WithTimeout(loopCtx, compactRunTimeout)
	defer cancel()
	now := c.clock.Now()
	rev, err := c.store.Revision(ctx)
	if err == nil {
		c.samples = append(c.samples, revSample{now, rev})
		err = c.compact(ctx, now)
	}
	if loopCtx.Err() != nil {
		return // stopped: Close is under way
	}
	if err != nil {
		c.failures.Inc()
	}
	c.fails.Note(c.log, "compacting the etcd history", err)
}

// compact compacts up to the newest sample at least the retention old.
func (c *compactor) compact(ctx context.Context, now time.Time) error {
	i := -1
	for j, s := range c.samples {
		if now.Sub(s.at) >= c.retention {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	target := c.samples[i]
	c.samples = c.samples[i+1:]
	if target.rev <= c.done {
		return nil
	}
	if err := c.store.CompactHistory(ctx, target.rev); err != nil {
		return err
	}
	c.done = target.rev
	c.compactions.Inc()
	c.compacted.Set(float64(target.rev))
	c.log.Debug("etcd history compacted", "revision", target.rev, "noted", target.at.UTC())
	return nil
}
