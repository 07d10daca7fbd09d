package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// config is one load test: where to send requests, over how many
// connections, and when to stop.
type config struct {
	// Target is the server's base URL (http only).
	Target string
	// Transport is transportHTTP (GET /ids over HTTP/1.1), transportGRPC
	// (IdService over gRPC on cleartext HTTP/2), transportGRPCGo (the same
	// with grpc-go's client) or transportConnect; "" is HTTP.
	Transport string
	// Stream, with gRPC, receives IdService.StreamIds with Count IDs per
	// message instead of calling NextIds: each message counts as a request.
	Stream bool
	// Path, when set, is the request's path and query instead of
	// /ids?count=Count[&namespace=Namespace].
	Path      string
	Count     int
	Namespace string
	// Conns is the number of keep-alive connections, each with at most one
	// request in flight.
	Conns int
	// Rate, when set, makes the run an open loop: requests are due at a
	// fixed rate (requests per second) whatever the answers take, go out on
	// whichever connection is free, and latency counts from the time each
	// was due (see runOpen). Zero runs a closed loop.
	Rate float64
	// Duration and Requests bound the run: it stops at whichever comes
	// first. At least one must be set. Warmup runs before and is not
	// measured (its IDs are still checked for duplicates).
	Duration time.Duration
	Requests int64
	Warmup   time.Duration
	// Timeout bounds each request, connecting included.
	Timeout time.Duration
	// CheckUnique collects every ID to count duplicates.
	CheckUnique bool
	// AllowRemote permits a target that is not a loopback address.
	AllowRemote bool
	// Progress, when set, receives a progress line every ProgressEvery.
	Progress      io.Writer
	ProgressEvery time.Duration
	// ServerPID, when set, is the server's process: its RSS and CPU time are
	// read from /proc and reported.
	ServerPID int
	// Label is copied into the result, for scripts that collect results.
	Label string

	// clock is the open loop's time source: nil means a pacerClock, or
	// snowflake.SystemClock where there is none. Only the pacer sleeps on
	// it.
	clock snowflake.Clock
}

// errNotLoopback is returned for a target that is not a loopback address
// when AllowRemote is off.
var errNotLoopback = errors.New("target is not a loopback address (pass --allow-remote to load another host)")

// target is a resolved config.Target.
type target struct {
	dial   string // ip:port
	host   string // Host header
	path   string // request target
	prefix string // the URL's path, without a trailing slash
}

