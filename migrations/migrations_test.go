package migrations_test

import (
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testdb"
	"github.com/idgen-project/idgen/migrations"
	"github.com/idgen-project/idgen/snowflake"
)

// store is what the test needs of a store: its tables and its migrations.
type store interface {
	allocator.Store
	Migrations() (*goose.Provider, error)
}

var dialects = []struct {
	dialect migrations.Dialect
	open    func(t *testing.T) store
}{
	{migrations.DialectPostgres, func(t *testing.T) store {
		s, err := postgres.Open(t.Context(), testdb.Postgres(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}},
	{migrations.DialectMySQL, func(t *testing.T) store {
		s, err := mysql.Open(t.Context(), testdb.MySQL(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}},
	{migrations.DialectSQLite, func(t *testing.T) store {
		s, err := sqlite.Open(t.Context(), testdb.SQLite(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}},
}

// TestUpDownUp applies every migration, reverts them all, and applies them
// again, on a real database of each dialect, checking that the tables come
// and go.
func TestUpDownUp(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.dialect), func(t *testing.T) {
			ctx := t.Context()
			s := d.open(t)
			t.Cleanup(func() { _ = s.Close() })
			p, err := s.Migrations()
			if err != nil {
				t.Fatalf("Migrations: %v", err)
			}
			defer p.Close()
			sources := p.ListSources()
			last := sources[len(sources)-1].Version

			checkVersion := func(step string, want int64) {
				t.Helper()
				if got, err := p.GetDBVersion(ctx); err != nil || got != want {
					t.Fatalf("%s: database version %d, %v; want %d", step, got, err, want)
				}
			}
			checkTables := func(step string, want bool) {
				t.Helper()
				_, err := s.ListLeases(ctx)
				if got := err == nil; got != want {
					t.Errorf("%s: worker_leases readable = %v (%v), want %v", step, got, err, want)
				}
				_, err = s.ListLeaseEvents(ctx, 0, 1)
				if got := err == nil; got != want {
					t.Errorf("%s: lease_events readable = %v (%v), want %v", step, got, err, want)
				}
			}

			checkTables("before up", false)
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up: %v", err)
			}
			checkVersion("up", last)
			checkTables("up", true)
			if _, err := s.EnsureLayout(ctx, snowflake.DefaultLayout()); err != nil {
				t.Errorf("up: snowflake_layout: %v", err)
			}
			if _, err := s.Claim(ctx, allocator.ClaimRequest{MaxWorkerID: 3, Holder: "h", TTL: time.Minute}); err != nil {
				t.Errorf("up: claim: %v", err)
			}

			if _, err := p.DownTo(ctx, 0); err != nil {
				t.Fatalf("down to 0: %v", err)
			}
			checkVersion("down", 0)
			checkTables("down", false)

			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up again: %v", err)
			}
			checkVersion("up again", last)
			checkTables("up again", true)
			if leases, err := s.ListLeases(ctx); err != nil || len(leases) != 0 {
				t.Errorf("up again: got %d leases, %v; want an empty table", len(leases), err)
			}
		})
	}
}

// TestDialectsAlike checks that every dialect has the same migrations, each
// with an Up and a Down section.
func TestDialectsAlike(t *testing.T) {
	var first []string
	for i, d := range dialects {
		fsys, err := migrations.FS(d.dialect)
		if err != nil {
			t.Fatalf("FS(%s): %v", d.dialect, err)
		}
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatalf("%s: %v", d.dialect, err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no migrations", d.dialect)
		}
		for _, name := range names {
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				t.Fatalf("%s/%s: %v", d.dialect, name, err)
			}
			for _, marker := range []string{"-- +goose Up", "-- +goose Down"} {
				if !strings.Contains(string(b), marker) {
					t.Errorf("%s/%s has no %q section", d.dialect, name, marker)
				}
			}
		}
		if i == 0 {
			first = names
		} else if !slices.Equal(names, first) {
			t.Errorf("%s has migrations %v, %s has %v", d.dialect, names, dialects[0].dialect, first)
		}
	}
}

func TestUnknownDialect(t *testing.T) {
	if _, err := migrations.NewProvider("oracle", nil); err == nil {
		t.Errorf("NewProvider(oracle) succeeded, want an error")
	}
	if _, err := migrations.FS("oracle"); err == nil {
		t.Errorf("FS(oracle) succeeded, want an error")
	}
}

// TestConcurrentUp starts eight nodes' migrations at once on a fresh
// database: all succeed and the schema ends at the latest version.
func TestConcurrentUp(t *testing.T) {
	for _, tt := range []struct {
		dialect string
		dsn     func(testing.TB) string
	}{{"postgres", testdb.Postgres}, {"mysql", testdb.MySQL}} {
		t.Run(tt.dialect, func(t *testing.T) {
			dsn := tt.dsn(t)
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := stores.Open(t.Context(), dsn)
					if err != nil {
						errs[i] = err
						return
					}
					defer s.Close()
					p, err := s.Migrations()
					if err != nil {
						errs[i] = err
						return
					}
					defer p.Close()
					_, errs[i] = p.Up(t.Context())
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("node %d: Up: %v", i, err)
				}
			}
			s, err := stores.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p, err := s.Migrations()
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got, err := p.GetDBVersion(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(len(p.ListSources())); got != want {
				t.Errorf("schema version: got %d, want %d", got, want)
			}
		})
	}
}
