// Command idgen-loadtest drives a running idgen server over HTTP and reports
// what it sustained: requests and IDs per second, latency percentiles,
// errors, and any duplicate ID seen across the run.
//
// Usage:
//
//	idgen-loadtest [flags]
//
// It opens --conns keep-alive connections to --url and sends
// GET /ids?count=N[&namespace=NS] on them, for --duration or until
// --requests requests were made. By default the loop is closed: each
// connection sends its next request as soon as the last one is answered,
// which measures the most the server sustains. With --rate R the loop is
// open: requests are due at R per second on a fixed schedule, go out on
// whichever connection is free, and their latency counts from the time they
// were due, so a server that falls behind shows its queue in the
// percentiles instead of slowing the load down (no coordinated omission).
//
// Every second it prints a progress line to stderr with the rates and the
// latency percentiles of that second; at the end a summary line (or, with
// --json, one JSON object) to stdout. It refuses a target that is not a
// loopback address unless --allow-remote is given. The exit code is 0 on
// success, 1 when the run failed (every request failed, or the target was
// unusable), 2 for bad usage and 3 when a duplicate ID was seen.
//
// With --transport grpc it calls idgen's IdService over gRPC instead, with
// the connect client on cleartext HTTP/2 (h2c), one HTTP/2 connection per
// --conns and one call in flight on each: NextIds with --count IDs per call
// (closed or open loop, as over HTTP), or, with --stream, StreamIds with
// --count IDs per message, one endless stream per connection, each message
// counted as a request. The same flags, progress lines and summary apply.
//
// Over HTTP it uses only the standard library for the load itself: its
// HTTP/1.1 client is a minimal one, so that the load generator, which
// shares the machine with the server in docs/benchmarks.md, takes as little
// CPU as it can. The connections speak through a small interface (caller),
// so that both transports drive the same closed and open loops.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainRun(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	exitDups  = 3
)

const usage = `Usage: idgen-loadtest [flags]

Drives a running idgen server with GET /ids requests over keep-alive
connections and reports requests/s, IDs/s, latency percentiles, errors and
duplicate IDs. Progress goes to stderr each second, the summary to stdout.

With --transport grpc it calls IdService.NextIds over gRPC (cleartext
HTTP/2, one connection per --conns) instead, or with --stream receives
IdService.StreamIds, --count IDs per message, each message counted as a
request. --transport connect does the same with the Connect protocol over
HTTP/1.1, one kept-alive connection per --conns as GET /ids uses.
--transport grpc-go calls NextIds over gRPC with grpc-go's own client
(unary only).

Closed loop (default): each connection sends its next request as soon as
the last one is answered. Open loop (--rate R): R requests per second are
due on a fixed schedule and latency counts from when each was due.

Flags:
`

