package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
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

func TestNewName(t *testing.T) {
	valid := regexp.MustCompile(`^idgen_[a-z0-9_]{0,25}_[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for _, name := range []string{"Simple", "With Spaces/And#Symbols", strings.Repeat("VeryLong", 20)} {
		t.Run(name, func(t *testing.T) {
			for range 3 {
				got := newName(t)
				if !valid.MatchString(got) || len(got) > 48 {
					t.Errorf("newName = %q (%d characters), want %s, at most 48", got, len(got), valid)
				}
				if seen[got] {
					t.Errorf("newName returned %q twice", got)
				}
				seen[got] = true
			}
		})
	}
}

// fakeTB records how unavailable ended a test instead of ending it.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Skip(args ...any)               { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed = fmt.Sprintf(format, a...) }

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		require  string
		wantSkip bool
	}{
		{"", true},
		{"0", true},
		{"1", false},
	} {
		t.Run("require="+tc.require, func(t *testing.T) {
			t.Setenv(EnvRequire, tc.require)
			f := &fakeTB{TB: t}
			unavailable(f, "PostgreSQL", EnvPostgres, "postgres://postgres@127.0.0.1:5432/postgres", sql.ErrConnDone)
			msg := f.skipped + f.failed
			if gotSkip := f.skipped != ""; gotSkip != tc.wantSkip || (f.failed != "") == tc.wantSkip {
				t.Errorf("skipped %q, failed %q; want skip = %v", f.skipped, f.failed, tc.wantSkip)
			}
			if !strings.Contains(msg, EnvPostgres) || !strings.Contains(msg, "Docker") {
				t.Errorf("message %q does not say how to run the tests (%s or Docker)", msg, EnvPostgres)
			}
		})
	}
}
