package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/peerimport"
	"github.com/idgen-project/idgen/internal/stores"
)

const importHelp = `Create one namespace for each row of Meituan Leaf's leaf_alloc table (leaf)
or didi tinyid's tiny_id_info table (tinyid), named after its biz_tag or
biz_type, whose first ID is strictly above the row's max_id: every ID the
source handed out stays behind. The step is the row's step. The source is
only read. See docs/migration.md.

Every row is checked before anything is written: a name idgen cannot use, or
a tinyid row with a delta above 1 (without --accept-delta), stops the import
with nothing changed. A namespace that exists already is left as it is when
it continues above the row; when it does not, the import stops with nothing
changed, unless --raise-existing.

Stop the source from handing out new ranges first (or give --gap): a range
it fetches after the import read its table may overlap the namespace.

Flags (environment variable in brackets):
  --from DSN          the source database, postgres:// or mysql:// [IDGEN_FROM]
  --table NAME        the source table, schema.table allowed (default leaf_alloc
                      or tiny_id_info)
  --gap N             start N IDs further above each max_id (default 0)
  --dry-run           print what would be done, change nothing
  --raise-existing    advance the counter of an existing namespace that does not
                      continue above its row, by a range thrown away; its
                      settings stay
  --accept-delta      import tinyid rows with a delta above 1; import every
                      database that holds such a biz_type before serving it
  --dsn DSN           idgen's database [IDGEN_DSN] (default sqlite:idgen.db)
`

// namespacesImport is idgen namespaces import, from Leaf or tinyid.
func namespacesImport(ctx context.Context, args []string, e env) (err error) {
	const cmd = "namespaces import"
	f := newAdminFlags(cmd)
	dsn := f.dsn
	fs := f.fs
	from := fs.String("from", "", "")
	table := fs.String("table", "", "")
	gap := fs.Int64("gap", 0, "")
	dryRun := fs.Bool("dry-run", false, "")
	raise := fs.Bool("raise-existing", false, "")
	acceptDelta := fs.Bool("accept-delta", false, "")
	for _, name := range []string{"table", "gap", "dry-run", "raise-existing", "accept-delta"} {
		f.noEnv[name] = true // settings of one import, not of the environment
	}
	pos, err := f.parse(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(*dsn, dburl.Secrets(*from)...)
	defer func() { err = sc.err(err) }()
	if err := oneArg(cmd, pos, "the source: leaf or tinyid", "import takes one source, leaf or tinyid"); err != nil {
		return err
	}
	switch {
	case *from == "":
		return usagef(cmd, "missing --from: the source database, postgres:// or mysql://")
	case *gap < 0:
		return usagef(cmd, "invalid --gap %d: want 0 or more", *gap)
	}
	src, err := peerimport.ParseSource(pos[0])
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	if d := dburl.DialectOf(*from); d != dburl.Postgres && d != dburl.MySQL {
		return usagef(cmd, "invalid --from: want a postgres:// or mysql:// URL (the DSN is not shown: it may hold a password)")
	}
	if err := dburl.Check(*from); err != nil {
		return usagef(cmd, "invalid --from (not shown): %v", err)
	}
	if err := dburl.Check(*dsn); err != nil {
		return usagef(cmd, "invalid --dsn (not shown): %v", err)
	}

	db, err := peerimport.Open(ctx, *from)
	if err != nil {
		return fmt.Errorf("open the source: %w", err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	rows, err := peerimport.Read(ctx, db, src, *table)
	if errors.Is(err, peerimport.ErrInvalidTable) {
		return usagef(cmd, "invalid --table: %v", err)
	}
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintf(e.stdout, "the source table has no rows: nothing to import\n")
		return nil
	}
	items, err := peerimport.Plan(src, rows, peerimport.Options{Gap: *gap, AcceptDelta: *acceptDelta})
	if err != nil {
		return err
	}

	return withStore(ctx, cmd, *dsn, func(store stores.Store) error {
		steps, err := peerimport.Check(ctx, store, items, *raise)
		if steps != nil {
			if perr := printImport(e, steps, *dryRun); perr != nil {
				return perr
			}
		}
		if err != nil {
			return withSchemaHint(ctx, store, err)
		}
		if *dryRun {
			fmt.Fprintln(e.stdout, "dry run: nothing was changed")
			return nil
		}
		done, err := peerimport.Apply(ctx, store, steps)
		if err != nil {
			return fmt.Errorf("%w (%d of %d steps done before it; running the import again is safe)", err, done, len(steps))
		}
		counts := map[peerimport.Action]int{}
		for _, st := range steps {
			counts[st.Action]++
		}
		fmt.Fprintf(e.stdout, "imported %d rows: %d namespaces created, %d raised, %d left as they were\n",
			len(steps), counts[peerimport.Create], counts[peerimport.Raise], counts[peerimport.Keep])
		return nil
	})
}

// printImport writes what the import does (or would do) per row, and notes.
func printImport(e env, steps []peerimport.Step, dry bool) error {
	verb := map[peerimport.Action]string{
		peerimport.Create:   "create",
		peerimport.Keep:     "keep (already above)",
		peerimport.Raise:    "raise",
		peerimport.Conflict: "CONFLICT (exists below)",
	}
	if dry {
		verb[peerimport.Create] = "would create"
		verb[peerimport.Raise] = "would raise"
	}
	tw := newTable(e.stdout, "NAME\tSOURCE MAX_ID\tFIRST ID\tSTEP\tACTION\tNOTES")
	for _, st := range steps {
		first := st.Start()
		if st.Action == peerimport.Keep {
			first = st.Existing.MaxID + 1
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", st.Spec.Name, st.Row.MaxID, first, *st.Spec.Step,
			verb[st.Action], strings.Join(st.Notes, "; "))
	}
	return tw.Flush()
}
