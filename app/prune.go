package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults of the lease events' retention.
const (
	// DefaultLeaseEventsRetention is the default Config.LeaseEventsRetention.
	DefaultLeaseEventsRetention = 30 * 24 * time.Hour
	// KeepLeaseEvents, as Config.LeaseEventsRetention, keeps events forever.
	KeepLeaseEvents time.Duration = -1
	// DefaultLeaseEventsPruneInterval is the default prune interval.
	DefaultLeaseEventsPruneInterval = time.Hour
)

// pruneFirstDelay bounds the wait before the first prune after Open.
const pruneFirstDelay = 30 * time.Second

// pruneRunTimeout bounds one prune; the store deletes in batches, so a run
// cut short keeps its progress.
const pruneRunTimeout = time.Minute

// eventsPruner deletes lease events older than the retention in the
// background. Pruning is idempotent, so nodes need no coordination.
type eventsPruner struct {
	store     allocator.LeaseAdmin
	retention time.Duration
	interval  time.Duration
	clock     snowflake.Clock
	log       *slog.Logger

	pruned, failures prometheus.Counter

	loop *periodic.Loop // set by start
}

func newEventsPruner(store allocator.LeaseAdmin, retention, interval time.Duration, clock snowflake.Clock, log *slog.Logger) *eventsPruner {
	return &eventsPruner{
		store:     store,
		retention: retention,
		interval:  interval,
		clock:     clock,
		log:       log,
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_lease_events_pruned_total",
			Help: "Lease events this node deleted because they were older than --lease-events-retention.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_lease_events_prune_errors_total",
			Help: "Prunes of the lease events that failed (the next one tries again).",
		}),
	}
}

func (p *eventsPruner) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.pruned, p.failures}
}

// start starts the loop; stop stops it and waits, cancelling a prune.
func (p *eventsPruner) start() {
	// Runs never overlap: the next one is timed from the end of this one.
	p.loop = periodic.Start(min(p.interval, pruneFirstDelay), p.interval, p.prune)
}

func (p *eventsPruner) stop() {
	if p.loop != nil {
		p.loop.Stop()
	}
}

// prune deletes the events older than the retention, once.
func (p *eventsPruner) prune(loopCtx context.Context) {
	ctx, cancel := context.WithTimeout(loopCtx, pruneRunTimeout)
	defer cancel()
	before := p.clock.Now().Add(-p.retention)
	n, err := p.store.PruneLeaseEvents(ctx, before)
	p.pruned.Add(float64(n))
	if err != nil {
		if loopCtx.Err() != nil {
			return // stopped: Close is under way
		}
		if ctx.Err() != nil && n > 0 {
			// Cut short by the bound: the rest goes at the next run.
			p.log.Info("lease events pruned in part", "pruned", n, "before", before.UTC(), "err", err)
			return
		}
		p.failures.Inc()
		p.log.Warn("pruning lease events failed", "pruned", n, "before", before.UTC(), "err", err)
		return
	}
	p.log.Info("lease events pruned", "pruned", n, "before", before.UTC(), "retention", p.retention)
}
