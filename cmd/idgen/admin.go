package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/snowflake"
)

const migrateHelp = `Manage the database schema (idgen serve applies it at start unless --migrate=false).

  up       apply every pending migration
  down     roll back the most recent migration (drops the tables it created)
  status   list the migrations and when each was applied

Flags (environment variable in brackets):
  --dsn DSN    database [IDGEN_DSN] (default sqlite:idgen.db)
`

const leasesHelp = `Print the worker lease table: one row per worker ID ever claimed, with its
holder ("-" when free), the caller a remote holder holds it for (OWNER),
fencing version, database times of the claim, last heartbeat, expiry and
release, and the timestamp ceiling of the holder. Times are database time,
UTC. 'idgen leases list' is the same.

  events   print the lease events, the table's audit trail (idgen leases events --help)
  evict    take a lease from its holder (idgen leases evict --help)

Flags (environment variable in brackets):
  --all        also list the worker IDs never claimed
  --dsn DSN    database [IDGEN_DSN] (default sqlite:idgen.db)
`

const namespacesHelp = `List the segment namespaces, create one, delete one, or import them from Leaf
or tinyid (idgen namespaces import --help). A namespace hands out dense,
sequential IDs (GET /ids?namespace=NAME). NAME is 1 to 64 characters of a-z,
0-9, '_', '.' and '-', starting with a letter or digit.

A deleted namespace no longer exists for idgen (GET /ids answers 404), but its
row stays behind with its counter: creating it again needs a --start above the
last ID it handed out, which delete prints. Nodes that fetched ranges of it
before may still hand out the rest of them, all at or below that ID. delete
logs who deleted it (cli:<user>) to standard error.

Flags of create:
  --start N            first ID that will be handed out (default 1)
  --step N             IDs per range fetched from the database (default 1000, or
                       --min-step / --max-step when 1000 lies outside them)
  --min-step N         lower bound of the dynamic step (default the step)
  --max-step N         upper bound of the dynamic step (default 100 x the step, at most
                       1073741824)
  --mode MODE          buffered (ranges pre-fetched, fast) or strict (fetched when asked
                       for: gap-free and increasing across nodes) (default buffered)
  --fallback F         none, or snowflake: serve Snowflake IDs while the database is
                       unreachable (default none). The namespace's counter then stops
                       below the smallest Snowflake ID of now (its max_id_limit)
  --description TEXT   free text shown in listings (at most 1024 bytes)
  --stride K           interleave with the namespace of the same name in other regions'
                       databases: slot n of the counter is handed out as the ID n*K+R,
                       and --start counts slots (1 to 65536, default 1; docs/regions.md)
  --offset R           this region's offset R of the interleave, 0 to K-1 (default 0)
  --layout T/D/W/S     with --fallback snowflake: the Snowflake layout, as for idgen serve
                       [IDGEN_LAYOUT] (default 41/5/5/12); the database records it if it
                       has none yet, and refuses another
  --epoch TIME         with --fallback snowflake: the layout's epoch, as for idgen serve
                       [IDGEN_EPOCH] (default 2026-01-01T00:00:00Z)

Flags of every command (environment variable in brackets):
  --dsn DSN            database [IDGEN_DSN] (default sqlite:idgen.db)
`

// newAdminFlags returns the flag set of admin command cmd, with --dsn.
func newAdminFlags(cmd string) *settings {
	f := newSettings(cmd)
	f.dsn = f.fs.String("dsn", "sqlite:idgen.db", "")
	return f
}

// openStore opens the store dsn names for an administrative command.
func openStore(ctx context.Context, cmd, dsn string) (stores.Store, error) {
	if stores.Dialect(dsn) == "" {
		return nil, usagef(cmd, "invalid --dsn: want postgres://, mysql://, sqlite: or etcd:// (the DSN is not shown: it may hold a password)")
	}
	if err := dburl.Check(dsn); err != nil {
		return nil, usagef(cmd, "invalid --dsn (not shown): %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, app.DefaultOpenTimeout)
	defer cancel()
	s, err := stores.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err) // the store names the (redacted) DSN
	}
	return s, nil
}

