package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/internal/testkit"
)

// The lease settings of the nodes of the restore tests, and the fence's
// matching bounds: short, so that nodes can issue again a few seconds
// after the fence rather than five minutes (the default --max-ttl).
const (
	restoreLeaseTTL  = "2s"
	restoreMaxOffset = "1s"
)

// issued is every ID the nodes of a restore test handed out, with the
// phase that got it: Snowflake IDs, and segment IDs per namespace (two
// namespaces may hand out the same numbers).
type issued struct {
	snowflake map[int64]string
	segments  map[string]map[int64]string
}

func newIssued() *issued {
	return &issued{snowflake: map[int64]string{}, segments: map[string]map[int64]string{}}
}

// draw asks n for Snowflake IDs, IDs of the buffered namespace orders and
// of the strict namespace invoices, rounds times, and records them under
// phase. It returns the IDs it got that some phase got before
// ("orders 1234: restored and before-backup").
func (is *issued) draw(t *testing.T, n *node, phase string, rounds int) (dups []string) {
	t.Helper()
	add := func(seen map[int64]string, space string, ids []string) {
		for _, id := range ints(t, ids) {
			if old, ok := seen[id]; ok {
				dups = append(dups, fmt.Sprintf("%s %d: %s and %s", space, id, old, phase))
				continue
			}
			seen[id] = phase
		}
	}
	for range rounds {
		var sf idsResponse
		n.getJSON("/ids?count=100", http.StatusOK, &sf)
		add(is.snowflake, "snowflake", sf.IDs)
		for _, ns := range []struct {
			name  string
			count int
		}{{"orders", 7}, {"invoices", 2}} {
			var seg idsResponse
			n.getJSON(fmt.Sprintf("/ids?count=%d&namespace=%s", ns.count, ns.name), http.StatusOK, &seg)
			if is.segments[ns.name] == nil {
				is.segments[ns.name] = map[int64]string{}
			}
			add(is.segments[ns.name], ns.name, seg.IDs)
		}
	}
	return dups
}

// count returns how many IDs is holds.
func (is *issued) count() (snowflake, segments int) {
	for _, m := range is.segments {
		segments += len(m)
	}
	return len(is.snowflake), segments
}

// maxOf returns the largest ID of namespace name that phase got.
func (is *issued) maxOf(name, phase string) int64 {
	var m int64
	for id, p := range is.segments[name] {
		if p == phase {
			m = max(m, id)
		}
	}
	return m
}

// minOf returns the smallest ID of namespace name that phase got.
func (is *issued) minOf(name, phase string) int64 {
	var m int64 = 1<<63 - 1
	for id, p := range is.segments[name] {
		if p == phase {
			m = min(m, id)
		}
	}
	return m
}

// restoreStore is a database of a restore test and how to back it up and
// restore it.
type restoreStore struct {
	dsn string
	// backup takes a backup of dsn; restore puts it back into dsn.
	backup, restore func(t *testing.T)
	// restoreElsewhere restores the backup into another, new store and
	// returns its DSN.
	restoreElsewhere func(t *testing.T) string
	// cold: the backup is taken while no node runs.
	cold bool
}

// TestRestoreFence is the restore runbook on PostgreSQL and on SQLite,
// with the idgen binary: nodes with state files hand out IDs; a backup is
// taken (pg_dump; a copy of the SQLite file); the nodes hand out more;
// they stop and the backup is restored (pg_restore; the file copied
// back). A node started on the restored store hands out segment IDs it
// handed out before, and one with its state file refuses to start; after
// idgen restore-fence the nodes start again, and no ID of any phase,
// Snowflake or segment, was handed out twice.
func TestRestoreFence(t *testing.T) {
	bin := buildBinary(t)
	t.Run("postgres", func(t *testing.T) { restoreRunbook(t, bin, postgresRestoreStore(t), 2) })
	t.Run("sqlite", func(t *testing.T) { restoreRunbook(t, bin, sqliteRestoreStore(t), 1) })
}

