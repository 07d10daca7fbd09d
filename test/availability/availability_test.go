// Package availability measures what a caller of three idgen nodes sees
// while one node dies or all restart one after the other: requests sent,
// requests that failed as the caller saw them, the 99th percentile of
// latency, and duplicates over every ID received. The caller is the Go
// client with the three nodes' URLs (client.NewFailover), at a fixed rate;
// the nodes are `idgen serve` processes on one SQLite file. See
// docs/reliability.md for the figures.
package availability

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/client"
	"github.com/idgen-project/idgen/internal/testkit"
)

// The caller: one request for idsPerRequest IDs every interval, each in
// a goroutine of its own (an open loop: a slow answer does not slow the
// rate), at most maxInFlight at once, for at most maxRequests.
const (
	interval      = 5 * time.Millisecond // 200 requests/s
	idsPerRequest = 10
	maxInFlight   = 256
	maxRequests   = 60_000
	// The nodes' drain window: long enough to be seen, short enough to
	// keep the rolling restart brief. The caller does not check
	// readiness: what it sees comes from the shutdown after the window.
	drainWindow = "1s"
	// Bounds on a node's start and stop: never measured, only a hang
	// caught.
	startBound = 60 * time.Second
	stopBound  = 60 * time.Second
	// How long the caller runs between the steps of a scenario.
	settle = 2 * time.Second
)

// node is one idgen serve on a fixed loopback address, restarted on the
// same address.
type node struct {
	name, addr string
	bin, dsn   string
	log        string
	proc       *testkit.Proc
}

func (n *node) url() string { return "http://" + n.addr }

func (n *node) start(t *testing.T) {
	t.Helper()
	n.proc = testkit.Start(t, testkit.Spec{
		Name: n.name, Bin: n.bin, Log: n.log, Env: testkit.Env(), Mark: "--- start",
		Args: []string{"serve", "--listen", n.addr, "--dsn", n.dsn, "--holder", n.name, "--migrate=false",
			"--lease-ttl", "3s", "--heartbeat", "1s", "--drain-window", drainWindow},
	})
}