// mainRun runs the tool with args and returns its exit code.
func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "bare-echo" {
		return bareEcho(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("idgen-loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	cfg := config{CheckUnique: true}
	fs.StringVar(&cfg.Target, "url", "http://127.0.0.1:8080", "base `URL` of the server (http only)")
	fs.StringVar(&cfg.Transport, "transport", transportHTTP, "`http` (GET /ids over HTTP/1.1), grpc (IdService over cleartext HTTP/2, connect-go's client), grpc-go (the same with grpc-go's client, unary only) or connect (IdService, the Connect protocol over HTTP/1.1)")
	fs.BoolVar(&cfg.Stream, "stream", false, "with --transport grpc: receive StreamIds, --count IDs per message, instead of calling NextIds")
	fs.IntVar(&cfg.Conns, "conns", 8, "keep-alive `connections`, each with one request in flight")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: `requests` per second due on a fixed schedule, latency measured from when each was due (0: closed loop)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "how long to measure (default 10s unless --requests is set)")
	fs.Int64Var(&cfg.Requests, "requests", 0, "stop after this many measured `requests`")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "load for this long before measuring")
	fs.IntVar(&cfg.Count, "count", 1, "IDs per request (the count parameter)")
	fs.StringVar(&cfg.Namespace, "namespace", "", "draw segment IDs of this `namespace` instead of Snowflake IDs")
	fs.StringVar(&cfg.Path, "path", "", "request this `path?query` instead of /ids?count=…&namespace=…")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.BoolVar(&cfg.CheckUnique, "check-unique", true, "collect every ID and count duplicates")
	fs.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a target that is not a loopback address")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "report RSS and CPU time of this `pid` (the server) from /proc")
	fs.StringVar(&cfg.Label, "label", "", "a `name` for this run, copied into the --json output")
	jsonOut := fs.Bool("json", false, "print the summary as one JSON object")
	quiet := fs.Bool("quiet", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idgen-loadtest: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if cfg.Duration == 0 && cfg.Requests == 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Duration < 0 || cfg.Requests < 0 || cfg.Warmup < 0 || cfg.Conns < 1 || cfg.Count < 1 || cfg.Timeout <= 0 {
		fmt.Fprintln(stderr, "idgen-loadtest: --duration, --requests and --warmup must not be negative; --conns, --count and --timeout must be positive")
		return exitUsage
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		fmt.Fprintln(stderr, "idgen-loadtest: --rate must be a positive number of requests per second (or 0 for a closed loop)")
		return exitUsage
	}
	if cfg.Transport != transportHTTP && !rpcTransport(cfg.Transport) {
		fmt.Fprintf(stderr, "idgen-loadtest: --transport must be http, grpc, grpc-go or connect, got %q\n", cfg.Transport)
		return exitUsage
	}
	if cfg.Stream && !rpcTransport(cfg.Transport) {
		fmt.Fprintln(stderr, "idgen-loadtest: --stream needs --transport grpc or connect")
		return exitUsage
	}
	if cfg.Stream && cfg.Rate > 0 {
		fmt.Fprintln(stderr, "idgen-loadtest: --stream cannot take --rate: the server sends a stream's messages as fast as it can")
		return exitUsage
	}
	if rpcTransport(cfg.Transport) && cfg.Path != "" {
		fmt.Fprintln(stderr, "idgen-loadtest: --path is for --transport http")
		return exitUsage
	}
	if rpcTransport(cfg.Transport) && cfg.Count > math.MaxInt32 {
		fmt.Fprintln(stderr, "idgen-loadtest: --count is too large for gRPC (at most 2147483647)")
		return exitUsage
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	res, err := run(ctx, cfg)
	if res != nil {
		if *jsonOut {
			enc := json.NewEncoder(stdout)
			if err := enc.Encode(res); err != nil {
				fmt.Fprintf(stderr, "idgen-loadtest: %v\n", err)
				return exitFail
			}
		} else {
			fmt.Fprintln(stdout, summary(res))
		}
	}
	switch {
	case errors.Is(err, errNotLoopback):
		fmt.Fprintf(stderr, "idgen-loadtest: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "idgen-loadtest: %v\n", err)
		return exitFail
	case res.Duplicates > 0:
		fmt.Fprintf(stderr, "idgen-loadtest: %d duplicate IDs seen\n", res.Duplicates)
		return exitDups
	}
	return exitOK
}

// summary is the one-line summary of a run.
func summary(r *result) string {
	l := r.Latency
	s := fmt.Sprintf("%d requests in %.2fs over %d conns to %s", r.Requests, r.DurationS, r.Conns, r.Path)
	if r.Mode == "open" {
		s += fmt.Sprintf(", open loop at %.0f req/s", r.Rate)
	}
	s += fmt.Sprintf(": %.0f req/s, %.0f ids/s, latency p50 %s p99 %s p99.9 %s max %s",
		r.RequestsPS, r.IDsPS, fmtDur(msDur(l.P50)), fmtDur(msDur(l.P99)), fmtDur(msDur(l.P999)), fmtDur(msDur(l.Max)))
	if r.Mode == "open" {
		s += " from the intended send times"
		if r.Service != nil && r.SendLag != nil {
			s += fmt.Sprintf(" (service p99 %s, send lag p99 %s)", fmtDur(msDur(r.Service.P99)), fmtDur(msDur(r.SendLag.P99)))
		}
		if r.Unsent > 0 {
			s += fmt.Sprintf(", %d of %d scheduled requests unsent (the server fell behind; the percentiles leave them out)", r.Unsent, r.Scheduled)
		}
	}
	s += fmt.Sprintf(", errors %d", r.Errors)
	if len(r.ErrorKinds) > 0 {
		s += " (" + topKinds(r.ErrorKinds) + ")"
	}
	if r.UniqueCheck {
		s += fmt.Sprintf(", duplicates %d", r.Duplicates)
	} else {
		s += ", duplicates not checked"
	}
	s += fmt.Sprintf(", client CPU %.2fs", r.ClientCPUS)
	if r.MachineBusyS > 0 {
		s += fmt.Sprintf(", machine busy %.2fs", r.MachineBusyS)
	}
	if r.Server != nil {
		s += fmt.Sprintf(", server CPU %.2fs RSS %d kB (peak %d kB)", r.Server.CPUS, r.Server.RSSKB, r.Server.HWMKB)
		if r.Server.RunqWaitS != nil {
			s += fmt.Sprintf(", server waited %.2fs for a CPU", *r.Server.RunqWaitS)
		}
	}
	return s
}

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
