package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
)

const migrateUsage = `Usage: idgen migrate up|down|status [--dsn DSN]

Manage the database schema (idgen serve applies it at start unless --migrate=false).

  up       apply every pending migration
  down     roll back the most recent migration (drops the tables it created)
  status   list the migrations and when each was applied

Flags (environment variable in brackets):
  --dsn DSN    database [IDGEN_DSN] (default sqlite:idgen.db)
`

const leasesUsage = `Usage: idgen leases [--all] [--dsn DSN]

Print the worker lease table: one row per worker ID ever claimed, with its
holder ("-" when free), fencing version, database times of the claim, last
heartbeat, expiry and release, and the timestamp ceiling of the holder.
Times are database time, UTC.

Flags (environment variable in brackets):
  --all        also list the worker IDs never claimed
  --dsn DSN    database [IDGEN_DSN] (default sqlite:idgen.db)
`

const namespacesUsage = `Usage: idgen namespaces list [--dsn DSN]
       idgen namespaces create NAME [flags]

List the segment namespaces, or create one. A namespace hands out dense,
sequential IDs (GET /ids?namespace=NAME). NAME is 1 to 64 characters of a-z,
0-9, '_', '.' and '-', starting with a letter or digit.

Flags of create:
  --start N            first ID that will be handed out (default 1)
  --step N             IDs per range fetched from the database (default 1000, or
                       --min-step / --max-step when 1000 lies outside them)
  --min-step N         lower bound of the dynamic step (default the step)
  --max-step N         upper bound of the dynamic step (default 100 x the step, at most
                       1073741824)
  --mode MODE          buffered (ranges pre-fetched, fast) or strict (every request is its
                       own fetch: gap-free and increasing across nodes) (default buffered)
  --fallback F         none, or snowflake: serve Snowflake IDs while the database is
                       unreachable (default none)
  --description TEXT   free text shown in listings

Flags of both (environment variable in brackets):
  --dsn DSN            database [IDGEN_DSN] (default sqlite:idgen.db)
`

// Defaults and limits of idgen namespaces create, the same as those of
// POST /admin/namespaces.
const (
	defaultStep   = 1000
	maxStepGrowth = 100     // max-step defaults to step × maxStepGrowth …
	maxStepLimit  = 1 << 30 // … capped here, the largest step, min-step or max-step
)

// dsnFlag adds --dsn to f.
func dsnFlag(f *flagSet) *string {
	return f.fs.String("dsn", "sqlite:idgen.db", "")
}

// openStore opens the store dsn names for an administrative command.
func openStore(ctx context.Context, cmd, dsn string) (stores.Store, error) {
	if stores.Dialect(dsn) == "" {
		return nil, usagef(cmd, "invalid --dsn: want postgres://, mysql:// or sqlite: (the DSN is not shown: it may hold a password)")
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	s, err := stores.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err) // the store names the (redacted) DSN
	}
	return s, nil
}

// migrateUp applies the pending migrations of store and returns how many.
func migrateUp(ctx context.Context, store stores.Store) (int, error) {
	p, err := store.Migrations()
	if err != nil {
		return 0, err
	}
	defer p.Close()
	res, err := p.Up(ctx)
	return len(res), err
}

// withSchemaHint adds a hint to err, the failure of a command on store, when
// the store's schema has pending migrations: the likely cause.
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

// runMigrate is idgen migrate.
func runMigrate(ctx context.Context, args []string, e env) (err error) {
	const cmd = "migrate"
	f := newFlagSet(cmd, migrateUsage)
	dsn := dsnFlag(f)
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*dsn)
	defer func() { err = sc.err(err) }()
	if len(pos) != 1 {
		return usagef(cmd, "want one of up, down or status")
	}
	sub := pos[0]
	if sub != "up" && sub != "down" && sub != "status" {
		return usagef(cmd, "unknown migrate command %q (want up, down or status)", sub)
	}
	store, err := openStore(ctx, cmd, *dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
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
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tMIGRATION")
		for _, s := range st {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, timeText(s.AppliedAt), s.Source.Path)
		}
		return tw.Flush()
	}
	return nil
}

// runLeases is idgen leases.
func runLeases(ctx context.Context, args []string, e env) (err error) {
	const cmd = "leases"
	f := newFlagSet(cmd, leasesUsage)
	dsn := dsnFlag(f)
	all := f.fs.Bool("all", false, "")
	f.noEnv["all"] = true
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*dsn)
	defer func() { err = sc.err(err) }()
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q (leases takes flags only)", pos[0])
	}
	store, err := openStore(ctx, cmd, *dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	leases, err := store.ListLeases(ctx)
	if err != nil {
		return withSchemaHint(ctx, store, fmt.Errorf("list leases: %w", err))
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DC\tWORKER\tHOLDER\tVERSION\tACQUIRED\tHEARTBEAT\tEXPIRES\tRELEASED\tCEILING")
	hidden := 0
	for _, l := range leases {
		if l.FencingVersion == 0 && !*all {
			hidden++ // never claimed
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.DatacenterID, l.WorkerID,
			orDash(l.Holder), l.FencingVersion, timeText(l.AcquiredAt), timeText(l.HeartbeatAt),
			timeText(l.ExpiresAt), timeText(l.ReleasedAt), msText(l.CeilingMS))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(e.stdout, "(%d worker IDs never claimed are not shown; --all lists them)\n", hidden)
	}
	return nil
}

// runNamespaces is idgen namespaces.
func runNamespaces(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return usagef("namespaces", "want list or create")
	}
	switch args[0] {
	case "list":
		return namespacesList(ctx, args[1:], e)
	case "create":
		return namespacesCreate(ctx, args[1:], e)
	case "-h", "-help", "--help":
		fmt.Fprint(e.stdout, namespacesUsage)
		return nil
	}
	return usagef("namespaces", "unknown namespaces command %q (want list or create)", args[0])
}

