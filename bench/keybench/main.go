// Command keybench inserts the same number of rows into PostgreSQL three
// times, keyed by idgen's Snowflake IDs (bigint), by UUIDv4 and by UUIDv7
// (uuid), from the same number of concurrent writers, and reports for each
// key the rows per second, the size of the primary key's index and the WAL
// the inserts wrote. It answers the question users ask first about 64-bit
// time-ordered keys: what they save in a B-tree against random and
// time-ordered UUIDs.
//
// It creates a database of its own on the server the DSN names (the DSN's
// own database is only used to create and drop it) and drops it at the
// end. Run it from the bench module:
//
//	go run ./keybench -dsn "$IDGEN_TEST_POSTGRES_DSN" -rows 4000000 -out ../docs/benchmarks/keys
//
// and draw the plot with scripts/bench/plot_keys.py. It is not part of
// `make test`: it takes minutes and wants a server nothing else writes to
// (the WAL figure is the whole server's WAL position, so other writers
// add to it). Each kind's line ends with the load average after it, for
// the machine's other work.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/snowflake"
)

// A key kind: how its column is declared and how a writer makes a batch
// of keys.
type kind struct {
	name    string
	sqlType string
	// newKeys returns a function that fills keys with fresh keys; each
	// writer gets its own.
	newKeys func() (func(keys []any) error, error)
}

func kinds(gen *snowflake.Generator) []kind {
	return []kind{
		{name: "snowflake", sqlType: "bigint", newKeys: func() (func([]any) error, error) {
			buf := make([]snowflake.ID, 0, 1024)
			return func(keys []any) error {
				var err error
				if buf, err = gen.NextN(buf[:0], len(keys)); err != nil {
					return err
				}
				for i, id := range buf {
					keys[i] = int64(id)
				}
				return nil
			}, nil
		}},
		{name: "uuidv7", sqlType: "uuid", newKeys: func() (func([]any) error, error) {
			return func(keys []any) error {
				for i := range keys {
					u, err := uuid.NewV7()
					if err != nil {
						return err
					}
					keys[i] = u
				}
				return nil
			}, nil
		}},
		{name: "uuidv4", sqlType: "uuid", newKeys: func() (func([]any) error, error) {
			return func(keys []any) error {
				for i := range keys {
					u, err := uuid.NewRandom()
					if err != nil {
						return err
					}
					keys[i] = u
				}
				return nil
			}, nil
		}},
	}
}

// result is one kind's run.
type result struct {
	kind    string
	rows    int64
	elapsed time.Duration
	indexB  int64  // pg_relation_size of the primary key's index
	tableB  int64  // pg_relation_size of the table
	walB    int64  // WAL written during the inserts, the whole server's
	load    string // the machine's load average after the inserts
}

func (r result) rowsPerS() float64 { return float64(r.rows) / r.elapsed.Seconds() }

type config struct {
	dsn     string
	rows    int64
	writers int
	batch   int
	out     string
	only    string
}

func main() {
	var c config
	flag.StringVar(&c.dsn, "dsn", os.Getenv("IDGEN_TEST_POSTGRES_DSN"), "PostgreSQL DSN of a superuser (CREATE DATABASE, CHECKPOINT); default $IDGEN_TEST_POSTGRES_DSN")
	flag.Int64Var(&c.rows, "rows", 4_000_000, "rows inserted per key kind")
	flag.IntVar(&c.writers, "writers", 8, "concurrent writers, each on its own connection")
	flag.IntVar(&c.batch, "batch", 1000, "rows per COPY (one transaction)")
	flag.StringVar(&c.out, "out", "", "directory for keys.csv and keys.md (none: print only)")
	flag.StringVar(&c.only, "only", "", "run this key kind only (snowflake, uuidv7, uuidv4)")
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "keybench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "keybench:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.dsn == "":
		return errors.New("no -dsn and no $IDGEN_TEST_POSTGRES_DSN")
	case c.rows < 1:
		return fmt.Errorf("-rows %d: want at least 1", c.rows)
	case c.writers < 1:
		return fmt.Errorf("-writers %d: want at least 1", c.writers)
	case c.batch < 1 || c.batch > 100_000:
		return fmt.Errorf("-batch %d: want 1 to 100000", c.batch)
	}
	return nil
}

// withDatabase returns dsn with its database replaced by db.
func withDatabase(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", errors.New("-dsn is not a URL (postgres://user:password@host:port/db)") // the DSN holds a password: not echoed
	}
	u.Path = "/" + db
	return u.String(), nil
}

