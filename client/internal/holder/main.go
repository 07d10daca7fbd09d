// Command holder is a lease holder for idgen's multi-process tests and its
// fault harness: a process that makes Snowflake IDs with client.Generator
// and writes every batch it got, every refusal and every change of its
// lease to its output, one line each:
//
//	started <unix ns>
//	lease <unix ns> <datacenter> <worker> <fencing version> <floor ms> <ceiling ms>
//	ids <send unix ns> <recv unix ns> <datacenter> <worker> <fencing version> <id> <id> …
//	refused <unix ns> <reason>
//	closed <unix ns> <ok | error text>
//
// An ids line names its lease when the generator held that one lease
// before and after the batch; otherwise worker and version are -1. Refusal
// reasons: no_lease, expired, clock, backward, below_floor, above_ceiling,
// closed, other. It runs until SIGTERM or SIGINT, then closes the
// generator and exits 0. The token comes from IDGEN_HOLDER_TOKEN; warnings
// go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idgen-project/idgen/client"
	"github.com/idgen-project/idgen/snowflake"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		url          = flag.String("url", "", "base URL of the idgen node serving the lease API")
		holder       = flag.String("holder", "", "holder name")
		datacenter   = flag.Int64("datacenter", 0, "datacenter ID")
		workers      = flag.String("workers", "", "pool of worker IDs, A-B (default every one)")
		ttl          = flag.Duration("ttl", 3*time.Second, "lease ttl")
		heartbeat    = flag.Duration("heartbeat", 0, "heartbeat interval (default ttl/3)")
		batch        = flag.Int("batch", 50, "IDs per batch")
		interval     = flag.Duration("interval", 5*time.Millisecond, "pause between batches")
		out          = flag.String("out", "", "output file (default stdout)")
		startTimeout = flag.Duration("start-timeout", 60*time.Second, "how long to wait for the first lease")
	)
	flag.Parse()
	w := os.Stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	// One unbuffered write per line: SIGKILL loses no written line.
	emit := func(format string, args ...any) {
		_, _ = w.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	opts := client.GeneratorOptions{
		Token: os.Getenv("IDGEN_HOLDER_TOKEN"), Datacenter: *datacenter, TTL: *ttl, Heartbeat: *heartbeat, Holder: *holder,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *workers != "" {
		lo, hi, _ := strings.Cut(*workers, "-")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad --workers %q", *workers)
		}
		opts.Workers = &client.WorkerRange{Min: a, Max: b}
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithTimeout(context.Background(), *startTimeout)
	g, err := client.NewGenerator(ctx, *url, opts)
	cancel()
	if err != nil {
		return err
	}
	emit("started %d", time.Now().UnixNano())

	type leaseID struct{ worker, version int64 }
	status := func() (leaseID, int64, int64) {
		st := g.Status()
		if !st.Held {
			return leaseID{-1, -1}, 0, 0
		}
		return leaseID{st.Lease.WorkerID, st.Lease.FencingVersion}, st.FloorMS, st.CeilingMS
	}
	var last leaseID
	buf := make([]int64, 0, *batch)
	var line strings.Builder
	for {
		select {
		case <-stop:
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := g.Close(cctx)
			cancel()
			if err != nil {
				emit("closed %d %s", time.Now().UnixNano(), strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				emit("closed %d ok", time.Now().UnixNano())
			}
			return nil
		default:
		}
		before, floor, ceiling := status()
		if before != last && before.worker >= 0 {
			emit("lease %d %d %d %d %d %d", time.Now().UnixNano(), *datacenter, before.worker, before.version, floor, ceiling)
		}
		last = before
		send := time.Now()
		ids, err := g.NextN(buf[:0], *batch)
		recv := time.Now()
		after, _, _ := status()
		if len(ids) > 0 {
			attributed := before
			if before != after {
				attributed = leaseID{-1, -1}
			}
			line.Reset()
			fmt.Fprintf(&line, "ids %d %d %d %d %d", send.UnixNano(), recv.UnixNano(), *datacenter, attributed.worker, attributed.version)
			for _, id := range ids {
				line.WriteByte(' ')
				line.WriteString(strconv.FormatInt(id, 10))
			}
			emit("%s", line.String())
		}
		if err != nil {
			emit("refused %d %s", time.Now().UnixNano(), reason(err))
			time.Sleep(20 * time.Millisecond)
			continue
		}
		time.Sleep(*interval)
	}
}

// reason names why the generator refused.
func reason(err error) string {
	switch {
	case errors.Is(err, client.ErrGeneratorClosed):
		return "closed"
	case errors.Is(err, client.ErrNoLease):
		return "no_lease"
	case errors.Is(err, client.ErrLeaseExpired):
		return "expired"
	case errors.Is(err, client.ErrClockOffset):
		return "clock"
	case errors.Is(err, client.ErrClockBackward):
		return "backward"
	case errors.Is(err, snowflake.ErrBelowFloor):
		return "below_floor"
	case errors.Is(err, snowflake.ErrAboveCeiling):
		return "above_ceiling"
	}
	return "other"
}