// withStore runs do on the store dsn names and closes it, joining errors.
func withStore(ctx context.Context, cmd, dsn string, do func(stores.Store) error) (err error) {
	store, err := openStore(ctx, cmd, dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	return do(store)
}

// adminRun parses args, lets prepare check the positional arguments and
// flags before the database is touched (a bad command line exits 2), then
// runs do on --dsn's store. DSN secrets are scrubbed from errors.
func adminRun(ctx context.Context, f *settings, args []string, e env, prepare func(pos []string) error, do func(stores.Store) error) error {
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*f.dsn)
	if err := prepare(pos); err != nil {
		return sc.err(err)
	}
	return sc.err(withStore(ctx, f.cmd, *f.dsn, do))
}

// flagsOnly is the prepare of a command without positional arguments.
func flagsOnly(cmd, takes string) func(pos []string) error {
	return func(pos []string) error { return noArgs(cmd, pos, takes) }
}

// newTable returns a tabwriter with the header line; the caller flushes.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// withSchemaHint adds a hint to err when store has pending migrations.
func withSchemaHint(ctx context.Context, store stores.Store, err error) error {
	p, perr := store.Migrations()
	if perr != nil {
		return err
	}
	defer p.Close()
	st, perr := p.Status(ctx)
	if perr != nil {
		return err
	}
	pending := 0
	for _, s := range st {
		if s.State == goose.StatePending {
			pending++
		}
	}
	if pending == 0 {
		return err
	}
	return fmt.Errorf("%w (the database has %d pending migrations: run 'idgen migrate up')", err, pending)
}

func runMigrate(ctx context.Context, args []string, e env) error {
	const cmd = "migrate"
	f := newAdminFlags(cmd)
	var sub string
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if len(pos) != 1 {
			return usagef(cmd, "want one of up, down or status")
		}
		sub = pos[0]
		if sub != "up" && sub != "down" && sub != "status" {
			return usagef(cmd, "unknown migrate command %q (want up, down or status)", sub)
		}
		return nil
	}, func(store stores.Store) error {
		p, err := store.Migrations()
		if err != nil {
			return err
		}
		defer p.Close()
		switch sub {
		case "up":
			res, err := p.Up(ctx)
			for _, r := range res {
				fmt.Fprintf(e.stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(time.Millisecond))
			}
			if err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			if len(res) == 0 {
				v, err := p.GetDBVersion(ctx)
				if err != nil {
					return fmt.Errorf("migrate up: %w", err)
				}
				fmt.Fprintf(e.stdout, "database is up to date at version %d\n", v)
			}
		case "down":
			r, err := p.Down(ctx)
			if errors.Is(err, goose.ErrNoNextVersion) {
				fmt.Fprintln(e.stdout, "no migration to roll back")
				return nil
			}
			if err != nil {
				return fmt.Errorf("migrate down: %w", err)
			}
			fmt.Fprintf(e.stdout, "rolled back %s (%s)\n", r.Source.Path, r.Duration.Round(time.Millisecond))
		case "status":
			st, err := p.Status(ctx)
			if err != nil {
				return fmt.Errorf("migrate status: %w", err)
			}
			tw := newTable(e.stdout, "VERSION\tSTATE\tAPPLIED AT\tMIGRATION")
			for _, s := range st {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, timeText(s.AppliedAt), s.Source.Path)
			}
			return tw.Flush()
		}
		return nil
	})
}

// runLeases is idgen leases: the table, or one of its subcommands.
func runLeases(ctx context.Context, args []string, e env) error {
	subs := []subcommand{{"list", leasesList}, {"events", leasesEvents}, {"evict", leasesEvict}}
	if len(args) > 0 {
		if s, ok := findSub(subs, args[0]); ok {
			return s.run(ctx, args[1:], e)
		}
	}
	return leasesList(ctx, args, e) // flags only: the table
}

