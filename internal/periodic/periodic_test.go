package periodic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

func TestLoopRunsUntilStop(t *testing.T) {
	var calls atomic.Int64
	l := Start(0, time.Millisecond, func(context.Context) { calls.Add(1) })
	testkit.WaitFor(t, 10*time.Second, "three calls", func() bool { return calls.Load() >= 3 })
	l.Stop()
	select {
	case <-l.Done():
	default:
		t.Fatal("Stop returned before the goroutine did")
	}
	n := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if got := calls.Load(); got != n {
		t.Errorf("calls after Stop: got %d, want %d", got, n)
	}
	l.Stop() // again: returns at once
}

func TestLoopFirstDelay(t *testing.T) {
	var calls atomic.Int64
	l := Start(time.Hour, time.Millisecond, func(context.Context) { calls.Add(1) })
	time.Sleep(20 * time.Millisecond)
	l.Stop()
	if got := calls.Load(); got != 0 {
		t.Errorf("calls before the first delay: got %d, want 0", got)
	}
}

func TestLoopStopCancelsTheCallUnderWay(t *testing.T) {
	entered := make(chan struct{})
	var cancelled atomic.Bool
	l := Start(0, time.Hour, func(ctx context.Context) {
		close(entered)
		<-ctx.Done()
		cancelled.Store(true)
	})
	<-entered
	l.Stop()
	if !cancelled.Load() {
		t.Error("Stop returned before the call under way saw its ctx cancelled")
	}
}

func TestLoopStopWithin(t *testing.T) {
	block := make(chan struct{})
	entered := make(chan struct{})
	l := Start(0, time.Hour, func(context.Context) {
		close(entered)
		<-block // ignores its ctx
	})
	<-entered
	// A wait already cut short returns ctx's error, not the loop's end.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.StopWithin(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("StopWithin while a call hangs: got %v, want context.Canceled", err)
	}
	close(block)
	<-l.Done()
	if err := l.StopWithin(context.Background()); err != nil {
		t.Errorf("StopWithin after the goroutine returned: got %v, want nil", err)
	}
}
