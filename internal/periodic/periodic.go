// Package periodic runs the node's background loops: the status page's
// history sampler, the tokens file reloader, the lease events pruner and
// the test clock's file watcher. Each is a Loop, started by its owner,
// which stops it and waits for it when the node stops: no loop outlives
// the part of idgen that started it.
package periodic

import (
	"context"
	"time"
)

// Loop is one goroutine that calls a function, first after a delay, then
// again an interval after each call has returned, until Stop.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// Start starts a Loop that calls run after first (at once when first is
// 0), then interval after each call returns: calls never overlap, and a
// slow call puts the next one off rather than having it follow at once.
// The ctx run gets is cancelled by Stop, so a call under way can give up.
func Start(first, interval time.Duration, run func(ctx context.Context)) *Loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Loop{cancel: cancel, done: make(chan struct{})}
	go l.loop(ctx, first, interval, run)
	return l
}

func (l *Loop) loop(ctx context.Context, first, interval time.Duration, run func(context.Context)) {
	defer close(l.done)
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			run(ctx)
			t.Reset(interval)
		}
	}
}

// Stop stops the loop, cancelling the ctx of a call under way, and waits
// for its goroutine to return. Calling it again returns at once.
func (l *Loop) Stop() {
	l.cancel()
	<-l.done
}

// StopWithin is Stop with the wait bounded by ctx: it returns ctx's error
// when the goroutine has not returned by then (it returns later, once the
// call under way does).
func (l *Loop) StopWithin(ctx context.Context) error {
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done returns a channel that is closed when the loop's goroutine has
// returned.
func (l *Loop) Done() <-chan struct{} { return l.done }