// resolveTarget checks cfg's URL and resolves its host. Unless AllowRemote
// is set, every address the host resolves to must be a loopback address.
func resolveTarget(ctx context.Context, cfg config) (target, error) {
	u, err := url.Parse(cfg.Target)
	if err != nil {
		return target{}, fmt.Errorf("target URL: %w", err)
	}
	if u.Scheme != "http" {
		return target{}, fmt.Errorf("target URL %q: only http:// is supported", cfg.Target)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return target{}, fmt.Errorf("target URL %q has no host", cfg.Target)
	}
	if port == "" {
		port = "80"
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return target{}, fmt.Errorf("resolve %s: %w", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	if len(ips) == 0 {
		return target{}, fmt.Errorf("resolve %s: no address", host)
	}
	if !cfg.AllowRemote {
		for _, ip := range ips {
			if !ip.IsLoopback() {
				return target{}, fmt.Errorf("%s (%s): %w", host, ip, errNotLoopback)
			}
		}
	}
	base := strings.TrimSuffix(u.EscapedPath(), "/")
	path := cfg.Path
	switch {
	case rpcTransport(cfg.Transport):
		path = grpcPath(cfg)
	case path == "":
		q := url.Values{}
		q.Set("count", strconv.Itoa(cfg.Count))
		if cfg.Namespace != "" {
			q.Set("namespace", cfg.Namespace)
		}
		path = base + "/ids?" + q.Encode()
	}
	return target{dial: net.JoinHostPort(ips[0].String(), port), host: u.Host, path: path, prefix: base}, nil
}

// result is what a load test measured.
type result struct {
	Label  string `json:"label,omitempty"`
	Target string `json:"target"`
	// Mode is "closed" or "open"; in an open loop Rate is the rate asked
	// for, Scheduled the number of requests due in the measured part of the
	// schedule and Unsent those of them never answered because the run was
	// cut short (ctx, or the drain after the schedule's end ran out).
	Mode string `json:"mode"`
	// Transport is "http" or "grpc"; Stream says a gRPC run received
	// StreamIds, whose messages count as its requests.
	Transport  string  `json:"transport"`
	Stream     bool    `json:"stream,omitempty"`
	Rate       float64 `json:"rate,omitempty"`
	Scheduled  int64   `json:"scheduled,omitempty"`
	Unsent     int64   `json:"unsent,omitempty"`
	Path       string  `json:"path"`
	Conns      int     `json:"conns"`
	Count      int     `json:"count"`
	Namespace  string  `json:"namespace,omitempty"`
	DurationS  float64 `json:"duration_s"`
	Requests   int64   `json:"requests"`
	IDs        int64   `json:"ids"`
	RequestsPS float64 `json:"requests_per_s"`
	IDsPS      float64 `json:"ids_per_s"`
	// Latency counts from each request's send time in a closed loop and
	// from its intended send time in an open loop. There SendLag is the
	// part before the request went out (the pacer's lateness and the wait
	// for a free connection) and Service the part after.
	Latency     latency        `json:"latency_ms"`
	SendLag     *latency       `json:"send_lag_ms,omitempty"`
	Service     *latency       `json:"service_ms,omitempty"`
	Errors      int64          `json:"errors"`
	ErrorKinds  map[string]int `json:"error_kinds,omitempty"`
	UniqueCheck bool           `json:"unique_checked"`
	Distinct    int64          `json:"distinct_ids,omitempty"`
	Duplicates  int64          `json:"duplicates"`
	ClientCPUS  float64        `json:"client_cpu_s"`
	// MachineBusyS is the CPU time the whole machine was busy during the
	// run (all CPUs, from /proc/stat); minus the client's and the server's
	// it is what else ran. Absent where /proc/stat is not readable.
	MachineBusyS float64      `json:"machine_busy_s,omitempty"`
	Server       *serverStats `json:"server,omitempty"`
}

// latency holds latencies in milliseconds.
type latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// connStats is what one connection counts; the progress line reads it while
// the connection writes it.
type connStats struct {
	requests atomic.Int64
	ids      atomic.Int64
	errors   atomic.Int64
	// hist holds the latencies: from the request's send time in a closed
	// loop, from its intended send time in an open loop.
	hist histogram
	// Open loop only: lag, from the intended send time to the actual one
	// (waiting for the schedule's pacer and for a free connection), and
	// service, from the actual send time to the answer.
	lag, service histogram
	kinds        map[string]int // written by the connection, read after it stopped
}

// record counts one measured request.
func (st *connStats) record(latency time.Duration, out outcome) {
	st.hist.record(latency)
	st.requests.Add(1)
	st.ids.Add(int64(out.n))
	if out.kind != "" {
		st.errors.Add(1)
		st.kinds[out.kind]++
	}
}

// run drives the target until the duration, the request count or ctx ends,
// then returns what it measured. Canceling ctx ends the run early and still
// returns the result so far. With cfg.Rate set it runs an open loop
// (runOpen), else a closed one: every connection sends its next request as
// soon as the last one is answered.
func run(ctx context.Context, cfg config) (*result, error) {
	if cfg.Conns < 1 {
		return nil, fmt.Errorf("conns must be at least 1, got %d", cfg.Conns)
	}
	if cfg.Duration <= 0 && cfg.Requests <= 0 {
		return nil, errors.New("set a duration or a request count: the run must be bounded")
	}
	if cfg.Path == "" && cfg.Count < 1 {
		return nil, fmt.Errorf("count must be at least 1, got %d", cfg.Count)
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("rate must be a positive number of requests per second, got %v", cfg.Rate)
	}
	switch cfg.Transport {
	case "", transportHTTP:
		if cfg.Stream {
			return nil, errors.New("streaming needs the gRPC transport")
		}
	case transportGRPC, transportConnect, transportGRPCGo:
		if cfg.Path != "" {
			return nil, errors.New("a request path is for the HTTP transport only")
		}
		if cfg.Transport == transportGRPCGo && cfg.Stream {
			return nil, errors.New("the grpc-go transport makes unary calls only: stream with grpc")
		}
		if cfg.Stream && cfg.Rate > 0 {
			return nil, errors.New("a stream cannot run an open loop: the server sends as fast as it can")
		}
	default:
		return nil, fmt.Errorf("unknown transport %q (want http, grpc, grpc-go or connect)", cfg.Transport)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	tgt, err := resolveTarget(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Transport == transportGRPCGo && tgt.prefix != "" {
		return nil, fmt.Errorf("the grpc-go transport calls the server's root: the URL's path %q cannot be used", tgt.prefix)
	}
	lr := &loadRun{cfg: cfg, stats: make([]*connStats, cfg.Conns)}
	for i := range lr.stats {
		lr.stats[i] = &connStats{kinds: map[string]int{}}
	}
	newCaller := func() caller { return newHTTPCaller(tgt, cfg) }
	switch {
	case rpcTransport(cfg.Transport) && cfg.Stream:
		newCaller = func() caller { return newGRPCStreamCaller(tgt, cfg) }
	case cfg.Transport == transportGRPCGo:
		newCaller = func() caller { return newGRPCGoUnaryCaller(tgt, cfg) }
	case rpcTransport(cfg.Transport):
		newCaller = func() caller { return newGRPCUnaryCaller(tgt, cfg) }
	}
	if cfg.Rate > 0 {
		if lr.cfg.clock == nil {
			if pc, err := newPacerClock(); err == nil {
				defer pc.Close()
				lr.cfg.clock = pc
			} else {
				lr.cfg.clock = snowflake.SystemClock()
			}
		}
		return lr.runOpen(ctx, tgt, newCaller)
	}
	return lr.runClosed(ctx, tgt, newCaller)
}

// loadRun is the state of one run shared by its connections, its progress
// line and its result.
type loadRun struct {
	cfg   config
	stats []*connStats
	uniq  uniqueness

	// Taken when measuring starts (after the warm-up).
	start  time.Time
	cpu0   time.Duration
	busy0  time.Duration
	busyOK bool
	srv0   procSample

	// Open loop only.
	openLoop  bool
	scheduled int64                      // requests due in the measured part
	backlog   func(now time.Time) string // the progress line's backlog part

	// The progress line's last counts, written by the progress loop only.
	prev, prevLag    snapshot
	prevAt           time.Time
	prevReq, prevIDs int64
}

// beginMeasuring samples the counters that the result is a difference of.
func (lr *loadRun) beginMeasuring(now time.Time) {
	if lr.cfg.ServerPID > 0 {
		lr.srv0, _ = readProc(lr.cfg.ServerPID)
	}
	lr.cpu0 = processCPU()
	var err error
	lr.busy0, err = machineBusy()
	lr.busyOK = err == nil
	lr.start = now
	lr.prevAt = now
}

// collect merges a connection's IDs into the uniqueness check once they
// are many.
func (lr *loadRun) collect(ids *runSet) {
	if len(ids.runs) >= 4096 {
		lr.uniq.merge(ids)
	}
}

// pause waits a little after a connection failed, so as not to spin on a
// server that is gone.
func pause(ctx context.Context) {
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runClosed keeps every connection busy with one request at a time.
func (lr *loadRun) runClosed(ctx context.Context, tgt target, newCaller func() caller) (*result, error) {
	cfg := lr.cfg
	var (
		measuring atomic.Bool
		tickets   atomic.Int64 // requests left, when cfg.Requests is set
		wg        sync.WaitGroup
	)
	tickets.Store(cfg.Requests)
	measuring.Store(cfg.Warmup == 0)
	lr.beginMeasuring(time.Now())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	for _, st := range lr.stats {
		c := newCaller()
		wg.Go(func() {
			defer c.close()
			var ids runSet
			for runCtx.Err() == nil {
				on := measuring.Load()
				if on && cfg.Requests > 0 && tickets.Add(-1) < 0 {
					cancel()
					break
				}
				// A request once begun is finished even when the run ends
				// meanwhile (its ticket was taken): only ctx cuts it short.
				t0 := time.Now()
				out := c.call(ctx, &ids)
				elapsed := time.Since(t0)
				if out.noAnswer && ctx.Err() != nil {
					break // interrupted while dialing: not the server's fault
				}
				if on {
					st.record(elapsed, out)
				}
				if out.noAnswer {
					pause(runCtx)
				}
				lr.collect(&ids)
			}
			lr.uniq.merge(&ids)
		})
	}

	// Warm up, then measure until the deadline or the last ticket.
	if cfg.Warmup > 0 {
		t := time.NewTimer(cfg.Warmup)
		select {
		case <-runCtx.Done():
		case <-t.C:
		}
		t.Stop()
		lr.beginMeasuring(time.Now())
		measuring.Store(true)
	}
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	lr.progressLoop(runCtx.Done(), deadline)
	cancel()
	wg.Wait()
	return lr.result(tgt, time.Since(lr.start))
}

// progressLoop prints a progress line every cfg.ProgressEvery until done
// or deadline fires.
func (lr *loadRun) progressLoop(done <-chan struct{}, deadline <-chan time.Time) {
	ticker := time.NewTicker(lr.cfg.ProgressEvery)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-deadline:
			return
		case now := <-ticker.C:
			if lr.cfg.Progress != nil {
				fmt.Fprintln(lr.cfg.Progress, lr.progressLine(now))
			}
		}
	}
}

// progressLine describes the interval since the last one: rates and the
// latency percentiles of the requests answered in it, read from the
// histograms while the connections keep recording.
func (lr *loadRun) progressLine(now time.Time) string {
	var cur, lag snapshot
	var req, ids, errs int64
	for _, st := range lr.stats {
		st.hist.addTo(&cur)
		if lr.openLoop {
			st.lag.addTo(&lag)
		}
		req += st.requests.Load()
		ids += st.ids.Load()
		errs += st.errors.Load()
	}
	d := cur.sub(&lr.prev)
	secs := now.Sub(lr.prevAt).Seconds()
	line := fmt.Sprintf("[%5.1fs] %9.0f req/s %11.0f ids/s  p50 %s  p99 %s  p99.9 %s  errors %d  dups %d",
		now.Sub(lr.start).Seconds(), float64(req-lr.prevReq)/secs, float64(ids-lr.prevIDs)/secs,
		fmtDur(d.quantile(0.50)), fmtDur(d.quantile(0.99)), fmtDur(d.quantile(0.999)), errs, lr.uniq.duplicates())
	if lr.openLoop {
		dl := lag.sub(&lr.prevLag)
		line += fmt.Sprintf("  send lag p99 %s", fmtDur(dl.quantile(0.99)))
		if lr.backlog != nil {
			line += lr.backlog(now)
		}
		lr.prevLag = lag
	}
	lr.prev, lr.prevAt, lr.prevReq, lr.prevIDs = cur, now, req, ids
	return line
}

// result sums the connections' counts into the run's result.
func (lr *loadRun) result(tgt target, elapsed time.Duration) (*result, error) {
	cfg := lr.cfg
	cpu := processCPU() - lr.cpu0
	busy1, busyErr1 := machineBusy()

	res := &result{
		Label: cfg.Label, Target: cfg.Target, Path: tgt.path, Conns: cfg.Conns, Count: cfg.Count, Namespace: cfg.Namespace,
		Mode: "closed", Transport: cmp.Or(cfg.Transport, transportHTTP), Stream: cfg.Stream, DurationS: elapsed.Seconds(), UniqueCheck: cfg.CheckUnique, ClientCPUS: cpu.Seconds(),
	}
	if lr.busyOK && busyErr1 == nil {
		res.MachineBusyS = (busy1 - lr.busy0).Seconds()
	}
	var all, lag, service snapshot
	for _, st := range lr.stats {
		st.hist.addTo(&all)
		st.lag.addTo(&lag)
		st.service.addTo(&service)
		res.Requests += st.requests.Load()
		res.IDs += st.ids.Load()
		res.Errors += st.errors.Load()
		for k, v := range st.kinds {
			if res.ErrorKinds == nil {
				res.ErrorKinds = map[string]int{}
			}
			res.ErrorKinds[k] += v
		}
	}
	if secs := elapsed.Seconds(); secs > 0 {
		res.RequestsPS = float64(res.Requests) / secs
		res.IDsPS = float64(res.IDs) / secs
	}
	res.Latency = all.latency()
	if lr.openLoop {
		res.Mode = "open"
		res.Rate = cfg.Rate
		res.Scheduled = lr.scheduled
		res.Unsent = max(0, lr.scheduled-res.Requests)
		l, s := lag.latency(), service.latency()
		res.SendLag, res.Service = &l, &s
	}
	if cfg.CheckUnique {
		res.Distinct, res.Duplicates = lr.uniq.finish()
	}
	if cfg.ServerPID > 0 {
		srv1, err := readProc(cfg.ServerPID)
		if err != nil {
			return res, fmt.Errorf("read server process: %w", err)
		}
		res.Server = &serverStats{
			PID: cfg.ServerPID, RSSKB: srv1.rssKB, HWMKB: srv1.hwmKB,
			CPUS: (srv1.cpu - lr.srv0.cpu).Seconds(),
		}
		if srv1.runqWait >= 0 && lr.srv0.runqWait >= 0 {
			w := max(0, srv1.runqWait-lr.srv0.runqWait).Seconds()
			res.Server.RunqWaitS = &w
		}
	}
	if res.Requests > 0 && res.Errors == res.Requests {
		return res, fmt.Errorf("every request failed (%s)", topKinds(res.ErrorKinds))
	}
	return res, nil
}

// latency returns the snapshot's percentiles in milliseconds.
func (s *snapshot) latency() latency {
	return latency{
		Mean: ms(s.mean()), P50: ms(s.quantile(0.50)), P90: ms(s.quantile(0.90)),
		P99: ms(s.quantile(0.99)), P999: ms(s.quantile(0.999)), Max: ms(time.Duration(s.max)),
	}
}

// topKinds formats the error kinds, most frequent first.
func topKinds(kinds map[string]int) string {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if kinds[a] != kinds[b] {
			return kinds[b] - kinds[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, kinds[k])
	}
	return strings.Join(parts, " ")
}

// fmtDur formats a latency compactly with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3gms", ms(d))
	default:
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
}