// leasesList is idgen leases [list].
func leasesList(ctx context.Context, args []string, e env) error {
	const cmd = "leases"
	f := newAdminFlags(cmd)
	all := f.fs.Bool("all", false, "")
	f.noEnv["all"] = true
	return adminRun(ctx, f, args, e, flagsOnly(cmd, "want list, events or evict, or flags only"), func(store stores.Store) error {
		leases, err := store.ListLeases(ctx)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("list leases: %w", err))
		}
		tw := newTable(e.stdout, "DC\tWORKER\tHOLDER\tOWNER\tVERSION\tACQUIRED\tHEARTBEAT\tEXPIRES\tRELEASED\tCEILING")
		hidden := 0
		for _, l := range leases {
			if l.FencingVersion == 0 && !*all {
				hidden++ // never claimed
				continue
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.DatacenterID, l.WorkerID,
				orDash(l.Holder), orDash(l.Owner), l.FencingVersion, timeText(l.AcquiredAt), timeText(l.HeartbeatAt),
				timeText(l.ExpiresAt), timeText(l.ReleasedAt), msText(l.CeilingMS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if hidden > 0 {
			fmt.Fprintf(e.stdout, "(%d worker IDs never claimed are not shown; --all lists them)\n", hidden)
		}
		return nil
	})
}

func runNamespaces(ctx context.Context, args []string, e env) error {
	return runSub(ctx, "namespaces", args, e, []subcommand{
		{"list", namespacesList},
		{"create", namespacesCreate},
		{"delete", namespacesDelete},
		{"import", namespacesImport}, // import.go
	})
}

func namespacesList(ctx context.Context, args []string, e env) error {
	const cmd = "namespaces list"
	f := newAdminFlags(cmd)
	return adminRun(ctx, f, args, e, flagsOnly(cmd, "list takes flags only"), func(store stores.Store) error {
		nss, err := store.ListNamespaces(ctx)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("list namespaces: %w", err))
		}
		tw := newTable(e.stdout, "NAME\tNEXT ID\tLIMIT\tSTEP\tMIN STEP\tMAX STEP\tMODE\tFALLBACK\tVERSION\tUPDATED\tIDS\tDESCRIPTION")
		for _, ns := range nss {
			// NEXT ID and LIMIT as the interleave hands them out.
			next := "-"
			if ns.MaxID < ns.StrideCap() {
				next = strconv.FormatInt(ns.IDOf(ns.MaxID+1), 10)
			}
			limit := "-"
			if ns.MaxIDLimit > 0 {
				limit = strconv.FormatInt(ns.IDOf(min(ns.MaxIDLimit, ns.StrideCap())), 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", ns.Name, next, limit, ns.Step,
				ns.MinStep, ns.MaxStep, ns.Mode, ns.Fallback, ns.Version, timeText(ns.UpdatedAt), interleaveText(ns), ns.Description)
		}
		return tw.Flush()
	})
}

func namespacesCreate(ctx context.Context, args []string, e env) error {
	const cmd = "namespaces create"
	f := newAdminFlags(cmd)
	fs := f.fs
	start := fs.Int64("start", 1, "")
	step := fs.Int64("step", allocator.DefaultStep, "")
	minStep := fs.Int64("min-step", 0, "")
	maxStep := fs.Int64("max-step", 0, "")
	mode := fs.String("mode", string(allocator.ModeBuffered), "")
	fallback := fs.String("fallback", string(allocator.FallbackNone), "")
	description := fs.String("description", "", "")
	stride := fs.Int64("stride", 1, "")
	offset := fs.Int64("offset", 0, "")
	bits, epoch := defaultLayoutFlag(), timeFlag{snowflake.DefaultEpoch}
	fs.Var(&bits, "layout", "")
	fs.Var(&epoch, "epoch", "")
	for _, name := range []string{"start", "step", "min-step", "max-step", "mode", "fallback", "description", "stride", "offset"} {
		f.noEnv[name] = true // settings of one namespace, not of the environment
	}
	var spec allocator.NamespaceSpec
	var layout snowflake.Layout
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "namespace NAME", "create takes one NAME"); err != nil {
			return err
		}
		// allocator.NamespaceSpec's rules, as for POST /admin/namespaces.
		spec = allocator.NamespaceSpec{
			Name:        pos[0],
			Start:       start,
			Mode:        (*allocator.Mode)(mode),
			Fallback:    (*allocator.Fallback)(fallback),
			Description: *description,
			Stride:      stride,
			Offset:      offset,
		}
		if f.isSet("step") {
			spec.Step = step
		}
		if f.isSet("min-step") {
			spec.MinStep = minStep
		}
		if f.isSet("max-step") {
			spec.MaxStep = maxStep
		}
		if err := spec.Validate(); err != nil {
			return settingsUsage(cmd, err)
		}
		if *spec.Fallback == allocator.FallbackSnowflake {
			var err error
			if layout, err = layoutOf(bits, epoch); err != nil {
				return usagef(cmd, "invalid --layout/--epoch: %v", err)
			}
		}
		return nil
	}, func(store stores.Store) error {
		var smallest int64
		if *spec.Fallback == allocator.FallbackSnowflake {
			// The limit uses the layout the database records.
			stored, err := store.EnsureLayout(ctx, layout)
			if err != nil {
				return withSchemaHint(ctx, store, fmt.Errorf("check snowflake layout: %w", err))
			}
			if d := layout.Diff(stored); d != "" {
				return fmt.Errorf("%w: %s; give the --layout and --epoch of idgen serve", allocator.ErrLayoutMismatch, d)
			}
			smallest = int64(layout.SmallestID(snowflake.SystemClock().Now()))
		}
		ns, err := spec.Namespace(smallest)
		if err != nil {
			return settingsUsage(cmd, err)
		}
		got, err := store.CreateNamespace(ctx, ns)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("create namespace %q: %w", ns.Name, err))
		}
		fmt.Fprintf(e.stdout, "created namespace %s: first ID %d, step %d (%d to %d), mode %s, fallback %s",
			got.Name, got.IDOf(got.MaxID+1), got.Step, got.MinStep, got.MaxStep, got.Mode, got.Fallback)
		if got.MaxIDLimit > 0 {
			fmt.Fprintf(e.stdout, ", last ID %d", got.IDOf(min(got.MaxIDLimit, got.StrideCap())))
		}
		if k, r := got.Interleave(); k > 1 {
			fmt.Fprintf(e.stdout, ", IDs %s (stride %d, offset %d)", interleaveText(got), k, r)
		}
		fmt.Fprintln(e.stdout)
		return nil
	})
}

