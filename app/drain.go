package app

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/backoff"
)

// Defaults of the drain window.
const (
	// DefaultDrainWindow is the default Config.DrainWindow: long enough
	// for balancers polling readiness each second to take the node out.
	DefaultDrainWindow = 5 * time.Second
	// NoDrainWindow, as Config.DrainWindow, makes Drain return at once.
	NoDrainWindow time.Duration = -1
)

// ErrDraining is what /readyz and gRPC health say of a draining node.
var ErrDraining = errors.New("the node is shutting down: send requests to another node")

// readiness is the keeper's readiness until Drain turns it off for good.
// Only the probes use it; IDs are still drawn from the keeper itself.
type readiness struct {
	*allocator.Keeper
	draining atomic.Bool
}

// Ready returns ErrDraining once draining, else the keeper's answer.
func (r *readiness) Ready() error {
	if r.draining.Load() {
		return ErrDraining
	}
	return r.Keeper.Ready()
}

// Draining reports whether Drain was called.
func (a *App) Draining() bool { return a.ready.draining.Load() }

// Drain starts a graceful shutdown: the node turns not ready for good and
// drops keep-alives, but serves every request for Config.DrainWindow. It
// returns at the window's end, or with ctx's error if ctx ends first.
func (a *App) Drain(ctx context.Context) error {
	if !a.ready.draining.Swap(true) {
		a.log.Info("draining: not ready from now on, still serving", "drain_window", max(a.cfg.DrainWindow, 0))
		a.srv.SetKeepAlivesEnabled(false)
	}
	if a.cfg.DrainWindow <= 0 {
		return ctx.Err()
	}
	if err := backoff.Sleep(ctx, a.cfg.DrainWindow); err != nil {
		a.log.Info("drain window cut short", "err", err)
		return err
	}
	a.log.Info("drain window over")
	return nil
}