func run(ctx context.Context, c config, w io.Writer) error {
	admin, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(context.Background())
	db := fmt.Sprintf("idgen_keybench_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	defer func() {
		// WITH (FORCE): a writer cut short by ^C may still hold a session.
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "keybench: drop database:", err)
		}
	}()
	dsn, err := withDatabase(c.dsn, db)
	if err != nil {
		return err
	}
	var sharedBuffers, version string
	if err := admin.QueryRow(ctx, "SELECT current_setting('shared_buffers'), current_setting('server_version')").Scan(&sharedBuffers, &version); err != nil {
		return fmt.Errorf("server settings: %w", err)
	}
	fmt.Fprintf(w, "PostgreSQL %s, shared_buffers %s; %d rows per key, %d writers, %d rows per COPY\n",
		version, sharedBuffers, c.rows, c.writers, c.batch)

	gen, err := snowflake.NewGenerator(snowflake.Settings{WorkerID: 1})
	if err != nil {
		return err
	}
	var results []result
	for _, k := range kinds(gen) {
		if c.only != "" && c.only != k.name {
			continue
		}
		r, err := runKind(ctx, admin, dsn, db, k, c)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		fmt.Fprintf(w, "%-9s %9.0f rows/s  index %6.1f MiB  table %6.1f MiB  WAL %7.1f MiB (%.0f B/row)  load average %s\n",
			r.kind, r.rowsPerS(), mib(r.indexB), mib(r.tableB), mib(r.walB), float64(r.walB)/float64(r.rows), r.load)
		results = append(results, r)
	}
	if len(results) == 0 {
		return fmt.Errorf("-only %q: no such key kind", c.only)
	}
	if c.out != "" {
		return writeResults(c, sharedBuffers, version, results)
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// loadAverage returns the 1, 5 and 15 minute load averages, or "?" where
// /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// runKind creates the kind's table, fills it from c.writers connections
// and measures it.
func runKind(ctx context.Context, admin *pgx.Conn, dsn, db string, k kind, c config) (result, error) {
	r := result{kind: k.name, rows: c.rows}
	setup, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return r, fmt.Errorf("connect: %w", err)
	}
	defer setup.Close(context.Background())
	table := "keys_" + k.name
	if _, err := setup.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY, n bigint NOT NULL)", table, k.sqlType)); err != nil {
		return r, fmt.Errorf("create table: %w", err)
	}
	defer func() {
		if _, err := setup.Exec(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			fmt.Fprintln(os.Stderr, "keybench: drop table:", err)
		}
	}()
	conns := make([]*pgx.Conn, c.writers)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, dsn); err != nil {
			return r, fmt.Errorf("connect writer: %w", err)
		}
		defer conns[i].Close(context.Background())
	}
	// A checkpoint first, so that every kind starts with the same full-page
	// images to write: the first change of a page after a checkpoint logs
	// the whole page.
	if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return r, fmt.Errorf("checkpoint: %w", err)
	}
	var lsn0 string
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
		return r, fmt.Errorf("wal position: %w", err)
	}
	var claimed atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, c.writers)
	start := time.Now()
	for i, conn := range conns {
		wg.Go(func() { errs[i] = write(ctx, conn, table, k, c, &claimed) })
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn0).Scan(&r.walB); err != nil {
		return r, fmt.Errorf("wal written: %w", err)
	}
	r.load = loadAverage()
	var n int64
	if err := setup.QueryRow(ctx, fmt.Sprintf(`SELECT pg_relation_size('%[1]s_pkey'), pg_relation_size('%[1]s'), (SELECT count(*) FROM %[1]s)`, table)).Scan(&r.indexB, &r.tableB, &n); err != nil {
		return r, fmt.Errorf("sizes: %w", err)
	}
	if n != c.rows {
		return r, fmt.Errorf("table holds %d rows, want %d", n, c.rows)
	}
	return r, nil
}

// write claims batches until c.rows are claimed and COPYs each into table.
func write(ctx context.Context, conn *pgx.Conn, table string, k kind, c config, claimed *atomic.Int64) error {
	fill, err := k.newKeys()
	if err != nil {
		return err
	}
	keys := make([]any, c.batch)
	rows := make([][]any, c.batch)
	for {
		first := claimed.Add(int64(c.batch)) - int64(c.batch)
		if first >= c.rows {
			return nil
		}
		n := int(min(int64(c.batch), c.rows-first))
		if err := fill(keys[:n]); err != nil {
			return err
		}
		for i := range n {
			rows[i] = []any{keys[i], first + int64(i)}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, []string{"id", "n"}, pgx.CopyFromRows(rows[:n])); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
	}
}

// writeResults writes keys.csv (for the plot) and keys.md (the table).
func writeResults(c config, sharedBuffers, version string, rs []result) error {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(c.out, "keys.csv"))
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"kind", "rows", "seconds", "rows_per_s", "index_bytes", "table_bytes", "wal_bytes"})
	for _, r := range rs {
		_ = cw.Write([]string{r.kind, strconv.FormatInt(r.rows, 10), strconv.FormatFloat(r.elapsed.Seconds(), 'f', 3, 64),
			strconv.FormatFloat(r.rowsPerS(), 'f', 0, 64), strconv.FormatInt(r.indexB, 10),
			strconv.FormatInt(r.tableB, 10), strconv.FormatInt(r.walB, 10)})
	}
	cw.Flush()
	if err := errors.Join(cw.Error(), f.Close()); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(c.out, "keys.md"))
	if err != nil {
		return err
	}
	fmt.Fprintf(md, "PostgreSQL %s, shared_buffers %s; %d rows per key, %d writers, %d rows per COPY; %s\n\n",
		version, sharedBuffers, c.rows, c.writers, c.batch, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintln(md, "| key | rows/s | index MiB | table MiB | WAL MiB | WAL bytes/row | load average after |")
	fmt.Fprintln(md, "|---|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		fmt.Fprintf(md, "| %s | %.0f | %.1f | %.1f | %.1f | %.0f | %s |\n", r.kind, r.rowsPerS(), mib(r.indexB), mib(r.tableB),
			mib(r.walB), float64(r.walB)/float64(r.rows), r.load)
	}
	return md.Close()
}