// interleaveText describes slot n's IDs: "n", or "n*K+R" with a stride.
func interleaveText(ns allocator.Namespace) string {
	k, r := ns.Interleave()
	if k == 1 && r == 0 {
		return "n"
	}
	return fmt.Sprintf("n*%d+%d", k, r)
}

// namespacesDelete is idgen namespaces delete NAME: the row becomes a
// tombstone. The deletion is logged to stderr with the operator and a
// request ID, as for the admin API.
func namespacesDelete(ctx context.Context, args []string, e env) error {
	const cmd = "namespaces delete"
	f := newAdminFlags(cmd)
	var name string
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "namespace NAME", "delete takes one NAME"); err != nil {
			return err
		}
		name = pos[0]
		if err := allocator.ValidNamespace(name); err != nil {
			return usagef(cmd, "invalid NAME %q: want 1 to %d characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit",
				name, allocator.MaxNameLen)
		}
		return nil
	}, func(store stores.Store) error {
		owner, requestID := cliOwner(e), cliRequestID()
		ns, err := store.DeleteNamespace(ctx, name)
		if errors.Is(err, allocator.ErrNamespaceNotFound) {
			return fmt.Errorf("namespace %q does not exist or was deleted already", name)
		}
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("delete namespace %q: %w", name, err))
		}
		audit := slog.New(slog.NewTextHandler(e.stderr, nil))
		audit.Info("namespace deleted", "namespace", ns.Name, "max_id", ns.MaxID, "version", ns.Version,
			"caller", owner, "request_id", requestID, "host", hostname())
		fmt.Fprintf(e.stdout, "deleted namespace %s at max_id %d; to create it again, give --start above %d\n",
			ns.Name, ns.MaxID, ns.MaxID)
		return nil
	})
}

// settingsUsage turns an *allocator.SettingsError into a usage error.
func settingsUsage(cmd string, err error) error {
	var se *allocator.SettingsError
	if !errors.As(err, &se) {
		return err
	}
	texts := make([]string, len(se.Problems))
	for i, p := range se.Problems {
		what := "--" + strings.ReplaceAll(p.Setting, "_", "-")
		if p.Setting == "name" {
			what = "NAME"
		}
		texts[i] = fmt.Sprintf("invalid %s %s: want %s", what, p.Value, p.Want)
	}
	return usagef(cmd, "%s", strings.Join(texts, "; "))
}

// timeText formats a database time for the tables, "-" for NULL.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// msText formats Unix milliseconds as a time, "-" for 0.
func msText(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return timeText(time.UnixMilli(ms)) + " (" + strconv.FormatInt(ms, 10) + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
