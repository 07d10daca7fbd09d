package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/snowflake"
)

const auditHelp = `Name the holder that issued a Snowflake ID: from the ID's datacenter, worker
and timestamp, the holder of that worker ID whose span of timestamps (from one
above the ceiling its claim found to the ceiling it left) holds the ID's
millisecond, with its fencing version and lease window. Fencing makes the
spans of successive holders disjoint, so at most one holder can have issued
the ID. The store's lease events are read first, then the ClickHouse audit
table when --audit-sink names one (the store's events may have been pruned).
Without a recorded span the answer is "no holder recorded": idgen does not
guess.

Flags (environment variable in brackets):
  --layout T/D/W/S   the node's layout or preset (default 41/5/5/12)
  --epoch TIME       the layout's epoch, RFC 3339 (default 2026-01-01T00:00:00Z)
  --format FORMAT    the ID's form: decimal, base32, base62, hex (default: any)
  --audit-sink DSN   the ClickHouse audit table, clickhouse://… [IDGEN_AUDIT_SINK]
  --dsn DSN          database [IDGEN_DSN] (default sqlite:idgen.db)
`

func runAudit(ctx context.Context, args []string, e env) error {
	if len(args) > 0 {
		switch args[0] {
		case "who":
			return auditWho(ctx, args[1:], e)
		case "-h", "-help", "--help":
			fmt.Fprint(e.stdout, usageOf("audit"))
			return nil
		}
	}
	return usagef("audit", "want who ID, e.g. idgen audit who 123456789012345678")
}

// auditWho is idgen audit who ID.
func auditWho(ctx context.Context, args []string, e env) error {
	const cmd = "audit who"
	f := newAdminFlags(cmd)
	bits := defaultLayoutFlag()
	f.fs.Var(&bits, "layout", "")
	epoch := timeFlag{snowflake.DefaultEpoch}
	f.fs.Var(&epoch, "epoch", "")
	var format formatFlag
	f.fs.Var(&format, "format", "")
	sink := f.fs.String("audit-sink", "", "")
	var (
		id     snowflake.ID
		layout snowflake.Layout
		ch     *audit.ClickHouse
	)
	err := adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "ID", "who takes one ID"); err != nil {
			return err
		}
		var err error
		if layout, err = layoutOf(bits, epoch); err != nil {
			return usagef(cmd, "invalid --layout/--epoch: %v", err)
		}
		if id, err = snowflake.DecodeID(pos[0], format.f, layout.Width()); err != nil {
			return usagef(cmd, "invalid ID %q for a %d-bit layout: %s", pos[0], layout.Width(),
				strings.TrimPrefix(err.Error(), snowflake.ErrInvalidID.Error()+": "))
		}
		if *sink != "" {
			if !strings.HasPrefix(*sink, "clickhouse") {
				return usagef(cmd, "invalid --audit-sink %s: only a clickhouse:// sink can be read back", audit.RedactSink(*sink))
			}
			if ch, err = audit.NewClickHouse(*sink, nil); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		return nil
	}, func(store stores.Store) error {
		a, err := audit.Who(ctx, layout, store, ch, int64(id))
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("who issued %d: %w", id, err))
		}
		printWho(e, a)
		return nil
	})
	if err != nil && ch != nil {
		return newScrubber(*sink).err(err)
	}
	return err
}

// printWho prints an answer of audit.Who.
func printWho(e env, a audit.Answer) {
	tw := newTable(e.stdout, "id\t"+fmt.Sprint(a.ID))
	fmt.Fprintf(tw, "time\t%s\n", msText(a.TimestampMS))
	fmt.Fprintf(tw, "worker\t%d/%d (datacenter/worker)\n", a.Datacenter, a.Worker)
	if !a.Found {
		fmt.Fprintf(tw, "holder\t%s\n", a.Note)
		_ = tw.Flush()
		return
	}
	h := a.Holding
	fmt.Fprintf(tw, "holder\t%s\n", h.Holder)
	fmt.Fprintf(tw, "owner\t%s\n", orDash(h.Owner))
	fmt.Fprintf(tw, "fencing_version\t%d\n", h.FencingVersion)
	fmt.Fprintf(tw, "timestamps\t%s to %s\n", msText(h.FloorMS), msText(h.CeilingMS))
	ended := "still held (no end recorded)"
	if !h.EndedAt.IsZero() {
		ended = timeText(h.EndedAt) + " (" + h.EndedBy + ")"
	}
	fmt.Fprintf(tw, "lease window\t%s to %s\n", timeText(h.AcquiredAt), ended)
	fmt.Fprintf(tw, "source\t%s\n", a.Source)
	if a.Note != "" {
		fmt.Fprintf(tw, "note\t%s\n", a.Note)
	}
	_ = tw.Flush()
}
