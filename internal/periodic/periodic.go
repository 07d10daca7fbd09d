// Package periodic runs the node's background loops (samplers, reloaders,
// pruners), each a Loop its owner starts, stops and waits for.
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

// Start starts a Loop calling run after first, then interval after each
// call returns (never overlapping). Stop cancels run's ctx.
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

// Stop stops the loop and waits for it; again returns at once.
func (l *Loop) Stop() {
	l.cancel()
	<-l.done
}

// StopWithin is Stop with the wait bounded by ctx, returning its error.
func (l *Loop) StopWithin(ctx context.Context) error {
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the loop's goroutine has returned.
func (l *Loop) Done() <-chan struct{} { return l.done }
