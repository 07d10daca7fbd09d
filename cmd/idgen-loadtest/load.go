package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// config is one load test: where to send requests, over how many
// connections, and when to stop.
type config struct {
	// Target is the server's base URL (http only).
	Target string
	// Path, when set, is the request's path and query instead of
	// /ids?count=Count[&namespace=Namespace].
	Path      string
	Count     int
	Namespace string
	Conns     int
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
}

// errNotLoopback is returned for a target that is not a loopback address
// when AllowRemote is off.
var errNotLoopback = errors.New("target is not a loopback address (pass --allow-remote to load another host)")

// target is a resolved config.Target.
type target struct {
	dial string // ip:port
	host string // Host header
	path string // request target
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
	path := cfg.Path
	if path == "" {
		q := url.Values{}
		q.Set("count", strconv.Itoa(cfg.Count))
		if cfg.Namespace != "" {
			q.Set("namespace", cfg.Namespace)
		}
		base := strings.TrimSuffix(u.EscapedPath(), "/")
		path = base + "/ids?" + q.Encode()
	}
	return target{dial: net.JoinHostPort(ips[0].String(), port), host: u.Host, path: path}, nil
}

// result is what a load test measured.
type result struct {
	Label       string         `json:"label,omitempty"`
	Target      string         `json:"target"`
	Path        string         `json:"path"`
	Conns       int            `json:"conns"`
	Count       int            `json:"count"`
	Namespace   string         `json:"namespace,omitempty"`
	DurationS   float64        `json:"duration_s"`
	Requests    int64          `json:"requests"`
	IDs         int64          `json:"ids"`
	RequestsPS  float64        `json:"requests_per_s"`
	IDsPS       float64        `json:"ids_per_s"`
	Latency     latency        `json:"latency_ms"`
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
	hist     histogram
	kinds    map[string]int // written by the connection, read after it stopped
}

// errShort marks a response with fewer IDs than requested.
var errShort = errors.New("fewer IDs than requested")

