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
	// DefaultDrainWindow is how long Drain keeps a node serving after it
	// turned not ready, when Config.DrainWindow is zero: enough for a
	// balancer or a Kubernetes endpoint list that checks readiness once a
	// second to see it a few times over and take the node out, with time
	// left for the change to reach every proxy.
	DefaultDrainWindow = 5 * time.Second
	// NoDrainWindow, as Config.DrainWindow, makes Drain return at once
	// (--drain-window 0): the node turns not ready and stops.
	NoDrainWindow time.Duration = -1
)

// ErrDraining is what /readyz and gRPC health say of a node that is
// shutting down (Drain was called): it still serves what it is sent, for
// a while, but a balancer should send its requests elsewhere.
var ErrDraining = errors.New("the node is shutting down: send requests to another node")

// readiness is the node's readiness as /readyz and gRPC health report it:
// the keeper's (a lease the node can prove), until Drain turns it off for
// good. The transports take it in place of the keeper; drawing IDs goes
// to the keeper itself, so that a draining node keeps serving.
type readiness struct {
	*allocator.Keeper
	draining atomic.Bool
}

// Ready returns ErrDraining once the node drains, else the keeper's
// answer.
func (r *readiness) Ready() error {
	if r.draining.Load() {
		return ErrDraining
	}
	return r.Keeper.Ready()
}

// Draining reports whether Drain was called.
func (a *App) Draining() bool { return a.ready.draining.Load() }

// Drain is the first step of a graceful shutdown, before Close: the node
// turns not ready at once (/readyz answers 503 with ErrDraining's reason,
// gRPC health NOT_SERVING) and stops keeping connections alive (each
// answer closes its connection, so that callers behind a connection
// balancer open new ones, which go to other nodes), but keeps serving
// every request it gets for Config.DrainWindow. A balancer or a
// Kubernetes endpoint list that checks readiness takes the node out in
// that window, so that by the time Close stops accepting connections no
// request is sent to it any more. Drain returns at the end of the window,
// or early, with ctx's error, when ctx ends first (idgen serve ends it at
// a second SIGTERM or SIGINT). Calling it again, or after Close, turns
// nothing back: a node that drained never becomes ready again.
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
