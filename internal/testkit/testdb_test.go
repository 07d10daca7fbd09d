package testkit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPostgres(t *testing.T) {
	var dsn, schema string
	t.Run("inner", func(t *testing.T) {
		dsn = Postgres(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("DSN is no URL: %v", err)
		}
		schema = u.Query().Get("search_path")
		if !strings.HasPrefix(schema, "idgen_") {
			t.Fatalf("search_path = %q, want a schema of testdb's", schema)
		}
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(context.Background())
		var current string
		var tables int
		err = conn.QueryRow(t.Context(), `SELECT current_schema(),
			(SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema())`).Scan(&current, &tables)
		if err != nil || current != schema || tables != 0 {
			t.Errorf("got current schema %q with %d tables (%v), want %q empty", current, tables, err, schema)
		}
		if _, err := conn.Exec(t.Context(), `CREATE TABLE t (x int)`); err != nil {
			t.Errorf("create a table in the schema: %v", err)
		}
	})
	if schema == "" {
		return
	}
	// The schema is gone once the test that asked for it has ended.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s after its test: %d found (%v), want dropped", schema, n, err)
	}
}

func TestMySQL(t *testing.T) {
	var u *url.URL
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := MySQL(t)
		var err error
		if u, err = url.Parse(dsn); err != nil || u.Scheme != "mysql" {
			t.Fatalf("DSN %q is no mysql:// URL (%v)", dsn, err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		db, err := openMySQL(u)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer db.Close()
		var current string
		var tables int
		err = db.QueryRowContext(t.Context(), `SELECT DATABASE(),
			(SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE())`).Scan(&current, &tables)
		if err != nil || current != name || tables != 0 {
			t.Errorf("got database %q with %d tables (%v), want %q empty", current, tables, err, name)
		}
	})
	if name == "" {
		return
	}
	db, err := openMySQL(u)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?`, name).Scan(&n)
	if err == nil && n != 0 {
		t.Errorf("database %s after its test: still there, want dropped", name)
	}
	if err != nil && !isUnknownDatabase(err) {
		t.Errorf("look for database %s: %v", name, err)
	}
}

// isUnknownDatabase reports whether err says the database of the connection
// does not exist, which is how a dropped database shows when it is the one
// the DSN names.
func isUnknownDatabase(err error) bool { return strings.Contains(err.Error(), "1049") }

func TestSQLite(t *testing.T) {
	a, b := SQLite(t), SQLite(t)
	tempRoot := filepath.Dir(t.TempDir()) // where t's temporary directories go
	for _, dsn := range []string{a, b} {
		path, ok := strings.CutPrefix(dsn, "sqlite:")
		if !ok || filepath.Dir(filepath.Dir(path)) != tempRoot {
			t.Errorf("SQLite() = %q, want sqlite:<file in a temporary directory of the test, under %s>", dsn, tempRoot)
			continue
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: got %v, want a file not created yet", path, err)
		}
		if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
			t.Errorf("%s: directory missing (%v)", path, err)
		}
	}
	if a == b {
		t.Errorf("two calls returned the same file %q", a)
	}
}

func TestDBName(t *testing.T) {
	valid := regexp.MustCompile(`^idgen_[a-z0-9_]{0,25}_[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for _, name := range []string{"Simple", "With Spaces/And#Symbols", strings.Repeat("VeryLong", 20)} {
		t.Run(name, func(t *testing.T) {
			for range 3 {
				got := dbName(t)
				if !valid.MatchString(got) || len(got) > 48 {
					t.Errorf("dbName = %q (%d characters), want %s, at most 48", got, len(got), valid)
				}
				if seen[got] {
					t.Errorf("dbName returned %q twice", got)
				}
				seen[got] = true
			}
		})
	}
}

// TestContainerPasswordNeverInOutput checks that the password of the
// containers' accounts can occur in no text idgen prints. idgen masks its
// DSN's password wherever it occurs in its output, so a password that is
// also a word idgen prints (its own name, say) would mask that word: the
// end-to-end tests, which wait for the "idgen serving" line, would hang.
// Every word idgen prints comes from its source, so the password must occur
// in none of it; and it must be random, so that no future message can
// contain it either.
func TestContainerPasswordNeverInOutput(t *testing.T) {
	pw, err := containerPassword()
	if err != nil {
		t.Fatal(err)
	}
	if len(pw) < 20 {
		t.Errorf("password %q: got %d characters, want at least 20 random ones", pw, len(pw))
	}
	if again, _ := containerPassword(); again == pw {
		t.Errorf("two processes would share the password %q: want a fresh random one each time", pw)
	}
	for _, line := range []string{"idgen serving on http://127.0.0.1:8080", "idgen starting", "postgres", "mysql", "root"} {
		if strings.Contains(line, pw) {
			t.Errorf("password %q occurs in the output line %q, which idgen would print masked", pw, line)
		}
	}
	root := filepath.Join("..", "..")
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), pw) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("password %q occurs in %d source files (%s, …): idgen could print it, masked", pw, len(found), found[0])
	}
}

func TestContainerImage(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", "postgres:15"},
		{"  ", "postgres:15"},
		{"idgen-ci/postgres:15", "idgen-ci/postgres:15"},
	} {
		t.Setenv(EnvPostgresImage, tc.env)
		if got := image(EnvPostgresImage, defaultPostgresImage); got != tc.want {
			t.Errorf("%s=%q: got %q, want %q", EnvPostgresImage, tc.env, got, tc.want)
		}
	}
}