// run drives the target until the duration, the request count or ctx ends,
// then returns what it measured. Canceling ctx ends the run early and still
// returns the result so far.
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

	var (
		uniq      uniqueness
		measuring atomic.Bool
		tickets   atomic.Int64 // requests left, when cfg.Requests is set
		stats     = make([]*connStats, cfg.Conns)
		wg        sync.WaitGroup
	)
	tickets.Store(cfg.Requests)
	measuring.Store(cfg.Warmup == 0)
	cpu0 := processCPU()
	busy0, busyErr := machineBusy()
	var srv0 procSample
	if cfg.ServerPID > 0 {
		srv0, _ = readProc(cfg.ServerPID)
	}
	start := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	for i := range stats {
		st := &connStats{kinds: map[string]int{}}
		stats[i] = st
		c := newHTTPConn(tgt.dial, tgt.host, tgt.path, cfg.Timeout)
		wg.Go(func() {
			defer c.close()
			var ids, scratch runSet // scratch: IDs scanned but not collected
			for runCtx.Err() == nil {
				on := measuring.Load()
				if on && cfg.Requests > 0 && tickets.Add(-1) < 0 {
					cancel()
					break
				}
				t0 := time.Now()
				resp, err := c.do(runCtx)
				elapsed := time.Since(t0)
				n := 0
				if err == nil {
					if resp.status != 200 {
						err = fmt.Errorf("status %d", resp.status)
					} else if cfg.CheckUnique {
						n, err = scanIDs(resp.body, &ids)
					} else {
						scratch.runs = scratch.runs[:0]
						n, err = scanIDs(resp.body, &scratch)
					}
					if err == nil && cfg.Path == "" && n < cfg.Count {
						err = errShort
					}
				}
				if err != nil && resp.status == 0 && runCtx.Err() != nil {
					break // the run ended while dialing: not the server's fault
				}
				if on {
					st.hist.record(elapsed)
					st.requests.Add(1)
					st.ids.Add(int64(n))
					if err != nil {
						st.errors.Add(1)
						st.kinds[errorKind(resp, err)]++
					}
				}
				if err != nil && resp.status == 0 {
					// The connection failed: do not spin on a server that is gone.
					select {
					case <-runCtx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
				if len(ids.runs) >= 4096 {
					uniq.merge(&ids)
				}
			}
			uniq.merge(&ids)
		})
	}

	// Warm up, then measure until the deadline or the last ticket.
	if cfg.Warmup > 0 {
		select {
		case <-runCtx.Done():
		case <-time.After(cfg.Warmup):
		}
		if cfg.ServerPID > 0 {
			srv0, _ = readProc(cfg.ServerPID)
		}
		cpu0 = processCPU()
		busy0, busyErr = machineBusy()
		start = time.Now()
		measuring.Store(true)
	}
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	ticker := time.NewTicker(cfg.ProgressEvery)
	defer ticker.Stop()
	var prev snapshot
	prevAt := start
	var prevReq, prevIDs int64
wait:
	for {
		select {
		case <-runCtx.Done():
			break wait
		case <-deadline:
			break wait
		case now := <-ticker.C:
			if cfg.Progress == nil {
				continue
			}
			var cur snapshot
			var req, ids, errs int64
			for _, st := range stats {
				st.hist.addTo(&cur)
				req += st.requests.Load()
				ids += st.ids.Load()
				errs += st.errors.Load()
			}
			d := cur.sub(&prev)
			secs := now.Sub(prevAt).Seconds()
			fmt.Fprintf(cfg.Progress, "[%5.1fs] %9.0f req/s %11.0f ids/s  p50 %s  p99 %s  errors %d  dups %d\n",
				now.Sub(start).Seconds(), float64(req-prevReq)/secs, float64(ids-prevIDs)/secs,
				fmtDur(d.quantile(0.50)), fmtDur(d.quantile(0.99)), errs, uniq.duplicates())
			prev, prevAt, prevReq, prevIDs = cur, now, req, ids
		}
	}
	cancel()
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	busy1, busyErr1 := machineBusy()

	res := &result{
		Label: cfg.Label, Target: cfg.Target, Path: tgt.path, Conns: cfg.Conns, Count: cfg.Count, Namespace: cfg.Namespace,
		DurationS: elapsed.Seconds(), UniqueCheck: cfg.CheckUnique, ClientCPUS: cpu.Seconds(),
	}
	if busyErr == nil && busyErr1 == nil {
		res.MachineBusyS = (busy1 - busy0).Seconds()
	}
	var all snapshot
	for _, st := range stats {
		st.hist.addTo(&all)
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
	res.Latency = latency{
		Mean: ms(all.mean()), P50: ms(all.quantile(0.50)), P90: ms(all.quantile(0.90)),
		P99: ms(all.quantile(0.99)), P999: ms(all.quantile(0.999)), Max: ms(time.Duration(all.max)),
	}
	if cfg.CheckUnique {
		res.Distinct, res.Duplicates = uniq.finish()
	}
	if cfg.ServerPID > 0 {
		srv1, err := readProc(cfg.ServerPID)
		if err != nil {
			return res, fmt.Errorf("read server process: %w", err)
		}
		res.Server = &serverStats{
			PID: cfg.ServerPID, RSSKB: srv1.rssKB, HWMKB: srv1.hwmKB,
			CPUS: (srv1.cpu - srv0.cpu).Seconds(),
		}
	}
	if res.Requests > 0 && res.Errors == res.Requests {
		return res, fmt.Errorf("every request failed (%s)", topKinds(res.ErrorKinds))
	}
	return res, nil
}

// errorKind names the kind of a failed request for the summary.
func errorKind(resp response, err error) string {
	var ne net.Error
	switch {
	case resp.status != 0 && resp.status != 200:
		return "status_" + strconv.Itoa(resp.status)
	case errors.Is(err, errShort):
		return "short"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case resp.status == 200:
		return "bad_body"
	default:
		return "transport"
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
