package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/httpapi/statuspage"
	"github.com/idgen-project/idgen/internal/periodic"
)

// DefaultSequenceExpiryInterval is the default Config.SequenceExpiryInterval.
const DefaultSequenceExpiryInterval = 5 * time.Second

// sweepRunTimeout bounds one sweep of the sequences.
const sweepRunTimeout = time.Minute

// sequenceKeeper is a store that keeps sequences.
type sequenceKeeper interface {
	Sequences() sequence.Store
}

// sequencesOf returns the node's sequence service on store (reporting to
// rec if set) and the sequence API's core over it; nil, nil without
// sequences.
func sequencesOf(store any, svc *idgen.Service, rec *audit.Recorder) (*sequence.Service, *idgen.Sequences) {
	sk, ok := store.(sequenceKeeper)
	if !ok {
		return nil, nil
	}
	var seqs sequence.Store = sk.Sequences()
	if rec != nil {
		seqs = audit.WrapSequences(seqs, rec)
	}
	ss := sequence.NewService(seqs, sequence.Settings{})
	return ss, idgen.NewSequences(ss, svc)
}

// sequenceSweeper expires due reservations in the background, so the
// ledger shows them without anyone reading it; idempotent, on store time.
type sequenceSweeper struct {
	svc      *sequence.Service
	interval time.Duration
	log      *slog.Logger

	expired, failures prometheus.Counter

	loop *periodic.Loop // set by start
}

func newSequenceSweeper(svc *sequence.Service, interval time.Duration, log *slog.Logger) *sequenceSweeper {
	return &sequenceSweeper{
		svc:      svc,
		interval: interval,
		log:      log,
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_sequence_expired_total",
			Help: "Numbers of sequences this node's sweep marked expired: reserved, and neither confirmed nor voided before their expiry.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_sequence_sweep_errors_total",
			Help: "Sweeps of the sequences' expired reservations that failed, in part or whole (the next one tries again).",
		}),
	}
}

func (w *sequenceSweeper) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.expired, w.failures}
}

// start starts the loop; stop stops it and waits, cancelling a sweep.
func (w *sequenceSweeper) start() {
	w.loop = periodic.Start(w.interval, w.interval, w.sweep)
}

func (w *sequenceSweeper) stop() {
	if w.loop != nil {
		w.loop.Stop()
	}
}

// sweep expires the due reservations once; errors are logged and counted.
func (w *sequenceSweeper) sweep(loopCtx context.Context) {
	ctx, cancel := context.WithTimeout(loopCtx, sweepRunTimeout)
	defer cancel()
	n, err := w.svc.ExpireDue(ctx)
	w.expired.Add(float64(n))
	if err != nil {
		if loopCtx.Err() != nil {
			return // stopped: Close is under way
		}
		w.failures.Inc()
		w.log.Warn("expiring sequence reservations failed", "expired", n, "err", err)
		return
	}
	if n > 0 {
		w.log.Info("sequence reservations expired", "numbers", n)
	}
}

// sequenceReader returns store's sequences for the status page, or nil.
func sequenceReader(store any) statuspage.SequenceReader {
	sk, ok := store.(sequenceKeeper)
	if !ok {
		return nil
	}
	return sk.Sequences()
}