func TestMySQLReady(t *testing.T) {
	re := regexp.MustCompile(mysqlReady)
	for _, tc := range []struct {
		line  string
		ready bool
	}{
		// MySQL 8, the server the official image starts last.
		{"2025-01-01T00:00:00.000000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections. " +
			"Version: '8.4.3'  socket: '/var/run/mysqld/mysqld.sock'  port: 3306  MySQL Community Server - GPL.\n", true},
		// MySQL 8, the initialisation server (no networking).
		{"2025-01-01T00:00:00.000000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections. " +
			"Version: '8.4.3'  socket: '/var/run/mysqld/mysqld.sock'  port: 0  MySQL Community Server - GPL.\n", false},
		// MariaDB (Debian's, and the official image's).
		{"Version: '10.11.14-MariaDB-0+deb12u2'  socket: '/run/mysqld/mysqld.sock'  port: 3306  Debian 12\n", true},
		{"Version: '11.4.3-MariaDB-ubu2404'  socket: '/run/mysqld/mysqld.sock'  port: 3306  mariadb.org binary distribution\n", true},
		{"Version: '11.4.3-MariaDB-ubu2404'  socket: '/run/mysqld/mysqld.sock'  port: 0  mariadb.org binary distribution\n", false},
		{"Version: '10.11.14-MariaDB-0+deb12u2'  socket: '/run/mysqld/mysqld.sock'  port: 33060  Debian 12\n", false},
	} {
		if got := re.MatchString(tc.line); got != tc.ready {
			t.Errorf("%q: got ready %v, want %v", tc.line, got, tc.ready)
		}
	}
}

// TestSkipReason: the report says why a database test was skipped: no
// Docker engine, or an engine whose container did not start (an image it
// could not pull), naming the image.
func TestSkipReason(t *testing.T) {
	pull := errors.New(`run postgres: generic container: create container: Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host`)
	for _, tc := range []struct {
		cause     error
		want, not string
	}{
		{fmt.Errorf("%w: %w", errNoDocker, errors.New("Cannot connect to the Docker daemon")), "no Docker engine answering", "container"},
		{&containerError{image: "postgres:15", err: pull}, `the Docker engine answered, but could not pull the image postgres:15: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host`, "no Docker engine answering"},
		{&containerError{image: "mysql:8", err: errors.New("wait until ready: container exited with code 1")}, "the Docker engine answered, but the mysql:8 container did not start: wait until ready", "pull"},
	} {
		got := skipReason(tc.cause)
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("skipReason(%v): got %q, want %q and not %q", tc.cause, got, tc.want, tc.not)
		}
	}
}

// TestReportSummary checks what make test prints at the end of a run
// (scripts/testdb-report.sh) against the lines the fixtures report
// (Report): each cause said as it is, and what to do about it.
func TestReportSummary(t *testing.T) {
	const (
		noDocker = "no Docker engine answering"
		pgPull   = "the Docker engine answered, but could not pull the image postgres:15: pull access denied"
		myPull   = "the Docker engine answered, but could not pull the image mysql:8: pull access denied"
	)
	for _, tc := range []struct {
		name   string
		events [][]string
		want   []string // substrings of the output; none: no output
		not    []string // nor these
	}{
		{"nothing", nil, nil, nil},
		{"no Docker", [][]string{
			{"skip", "postgres", "TestA", noDocker}, {"skip", "postgres", "TestB/sub", noDocker}, {"skip", "mysql", "TestA", noDocker},
		}, []string{"testdb: 3 database tests SKIPPED (PostgreSQL 2, MySQL 1): no database server set, and no Docker engine answering.\n",
			"set IDGEN_TEST_POSTGRES_DSN and IDGEN_TEST_MYSQL_DSN or start Docker"},
			[]string{"pull", "IMAGE"}},
		{"images not pulled", [][]string{
			{"skip", "postgres", "TestA", pgPull}, {"skip", "mysql", "TestA", myPull}, {"skip", "mysql", "TestB", myPull},
		}, []string{"testdb: 3 database tests SKIPPED (PostgreSQL 1, MySQL 2): no database server set, and the Docker engine answered, but could not pull the image mysql:8: pull access denied; the Docker engine answered, but could not pull the image postgres:15: pull access denied.\n",
			"build local ones and name them in IDGEN_TEST_POSTGRES_IMAGE and IDGEN_TEST_MYSQL_IMAGE"},
			[]string{"no Docker engine answering", "or start Docker"}},
		{"containers", [][]string{
			{"container", "postgres", "postgres:15"}, {"container", "postgres", "postgres:15"}, {"container", "mysql", "mysql:8"},
		}, []string{"3 database containers started", "2 x postgres (postgres:15)", "1 x mysql (mysql:8)"}, []string{"SKIPPED"}},
		{"chromium", [][]string{
			{"skip", "chromium", "TestStatusPageInChromium", "no Chromium found"},
		}, []string{"browsertest: 1 browser test SKIPPED (TestStatusPageInChromium): no Chromium found. To run it, apt-get install chromium"},
			[]string{"testdb"}},
		{"etcd", [][]string{
			{"skip", "etcd", "TestA", "no etcd cluster: exec: etcd: not found"}, {"skip", "etcd", "TestB", "no etcd cluster: exec: etcd: not found"},
		}, []string{"etcdtest: 2 etcd tests SKIPPED: no etcd cluster: exec: etcd: not found.", "IDGEN_TEST_ETCD_BIN"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "report")
			t.Setenv(EnvReport, path)
			for _, ev := range tc.events {
				if err := Report(ev[0], ev[1:]...); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command("sh", filepath.Join("..", "..", "scripts", "testdb-report.sh"), path).CombinedOutput()
			if err != nil {
				t.Fatalf("testdb-report.sh: %v\n%s", err, out)
			}
			if len(tc.want) == 0 && len(out) != 0 {
				t.Errorf("got %q, want no output", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output %q: want %q in it", out, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(out), n) {
					t.Errorf("output %q: want no %q in it", out, n)
				}
			}
		})
	}
}
