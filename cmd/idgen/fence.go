package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
)

const restoreFenceHelp = `Fence a store that went back in time, before any node starts on it: a
database restored from a backup (pg_dump, mysqldump, a copy of the SQLite
file) or failed over to a replica that missed commits. Its ceilings and
counters are those of the backup, and nodes would hand out IDs they already
gave. In one transaction, this command:

  - takes every worker lease from its holder (fencing version + 1) and raises
    every timestamp ceiling to --up-to, or else to the database's time +
    --max-ttl + --max-clock-offset: above any timestamp a holder can have
    used. A node issues Snowflake IDs once its clock has passed it;
  - moves every namespace counter, deleted ones too, up by --gap (never past
    its limit: such a namespace is exhausted) and its revision with it;
  - records a fence lease event for every worker ID, naming you (cli:<user>),
    and raises the store's generation. Worker IDs with no row yet start at
    the same ceiling.

On etcd, which has no transaction over every key, it runs key by key
instead; run it again if it was cut short.

Stop every node first, restore, run this once, then start the nodes. A lease
whose expiry lies ahead of this machine's clock is taken for a node still
running, and the command refuses to fence without --force. Nodes
with a --state-file refuse a store that was restored and not fenced, or
fenced with a gap or ceiling below what they saw.

Flags (environment variable in brackets):
  --gap N               IDs every namespace counter moves up, at least the IDs any
                        namespace handed out after the backup (default 4294967296)
  --up-to TIME          no Snowflake ID carries a time after TIME (RFC 3339); default
                        the database's time + --max-ttl + --max-clock-offset
  --max-ttl D           longest lease of any holder: the nodes' --lease-ttl and
                        --lease-api-max-ttl (default 5m)
  --max-clock-offset D  the nodes' --max-clock-offset [IDGEN_MAX_CLOCK_OFFSET] (default 5s)
  --reason TEXT         why, recorded in every event (at most 1024 bytes)
  --force               fence even though leases look held by running nodes
  --dsn DSN             database [IDGEN_DSN] (default sqlite:idgen.db)
`

func runRestoreFence(ctx context.Context, args []string, e env) error {
	const cmd = "restore-fence"
	f := newAdminFlags(cmd)
	fs := f.fs
	gap := fs.Int64("gap", allocator.DefaultFenceGap, "")
	var upTo timeFlag
	fs.Var(&upTo, "up-to", "")
	maxTTL := fs.Duration("max-ttl", allocator.DefaultFenceMaxTTL, "")
	offset := fs.Duration("max-clock-offset", allocator.DefaultMaxClockOffset, "")
	reason := fs.String("reason", "", "")
	force := fs.Bool("force", false, "")
	for _, name := range []string{"gap", "up-to", "max-ttl", "reason", "force"} {
		f.noEnv[name] = true // about this restore, not a setting of the environment
	}
	var req allocator.FenceRequest
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := noArgs(cmd, pos, "restore-fence takes flags only"); err != nil {
			return err
		}
		switch {
		case *gap < 1:
			return usagef(cmd, "invalid --gap %d: want 1 or more", *gap)
		case *maxTTL < allocator.MinLeaseTTL:
			return usagef(cmd, "invalid --max-ttl %s: want at least %s", *maxTTL, allocator.MinLeaseTTL)
		case *offset < 0:
			return usagef(cmd, "invalid --max-clock-offset %s: want 0 or more", *offset)
		case f.isSet("up-to") && upTo.t.UnixMilli() <= 0:
			return usagef(cmd, "invalid --up-to %s: want a time after 1970", upTo.t.Format(time.RFC3339))
		}
		req = allocator.FenceRequest{Gap: *gap, MaxTTL: *maxTTL, MaxClockOffset: *offset,
			Owner: cliOwner(e), RequestID: cliRequestID(), Reason: *reason}
		if f.isSet("up-to") {
			req.UpTo = upTo.t
		}
		if err := req.Validate(); err != nil {
			return usagef(cmd, "%v", err)
		}
		return nil
	}, func(store stores.Store) error {
		fencer, ok := store.(allocator.RestoreFencer)
		if !ok {
			return fmt.Errorf("the %s store has no restore fence (see docs/operations.md, \"Runbook: restore\")", stores.Dialect(*f.dsn))
		}
		if !*force {
			if err := noLiveLeases(ctx, store, time.Now()); err != nil {
				return err
			}
		}
		res, err := fencer.FenceRestore(ctx, req)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("restore fence: %w", err))
		}
		audit := slog.New(slog.NewTextHandler(e.stderr, nil))
		audit.Info("store fenced", "generation", res.Generation, "ceiling_ms", res.CeilingMS, "gap", req.Gap,
			"workers", len(res.Leases), "namespaces", len(res.Namespaces), "reason", req.Reason,
			"caller", req.Owner, "request_id", req.RequestID, "host", hostname())
		printFence(e, req, res)
		return nil
	})
}

// noLiveLeases names the leases whose expiry is after now (their holders
// may still run); --force fences anyway.
func noLiveLeases(ctx context.Context, store stores.Store, now time.Time) error {
	leases, err := store.ListLeases(ctx)
	if err != nil {
		return withSchemaHint(ctx, store, fmt.Errorf("list leases: %w", err))
	}
	var live []string
	for _, l := range leases {
		if l.Holder != "" && l.ExpiresAt.After(now) {
			live = append(live, fmt.Sprintf("%d/%d held by %s until %s", l.DatacenterID, l.WorkerID, l.Holder, timeText(l.ExpiresAt)))
		}
	}
	if len(live) == 0 {
		return nil
	}
	more := ""
	if len(live) > 3 {
		more, live = fmt.Sprintf(" and %d more", len(live)-3), live[:3]
	}
	return fmt.Errorf("not fenced: leases look held by running nodes (%s%s); stop every node first, "+
		"wait for the leases to expire, or pass --force", strings.Join(live, ", "), more)
}

// printFence writes what a fence did and when nodes can issue again.
func printFence(e env, req allocator.FenceRequest, res allocator.FenceResult) {
	fmt.Fprintf(e.stdout, "fenced the store: generation %d at %s (owner %s, request ID %s)\n",
		res.Generation, timeText(res.At), req.Owner, req.RequestID)
	fmt.Fprintf(e.stdout, "\nworker leases: %d, every ceiling at least %s\n", len(res.Leases), msText(res.CeilingMS))
	if len(res.Leases) > 0 {
		tw := newTable(e.stdout, "DC\tWORKER\tHOLDER BEFORE\tVERSION\tCEILING BEFORE\tCEILING")
		for _, l := range res.Leases {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\n", l.Lease.DatacenterID, l.Lease.WorkerID, orDash(l.PrevHolder),
				l.Lease.FencingVersion, msText(l.PrevCeilingMS), msText(l.Lease.CeilingMS))
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(e.stdout, "\nnamespaces: %d, each counter up by %d\n", len(res.Namespaces), req.Gap)
	if len(res.Namespaces) > 0 {
		tw := newTable(e.stdout, "NAME\tMAX ID BEFORE\tMAX ID\tREVISION\tNOTE")
		for _, n := range res.Namespaces {
			note := "-"
			switch {
			case n.Exhausted():
				note = "exhausted: at its limit " + strconv.FormatInt(n.MaxIDLimit, 10)
			case n.Deleted:
				note = "deleted"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", n.Name, n.PrevMaxID, n.MaxID, n.Version, note)
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(e.stdout, "\nnodes may start now; they issue Snowflake IDs once their clock passes %s\n",
		timeText(time.UnixMilli(res.CeilingMS)))
}