func restoreRunbook(t *testing.T, bin string, st restoreStore, nodes int) {
	dir := t.TempDir()
	env := testkit.Env("IDGEN_DSN=" + st.dsn)
	cliEnv := map[string]string{"IDGEN_DSN": st.dsn}
	mustRun := func(args ...string) string {
		t.Helper()
		r := cli(t, cliEnv, args...)
		if r.code != 0 {
			t.Fatalf("idgen %q: exit code %d, stderr %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	mustRun("migrate", "up")
	mustRun("namespaces", "create", "orders", "--step", "10", "--min-step", "10", "--max-step", "10")
	mustRun("namespaces", "create", "invoices", "--mode", "strict")

	stateFile := func(i int) string { return filepath.Join(dir, fmt.Sprintf("node-%d.state", i)) }
	nodeArgs := func(i int) []string {
		return []string{"--lease-ttl", restoreLeaseTTL, "--max-clock-offset", restoreMaxOffset, "--state-file", stateFile(i),
			"--holder", fmt.Sprintf("restore-node-%d", i)}
	}
	start := func() []*proc {
		ps := make([]*proc, nodes)
		for i := range ps {
			ps[i] = startBinary(t, bin, dir, env, nodeArgs(i)...)
			ps[i].node().waitReady()
		}
		return ps
	}
	stop := func(ps []*proc) {
		for _, p := range ps {
			if code := p.terminate(); code != 0 {
				t.Fatalf("node exit code %d after SIGTERM\n%s", code, p.logs)
			}
		}
	}
	draw := func(is *issued, ps []*proc, phase string) {
		t.Helper()
		for _, p := range ps {
			if dups := is.draw(t, p.node(), phase, 20); len(dups) > 0 {
				t.Fatalf("%s: IDs handed out twice: %v", phase, dups)
			}
		}
	}

	all := newIssued()
	ps := start()
	draw(all, ps, "before the backup")
	if st.cold {
		stop(ps)
		st.backup(t)
		ps = start()
	} else {
		st.backup(t)
	}
	draw(all, ps, "after the backup")
	if r := cli(t, cliEnv, "restore-fence"); r.code != 1 || !strings.Contains(r.stderr, "leases look held by running nodes") {
		t.Errorf("restore-fence while nodes run: got exit code %d, stderr %q; want 1, refused without --force", r.code, r.stderr)
	}
	stop(ps)
	st.restore(t)

	// Without the fence: a node without a state file hands out segment
	// IDs again, and a node with one refuses to start.
	other := st.restoreElsewhere(t)
	unfenced := startBinary(t, bin, dir, testkit.Env("IDGEN_DSN="+other), "--lease-ttl", restoreLeaseTTL,
		"--max-clock-offset", restoreMaxOffset)
	unfenced.node().waitReady()
	probe := newIssued()
	for k, v := range all.snowflake {
		probe.snowflake[k] = v
	}
	for name, m := range all.segments {
		probe.segments[name] = map[int64]string{}
		for k, v := range m {
			probe.segments[name][k] = v
		}
	}
	again := probe.draw(t, unfenced.node(), "restored, not fenced", 20)
	if len(again) == 0 {
		t.Errorf("a node on the restored store without the fence: got no ID handed out twice, want the lost segment IDs again")
	}
	t.Logf("without the fence: %d IDs handed out a second time, e.g. %v", len(again), again[:min(3, len(again))])
	unfenced.terminate()

	code, _, stderr := runBinaryBounded(t, startTimeout, bin, dir, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, nodeArgs(0)...)...)
	if code != 1 || !strings.Contains(stderr, "behind what this node saw") || !strings.Contains(stderr, "idgen restore-fence") {
		t.Fatalf("a node with its state file on the restored store: got exit code %d, stderr %s; want 1, refusing the store as behind", code, stderr)
	}
	t.Logf("a node with its state file refuses: %s", lastLine(stderr))

	// The fence, then the nodes again. The nodes are stopped; the leases
	// of a backup taken while they ran may not have expired yet (it was
	// taken seconds ago), so --force.
	out := mustRun("restore-fence", "--max-ttl", restoreLeaseTTL, "--max-clock-offset", restoreMaxOffset, "--reason", "restore test", "--force")
	if !strings.Contains(out, "fenced the store: generation 1") {
		t.Errorf("restore-fence: got %q, want generation 1", out)
	}
	ps = start()
	draw(all, ps, "after the fence")
	stop(ps)

	sf, seg := all.count()
	t.Logf("IDs handed out over every phase: %d Snowflake, %d segment; none twice", sf, seg)
	if sf == 0 || seg == 0 {
		t.Fatalf("got %d Snowflake and %d segment IDs, want some of each", sf, seg)
	}
	for _, name := range []string{"orders", "invoices"} {
		if lo, hi := all.minOf(name, "after the fence"), all.maxOf(name, "after the backup"); lo <= hi {
			t.Errorf("%s: first ID after the fence %d, want above the last one before the restore %d", name, lo, hi)
		}
	}
	events := mustRun("leases", "events", "--kind", "fence", "--limit", "1000")
	if got, want := strings.Count(events, "restore fence, generation 1"), 32; got != want || strings.Count(events, "restore test") != want {
		t.Errorf("fence events: got %d in %s, want %d, one per worker ID of the pool (0-31), naming the reason", got, events, want)
	}
}

func lastLine(s string) string {
	l := lines(strings.TrimSpace(s))
	return l[len(l)-1]
}

// postgresRestoreStore makes a scratch database of its own on the test
// server (dropped when the test ends) and backs it up with pg_dump.
func postgresRestoreStore(t *testing.T) restoreStore {
	t.Helper()
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the PostgreSQL client tools are needed for this test (%v)", tool, err)
		}
	}
	dump := filepath.Join(t.TempDir(), "idgen.dump")
	dsn := scratchDatabase(t)
	return restoreStore{
		dsn: dsn,
		backup: func(t *testing.T) {
			runTool(t, "pg_dump", "--format=custom", "--file="+dump, "--dbname="+libpqDSN(t, dsn))
		},
		restore: func(t *testing.T) {
			runTool(t, "pg_restore", "--clean", "--if-exists", "--single-transaction", "--no-owner", "--dbname="+libpqDSN(t, dsn), dump)
		},
		restoreElsewhere: func(t *testing.T) string {
			other := scratchDatabase(t)
			runTool(t, "pg_restore", "--no-owner", "--dbname="+libpqDSN(t, other), dump)
			return other
		},
	}
}

