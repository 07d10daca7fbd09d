package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

const parseHelp = `Decompose a Snowflake ID into its time, datacenter, worker and sequence.
Works offline; give the layout and epoch the IDs were made with. timestamp_ms
is Unix milliseconds (as in GET /ids/{id}); since_epoch_ms is the ID's own
time field, milliseconds since the layout's epoch.

Flags (environment variable in brackets):
  --layout T/D/W/S   bit widths of time/datacenter/worker/sequence [IDGEN_LAYOUT]
                     (default 41/5/5/12)
  --epoch TIME       instant timestamp 0 stands for, RFC 3339 [IDGEN_EPOCH]
                     (default 2026-01-01T00:00:00Z)
`

const versionHelp = `Print idgen's version, the commit it was built from and the Go version.
`

// runParse is idgen parse.
func runParse(_ context.Context, args []string, e env) error {
	const cmd = "parse"
	f := newSettings(cmd)
	bits := defaultLayoutFlag()
	f.fs.Var(&bits, "layout", "")
	epoch := timeFlag{snowflake.DefaultEpoch}
	f.fs.Var(&epoch, "epoch", "")
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
	id, err := snowflake.ParseID(pos[0])
	if err != nil {
		return usagef(cmd, "invalid ID %q: want a non-negative 63-bit decimal integer", pos[0])
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
	fmt.Fprintf(tw, "layout\t%s\n", layout)
	return tw.Flush()
}

// runVersion is idgen version.
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

// linkVersion is set by go build -ldflags "-X main.linkVersion=…"
// (deploy/Dockerfile does) and then wins over the build information.
var linkVersion string

// versionString is idgen's version as the Go toolchain recorded it in the
// binary: the module version (a tag, or a pseudo-version from the commit),
// else the VCS revision, else "devel".
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