// waitReady waits until /readyz answers 200.
func (n *node) waitReady(t *testing.T) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	testkit.WaitFor(t, startBound, n.name+" ready", func() bool {
		if n.proc.Exited() {
			t.Fatalf("%s exited:\n%s", n.name, n.proc.Tail(30))
		}
		resp, err := hc.Get(n.url() + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// freeAddr returns a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// sample is one request of the caller.
type sample struct {
	sent    time.Time
	latency time.Duration
	ids     []int64
	err     error
}

// caller sends requests at a fixed rate until stopped or out of budget.
type caller struct {
	c     *client.Client
	stopC chan struct{}
	doneC chan struct{}
	wg    sync.WaitGroup // the requests in flight
	mu    sync.Mutex
	got   []sample // guarded by mu
	// skipped counts the ticks with maxInFlight requests already in flight.
	skipped int
}

func startCaller(c *client.Client) *caller {
	cl := &caller{c: c, stopC: make(chan struct{}), doneC: make(chan struct{})}
	go cl.run()
	return cl
}

func (cl *caller) run() {
	defer close(cl.doneC)
	sem := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range maxRequests {
		select {
		case <-cl.stopC:
			cl.wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			cl.mu.Lock()
			cl.skipped++
			cl.mu.Unlock()
			continue
		}
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			ids, err := cl.c.NextN(ctx, idsPerRequest)
			s := sample{sent: start, latency: time.Since(start), ids: ids, err: err}
			cl.mu.Lock()
			cl.got = append(cl.got, s)
			cl.mu.Unlock()
		}()
	}
	cl.wg.Wait()
}

// stop ends the caller and waits for its requests in flight.
func (cl *caller) stop() {
	close(cl.stopC)
	<-cl.doneC
}

// between returns the samples of the requests sent in [from, to).
func (cl *caller) between(from, to time.Time) []sample {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []sample
	for _, s := range cl.got {
		if !s.sent.Before(from) && s.sent.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// figures are what a caller saw over a stretch of time.
type figures struct {
	took         time.Duration
	sent, failed int
	firstErr     error
	p50, p99     time.Duration
	max          time.Duration
}

func measure(samples []sample, from, to time.Time) figures {
	f := figures{sent: len(samples), took: to.Sub(from)}
	lat := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		if s.err != nil {
			f.failed++
			if f.firstErr == nil {
				f.firstErr = s.err
			}
		}
		lat = append(lat, s.latency)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		f.p50, f.p99, f.max = lat[len(lat)*50/100], lat[min(len(lat)*99/100, len(lat)-1)], lat[len(lat)-1]
	}
	return f
}

func (f figures) String() string {
	s := fmt.Sprintf("%v: %d requests sent (%.0f/s), %d failed, latency p50 %v p99 %v max %v", f.took.Round(100*time.Millisecond), f.sent, float64(f.sent)/f.took.Seconds(), f.failed,
		f.p50.Round(10*time.Microsecond), f.p99.Round(10*time.Microsecond), f.max.Round(10*time.Microsecond))
	if f.firstErr != nil {
		s += fmt.Sprintf(" (first failure: %v)", f.firstErr)
	}
	return s
}

// TestCallerSeesNoFailure runs three nodes and one caller at a fixed rate
// through two scenarios: a kill -9 of one node and its restart, then a
// rolling restart of all three (SIGTERM, wait until the node exited and
// its successor is ready, next). It asserts no duplicate over every ID
// the caller received and no failed request in the rolling restart; the
// kill's failures and every latency are reported, not asserted, since
// they depend on the machine's load.
func TestCallerSeesNoFailure(t *testing.T) {
	dir := t.TempDir()
	bin := testkit.MustBuild(t, dir, "./cmd/idgen")
	dsn := "sqlite:" + filepath.Join(dir, "idgen.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, bin, "migrate", "up", "--dsn", dsn)
	cmd.Env = testkit.Env()
	out, err := cmd.CombinedOutput()
	cancel()
	if err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}

	nodes := make([]*node, 3)
	urls := make([]string, 3)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i+1)
		nodes[i] = &node{name: name, addr: freeAddr(t), bin: bin, dsn: dsn, log: filepath.Join(dir, name+".log")}
		urls[i] = nodes[i].url()
		nodes[i].start(t)
	}
	for _, n := range nodes {
		n.waitReady(t)
	}
	c, err := client.NewFailover(urls, client.Options{AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	started := time.Now()
	cl := startCaller(c)
	stopped := false
	defer func() {
		if !stopped {
			cl.stop()
		}
	}()
	time.Sleep(settle)

	// kill -9 of the node the caller sends to, then its restart.
	killFrom := time.Now()
	victim := nodes[slices.Index(urls, c.BaseURL())]
	victim.proc.Kill9(t)
	time.Sleep(settle)
	victim.start(t)
	victim.waitReady(t)
	time.Sleep(settle)
	killTo := time.Now()

	// The rolling restart, in the order the caller moves along them.
	rollFrom := time.Now()
	for range nodes {
		n := nodes[slices.Index(urls, c.BaseURL())]
		if code := n.proc.Stop(stopBound); code != 0 {
			t.Fatalf("%s: exit code %d after SIGTERM, want 0:\n%s", n.name, code, n.proc.Tail(30))
		}
		n.start(t)
		n.waitReady(t)
		time.Sleep(settle / 2)
	}
	time.Sleep(settle)
	rollTo := time.Now()

	cl.stop()
	stopped = true

	kill, roll := measure(cl.between(killFrom, killTo), killFrom, killTo), measure(cl.between(rollFrom, rollTo), rollFrom, rollTo)
	all := measure(cl.between(time.Time{}, time.Now().Add(time.Hour)), started, time.Now())
	seen := map[int64]bool{}
	received, dups := 0, 0
	for _, s := range cl.between(time.Time{}, time.Now().Add(time.Hour)) {
		for _, id := range s.ids {
			received++
			if seen[id] {
				dups++
			}
			seen[id] = true
		}
	}
	t.Logf("caller: one request of %d IDs every %v, over 3 nodes (client.NewFailover), %d ticks skipped (%d in flight)",
		idsPerRequest, interval, cl.skipped, maxInFlight)
	t.Logf("kill -9 of %s and its restart: %v", victim.name, kill)
	t.Logf("rolling restart (SIGTERM, --drain-window %s, restart, ready, next): %v", drainWindow, roll)
	t.Logf("all: %v; %d IDs received, %d distinct, %d duplicates", all, received, len(seen), dups)

	if dups != 0 {
		t.Errorf("%d duplicate IDs over the %d the caller received, want none", dups, received)
	}
	if roll.failed != 0 {
		t.Errorf("rolling restart: %d of %d requests failed as the caller saw them (first: %v), want none", roll.failed, roll.sent, roll.firstErr)
	}
	if roll.sent == 0 || kill.sent == 0 {
		t.Errorf("no request measured (kill %d, rolling %d)", kill.sent, roll.sent)
	}
}