// scratchDatabase creates a database of its own on the PostgreSQL server
// of the tests, dropped when the test ends, and returns its DSN.
func scratchDatabase(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testkit.Postgres(t)) // skips or fails the test without a server
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	server := u.String()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "idgen_restore_" + hex.EncodeToString(b)
	exec := func(stmt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Fatalf("connect to %s: %v", u.Redacted(), err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	exec("CREATE DATABASE " + name)
	t.Cleanup(func() { exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// libpqDSN is dsn as the PostgreSQL tools take it.
func libpqDSN(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "postgresql"
	return u.String()
}

// runTool runs a database tool and fails the test unless it exits 0.
func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = testkit.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// sqliteRestoreStore is a SQLite file backed up by copying it while no
// node has it open, and restored by copying it back.
func sqliteRestoreStore(t *testing.T) restoreStore {
	t.Helper()
	dir := t.TempDir()
	db, backup := filepath.Join(dir, "idgen.db"), filepath.Join(dir, "backup.db")
	copyFile := func(t *testing.T, from, to string) {
		t.Helper()
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if err := os.Remove(to + suffix); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		in, err := os.Open(from)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return restoreStore{
		dsn:     "sqlite:" + db,
		backup:  func(t *testing.T) { copyFile(t, db, backup) },
		cold:    true,
		restore: func(t *testing.T) { copyFile(t, backup, db) },
		restoreElsewhere: func(t *testing.T) string {
			other := filepath.Join(t.TempDir(), "other-"+strconv.Itoa(os.Getpid())+".db")
			copyFile(t, backup, other)
			return "sqlite:" + other
		},
	}
}