func namespacesList(ctx context.Context, args []string, e env) (err error) {
	const cmd = "namespaces list"
	f := newFlagSet(cmd, namespacesUsage)
	dsn := dsnFlag(f)
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*dsn)
	defer func() { err = sc.err(err) }()
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q (list takes flags only)", pos[0])
	}
	store, err := openStore(ctx, cmd, *dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	nss, err := store.ListNamespaces(ctx)
	if err != nil {
		return withSchemaHint(ctx, store, fmt.Errorf("list namespaces: %w", err))
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNEXT ID\tSTEP\tMIN STEP\tMAX STEP\tMODE\tFALLBACK\tVERSION\tUPDATED\tDESCRIPTION")
	for _, ns := range nss {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", ns.Name, ns.MaxID+1, ns.Step,
			ns.MinStep, ns.MaxStep, ns.Mode, ns.Fallback, ns.Version, timeText(ns.UpdatedAt), ns.Description)
	}
	return tw.Flush()
}

func namespacesCreate(ctx context.Context, args []string, e env) (err error) {
	const cmd = "namespaces create"
	f := newFlagSet(cmd, namespacesUsage)
	dsn := dsnFlag(f)
	fs := f.fs
	start := fs.Int64("start", 1, "")
	step := fs.Int64("step", defaultStep, "")
	minStep := fs.Int64("min-step", 0, "")
	maxStep := fs.Int64("max-step", 0, "")
	mode := choiceFlag{string(allocator.ModeBuffered), []string{string(allocator.ModeBuffered), string(allocator.ModeStrict)}}
	fs.Var(&mode, "mode", "")
	fallback := choiceFlag{string(allocator.FallbackNone), []string{string(allocator.FallbackNone), string(allocator.FallbackSnowflake)}}
	fs.Var(&fallback, "fallback", "")
	description := fs.String("description", "", "")
	for _, name := range []string{"start", "step", "min-step", "max-step", "mode", "fallback", "description"} {
		f.noEnv[name] = true // settings of one namespace, not of the environment
	}
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*dsn)
	defer func() { err = sc.err(err) }()
	switch {
	case len(pos) == 0:
		return usagef(cmd, "missing namespace NAME")
	case len(pos) > 1:
		return usagef(cmd, "unexpected argument %q (create takes one NAME)", pos[1])
	}
	// The defaults are those of POST /admin/namespaces: without --step, the
	// step is 1000 moved into --min-step..--max-step when those are given;
	// min-step defaults to the step, max-step to 100 × step (at most 2^30).
	ns := allocator.Namespace{
		Name:        pos[0],
		MaxID:       *start - 1,
		Step:        *step,
		Mode:        allocator.Mode(mode.v),
		Fallback:    allocator.Fallback(fallback.v),
		Description: *description,
	}
	if !f.isSet("step") {
		if f.isSet("min-step") && *minStep > ns.Step {
			ns.Step = *minStep
		}
		if f.isSet("max-step") && *maxStep < ns.Step {
			ns.Step = *maxStep
		}
	}
	ns.MinStep, ns.MaxStep = ns.Step, max(ns.Step, min(ns.Step*maxStepGrowth, maxStepLimit))
	if f.isSet("min-step") {
		ns.MinStep = *minStep
	}
	if f.isSet("max-step") {
		ns.MaxStep = *maxStep
	}
	if err := allocator.ValidNamespace(ns.Name); err != nil {
		return usagef(cmd, "invalid NAME %q: want 1 to 64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", ns.Name)
	}
	switch {
	case *start < 1:
		return usagef(cmd, "invalid --start %d: want 1 or more", *start)
	case ns.Step < 1 || ns.Step > maxStepLimit:
		return usagef(cmd, "invalid --step %d: want 1 to %d", ns.Step, maxStepLimit)
	case ns.MinStep < 1 || ns.MinStep > ns.Step:
		return usagef(cmd, "invalid --min-step %d: want 1 to the step, %d", ns.MinStep, ns.Step)
	case ns.MaxStep < ns.Step || ns.MaxStep > maxStepLimit:
		return usagef(cmd, "invalid --max-step %d: want the step, %d, to %d", ns.MaxStep, ns.Step, maxStepLimit)
	}
	store, err := openStore(ctx, cmd, *dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	got, err := store.CreateNamespace(ctx, ns)
	if err != nil {
		return withSchemaHint(ctx, store, fmt.Errorf("create namespace %q: %w", ns.Name, err))
	}
	fmt.Fprintf(e.stdout, "created namespace %s: first ID %d, step %d (%d to %d), mode %s, fallback %s\n",
		got.Name, got.MaxID+1, got.Step, got.MinStep, got.MaxStep, got.Mode, got.Fallback)
	return nil
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
