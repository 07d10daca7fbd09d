package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

const parseHelp = `Decompose a Snowflake ID into its time, datacenter, worker and sequence.
Works offline; give the layout and epoch the IDs were made with. The ID may
be in any of its forms: decimal, base32, base62 or hex (digits only read as
decimal; name the form with --format to read a base32, base62 or hex form
that holds digits only). timestamp_ms is Unix milliseconds (as in
GET /ids/{id}); since_epoch_ms is the ID's own time field, milliseconds
since the layout's epoch. The ID is printed in every form.

Flags (environment variable in brackets):
  --layout T/D/W/S   bit widths of time/datacenter/worker/sequence, or a
                     preset such as js53 [IDGEN_LAYOUT] (default 41/5/5/12)
  --epoch TIME       instant timestamp 0 stands for, RFC 3339 [IDGEN_EPOCH]
                     (default 2026-01-01T00:00:00Z)
  --format FORMAT    the form of ID: decimal, base32, base62 or hex
                     (default: found from the ID)
`

const composeHelp = `Print the smallest and the largest Snowflake ID of the millisecond of TIME:
datacenter, worker and sequence zero, and at their maximum. The IDs made from
T1 to T2 (both milliseconds included) lie from the first of T1 to the last
of T2, a key range a database can scan. Works offline; give the layout and
epoch the IDs were made with (GET /ids/compose asks a node instead).

Flags (environment variable in brackets):
  --time TIME        the instant, RFC 3339 (required)
  --layout T/D/W/S   bit widths of time/datacenter/worker/sequence, or a
                     preset such as js53 [IDGEN_LAYOUT] (default 41/5/5/12)
  --epoch TIME       instant timestamp 0 stands for, RFC 3339 [IDGEN_EPOCH]
                     (default 2026-01-01T00:00:00Z)
  --format FORMAT    the form of first and last: decimal, base32, base62 or
                     hex (default decimal)
`

const versionHelp = `Print idgen's version, the commit it was built from and the Go version.
`

func runParse(_ context.Context, args []string, e env) error {
	const cmd = "parse"
	f := newSettings(cmd)
	bits := defaultLayoutFlag()
	f.fs.Var(&bits, "layout", "")
	epoch := timeFlag{snowflake.DefaultEpoch}
	f.fs.Var(&epoch, "epoch", "")
	var format formatFlag
	f.fs.Var(&format, "format", "")
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	if err := oneArg(cmd, pos, "ID", "parse takes one ID"); err != nil {
		return err
	}
	layout, err := layoutOf(bits, epoch)
	if err != nil {
		return usagef(cmd, "invalid --layout/--epoch: %v", err)
	}
	id, err := snowflake.DecodeID(pos[0], format.f, layout.Width())
	if err != nil {
		return usagef(cmd, "invalid ID %q for a %d-bit layout: %s", pos[0], layout.Width(), strings.TrimPrefix(err.Error(), snowflake.ErrInvalidID.Error()+": "))
	}
	p := layout.Decompose(id)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%d\n", id)
	fmt.Fprintf(tw, "time\t%s\n", p.Time.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "timestamp_ms\t%d\n", p.Time.UnixMilli()) // Unix ms, as in GET /ids/{id}
	fmt.Fprintf(tw, "since_epoch_ms\t%d\n", p.Timestamp)      // the ID's time field
	fmt.Fprintf(tw, "datacenter\t%d\n", p.Datacenter)
	fmt.Fprintf(tw, "worker\t%d\n", p.Worker)
	fmt.Fprintf(tw, "sequence\t%d\n", p.Sequence)
	for _, f := range []snowflake.Format{snowflake.FormatBase32, snowflake.FormatBase62, snowflake.FormatHex} {
		fmt.Fprintf(tw, "%s\t%s\n", f, snowflake.EncodeID(id, f, layout.Width()))
	}
	fmt.Fprintf(tw, "layout\t%s\n", layout)
	return tw.Flush()
}

func runCompose(_ context.Context, args []string, e env) error {
	const cmd = "compose"
	f := newSettings(cmd)
	bits := defaultLayoutFlag()
	f.fs.Var(&bits, "layout", "")
	epoch := timeFlag{snowflake.DefaultEpoch}
	f.fs.Var(&epoch, "epoch", "")
	var at timeFlag
	f.fs.Var(&at, "time", "")
	var format formatFlag
	f.fs.Var(&format, "format", "")
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	if err := noArgs(cmd, pos, "compose takes --time"); err != nil {
		return err
	}
	if at.t.IsZero() {
		return usagef(cmd, "missing --time, an RFC 3339 instant such as 2026-01-01T00:00:00.000Z")
	}
	layout, err := layoutOf(bits, epoch)
	if err != nil {
		return usagef(cmd, "invalid --layout/--epoch: %v", err)
	}
	first, last, err := layout.Bounds(at.t)
	if err != nil {
		return usagef(cmd, "invalid --time: %s", strings.TrimPrefix(err.Error(), snowflake.ErrOutOfRange.Error()+": "))
	}
	w := layout.Width()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "time\t%s\n", time.UnixMilli(at.t.UnixMilli()).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	fmt.Fprintf(tw, "timestamp_ms\t%d\n", at.t.UnixMilli())
	fmt.Fprintf(tw, "first\t%s\n", snowflake.EncodeID(first, format.f, w))
	fmt.Fprintf(tw, "last\t%s\n", snowflake.EncodeID(last, format.f, w))
	fmt.Fprintf(tw, "layout\t%s\n", layout)
	return tw.Flush()
}

func runVersion(_ context.Context, args []string, e env) error {
	f := newSettings("version")
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	if err := noArgs("version", pos, "version takes none"); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "idgen %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// linkVersion is set with -ldflags "-X main.linkVersion=…" and wins.
var linkVersion string

// versionString is the module version, else the VCS revision, else "devel".
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := cmp.Or(linkVersion, info.Main.Version)
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if v == "" || v == "(devel)" {
		if rev == "" {
			return "devel"
		}
		v = "devel-" + rev[:min(12, len(rev))]
		if modified == "true" {
			v += "-dirty"
		}
	}
	return v
}
