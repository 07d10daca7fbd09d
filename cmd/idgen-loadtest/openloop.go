package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// A schedule is an open loop's plan: request i is due at start + i×period,
// whatever happens to the requests before it.
type schedule struct {
	start  time.Time
	period float64 // nanoseconds
}

func newSchedule(start time.Time, rate float64) schedule {
	return schedule{start: start, period: float64(time.Second) / rate}
}

// due returns the time request i is due (at most about 292 years ahead).
func (s schedule) due(i int64) time.Time {
	d := float64(i) * s.period
	if d >= math.MaxInt64 {
		return s.start.Add(math.MaxInt64)
	}
	return s.start.Add(time.Duration(d))
}

// dueBy returns how many requests are due at t: those due at or before it.
func (s schedule) dueBy(t time.Time) int64 {
	d := t.Sub(s.start)
	if d < 0 {
		return 0
	}
	return int64(float64(d)/s.period) + 1
}

// maxPacerSleep bounds one sleep of the pacer, so that it notices the end
// of the run soon at low rates.
const maxPacerSleep = 50 * time.Millisecond

// A pacer hands out the requests of a schedule, by number, to the
// connections of an open loop.
type pacer struct {
	sched schedule
	clock snowflake.Clock
	n     int64 // requests 0 to n-1
	// out is unbuffered: a request is handed out when a connection takes
	// it, and handed counts them.
	out    chan int64
	handed atomic.Int64
}

func newPacer(sched schedule, clock snowflake.Clock, n int64) *pacer {
	return &pacer{sched: sched, clock: clock, n: n, out: make(chan int64)}
}

// run hands out the requests in order, each once it is due and never
// before, then closes out. When no connection is free a request waits, and
// those behind it too, but their due times stay what the schedule says, so
// the wait counts in their latency: the load does not slow down to the
// server's pace, and a stalled server cannot hide its queue (no
// coordinated omission). A request found overdue goes out at once. run
// returns early when ctx ends.
func (p *pacer) run(ctx context.Context) {
	defer close(p.out)
	for i := range p.n {
		due := p.sched.due(i)
		for {
			wait := due.Sub(p.clock.Now())
			if wait <= 0 {
				break
			}
			if ctx.Err() != nil {
				return
			}
			p.clock.Sleep(min(wait, maxPacerSleep))
		}
		select {
		case p.out <- i:
			p.handed.Add(1)
		case <-ctx.Done():
			return
		}
	}
}

// runOpen drives the target in an open loop: requests are due at cfg.Rate
// per second on a fixed schedule, each goes out on whichever connection is
// free, and its latency counts from the time it was due (coordinated
// omission corrected, as wrk2 and HdrHistogram measure it). Requests due
// during the warm-up are sent but not measured. The schedule holds
// cfg.Requests measured requests, or as many as fall due in cfg.Duration,
// whichever is fewer. When it has run out, the requests still waiting for
// a connection are sent and measured too, for at most cfg.Timeout; any
// left then, or when ctx ends, are counted as unsent.
func (lr *loadRun) runOpen(ctx context.Context, tgt target, newCaller func() caller) (*result, error) {
	cfg := lr.cfg
	clock := cfg.clock
	lr.openLoop = true
	period := float64(time.Second) / cfg.Rate
	warm := int64(math.Ceil(float64(cfg.Warmup) / period))
	measured := int64(math.MaxInt64)
	if cfg.Requests > 0 {
		measured = cfg.Requests
	}
	if cfg.Duration > 0 {
		measured = min(measured, max(1, int64(math.Ceil(float64(cfg.Duration)/period))))
	}
	lr.scheduled = measured
	total := warm + measured

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sched := newSchedule(clock.Now(), cfg.Rate)
	p := newPacer(sched, clock, total)
	lr.backlog = func(now time.Time) string {
		return fmt.Sprintf("  backlog %d", max(0, min(sched.dueBy(now), total)-p.handed.Load()))
	}
	lr.beginMeasuring(sched.start)

	var wg sync.WaitGroup
	wg.Go(func() { p.run(runCtx) })
	for _, st := range lr.stats {
		c := newCaller()
		wg.Go(func() {
			defer c.close()
			var ids runSet
			for i := range p.out {
				due := sched.due(i)
				sent := clock.Now()
				// A request handed out is finished even when the run ends
				// meanwhile: only ctx cuts it short.
				out := c.call(ctx, &ids)
				done := clock.Now()
				if out.noAnswer && ctx.Err() != nil {
					break // interrupted while dialing
				}
				if i >= warm {
					st.record(done.Sub(due), out)
					st.lag.record(sent.Sub(due))
					st.service.record(done.Sub(sent))
				}
				if out.noAnswer {
					pause(runCtx)
				}
				lr.collect(&ids)
			}
			lr.uniq.merge(&ids)
		})
	}
	// finished closes when the pacer and every connection are done; the
	// goroutine that closes it ends with them.
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()

	if warm > 0 {
		measureStart := sched.due(warm)
		t := time.NewTimer(time.Until(measureStart))
		select {
		case <-finished:
		case <-t.C:
			lr.beginMeasuring(measureStart)
		}
		t.Stop()
	}
	drain := time.NewTimer(min(time.Until(sched.due(total-1)), math.MaxInt64-cfg.Timeout) + cfg.Timeout)
	defer drain.Stop()
	lr.progressLoop(finished, drain.C)
	cancel()
	<-finished
	return lr.result(tgt, clock.Now().Sub(lr.start))
}
