package migrations_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
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
		s, err := postgres.Open(t.Context(), testkit.Postgres(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}},
	{migrations.DialectMySQL, func(t *testing.T) store {
		s, err := mysql.Open(t.Context(), testkit.MySQL(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}},
	{migrations.DialectSQLite, func(t *testing.T) store {
		s, err := sqlite.Open(t.Context(), testkit.SQLite(t))
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
				_, err = s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 1})
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
	}{{"postgres", testkit.Postgres}, {"mysql", testkit.MySQL}} {
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
			// The last migration's number: numbers may have gaps.
			srcs := p.ListSources()
			if want := srcs[len(srcs)-1].Version; got != want {
				t.Errorf("schema version: got %d, want %d", got, want)
			}
		})
	}
}

// rawDB opens a plain database/sql connection to a fresh test database of
// dialect d, for statements no store makes.
func rawDB(t *testing.T, d migrations.Dialect) *sql.DB {
	t.Helper()
	return rawDBAt(t, d, testDSN(t, d))
}

// testDSN returns the DSN of a fresh test database of dialect d.
func testDSN(t *testing.T, d migrations.Dialect) string {
	t.Helper()
	switch d {
	case migrations.DialectPostgres:
		return testkit.Postgres(t)
	case migrations.DialectMySQL:
		return testkit.MySQL(t)
	default:
		return testkit.SQLite(t)
	}
}

// rawDBAt opens a plain database/sql connection to the test database of
// dialect d that dsn names, closed when t ends.
func rawDBAt(t *testing.T, d migrations.Dialect, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	switch d {
	case migrations.DialectPostgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db = stdlib.OpenDB(*cfg)
	case migrations.DialectMySQL:
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg := gomysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.User, cfg.DBName = "tcp", u.Host, u.User.Username(), strings.TrimPrefix(u.Path, "/")
		cfg.Passwd, _ = u.User.Password()
		cfg.ParseTime = true // goose's lock table reads DATETIMEs
		connector, err := gomysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db = sql.OpenDB(connector)
	case migrations.DialectSQLite:
		var err error
		if db, err = sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:")); err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestSegmentsLimitMigration applies 00003 (max_id_limit) to namespaces
// created before it: one with the Snowflake fallback gets the limit of an
// hour before its creation; one whose counter is not below that, or that
// has no layout to compute it with, loses its fallback. Then the CHECK
// constraints refuse a counter past its limit and a fallback without one,
// and the migration goes down and up again.
func TestSegmentsLimitMigration(t *testing.T) {
	layout := snowflake.DefaultLayout()
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	early := layout.Epoch.Add(30 * time.Minute) // an hour before it lies before the epoch
	wantLimit := int64(layout.SmallestID(created.Add(-time.Hour))) - 1
	stamp := map[migrations.Dialect]func(time.Time) string{
		migrations.DialectPostgres: func(t time.Time) string { return t.Format("'2006-01-02 15:04:05.000+00'") },
		migrations.DialectMySQL:    func(t time.Time) string { return t.Format("'2006-01-02 15:04:05.000'") },
		migrations.DialectSQLite:   func(t time.Time) string { return t.Format("'2006-01-02 15:04:05.000'") },
	}
	type row struct {
		fallback string
		limit    sql.NullInt64
	}
	none := row{"none", sql.NullInt64{}}
	for _, d := range dialects {
		for _, withLayout := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/layout=%v", d.dialect, withLayout), func(t *testing.T) {
				ctx := t.Context()
				db := rawDB(t, d.dialect)
				p, err := migrations.NewProvider(d.dialect, db)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if _, err := p.UpTo(ctx, 2); err != nil {
					t.Fatalf("up to 2: %v", err)
				}
				exec := func(stmt string) error {
					_, err := db.ExecContext(ctx, stmt)
					return err
				}
				if withLayout {
					if err := exec(fmt.Sprintf(`INSERT INTO snowflake_layout (id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch)
						VALUES (1, %d, %d, %d, %d, %d, %s)`, layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits,
						layout.EpochMillis(), stamp[d.dialect](layout.Epoch))); err != nil {
						t.Fatalf("insert layout: %v", err)
					}
				}
				for _, ns := range []struct {
					name     string
					maxID    int64
					fallback string
					at       time.Time
				}{
					{"fb", 1000, "snowflake", created},
					{"fb-high", 1 << 62, "snowflake", created},
					{"fb-early", 0, "snowflake", early},
					{"plain", 1000, "none", created},
				} {
					if err := exec(fmt.Sprintf(`INSERT INTO segments (namespace, max_id, step, min_step, max_step, mode, fallback, version, created_at, updated_at, description)
						VALUES ('%s', %d, 10, 10, 10, 'buffered', '%s', 0, %s, %s, '')`, ns.name, ns.maxID, ns.fallback, stamp[d.dialect](ns.at), stamp[d.dialect](ns.at))); err != nil {
						t.Fatalf("insert %s: %v", ns.name, err)
					}
				}
				if _, err := p.UpTo(ctx, 3); err != nil {
					t.Fatalf("up to 3: %v", err)
				}

				read := func() map[string]row {
					rows, err := db.QueryContext(ctx, `SELECT namespace, fallback, max_id_limit FROM segments`)
					if err != nil {
						t.Fatalf("read segments: %v", err)
					}
					defer rows.Close()
					got := map[string]row{}
					for rows.Next() {
						var name string
						var r row
						if err := rows.Scan(&name, &r.fallback, &r.limit); err != nil {
							t.Fatal(err)
						}
						got[name] = r
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
					return got
				}
				want := map[string]row{"fb-high": none, "fb-early": none, "plain": none, "fb": none}
				if withLayout {
					want["fb"] = row{"snowflake", sql.NullInt64{Int64: wantLimit, Valid: true}}
				}
				got := read()
				for name, w := range want {
					if got[name] != w {
						t.Errorf("%s after the migration: got %+v, want %+v", name, got[name], w)
					}
				}

				// The constraints.
				if err := exec(`UPDATE segments SET max_id = max_id_limit + 1 WHERE namespace = 'fb'`); withLayout && err == nil {
					t.Errorf("max_id moved past max_id_limit: want a CHECK violation")
				}
				if err := exec(`UPDATE segments SET fallback = 'snowflake' WHERE namespace = 'plain'`); err == nil {
					t.Errorf("fallback turned on without max_id_limit: want a CHECK violation")
				}
				if err := exec(`UPDATE segments SET max_id_limit = 999 WHERE namespace = 'plain'`); err == nil {
					t.Errorf("max_id_limit set below max_id: want a CHECK violation")
				}
				if got := read(); !maps.Equal(got, want) {
					t.Errorf("rows changed by refused updates: got %+v, want %+v", got, want)
				}

				if _, err := p.DownTo(ctx, 2); err != nil {
					t.Fatalf("down to 2: %v", err)
				}
				if _, err := db.ExecContext(ctx, `SELECT max_id_limit FROM segments`); err == nil {
					t.Errorf("down to 2: max_id_limit still there")
				}
				var n int
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM segments`).Scan(&n); err != nil || n != len(want) {
					t.Errorf("down to 2: got %d namespaces, %v; want %d", n, err, len(want))
				}
				if _, err := p.Up(ctx); err != nil {
					t.Fatalf("up again: %v", err)
				}
			})
		}
	}
}

// TestRemoteLeasesMigration applies 00004 to lease rows and events written
// before it: rows keep their ceilings with an unknown floor (0), which a
// release then treats as the old schema did (never raising the ceiling,
// keeping it when nothing was issued); events keep their IDs, and the ones
// recorded after it get IDs above every earlier one, even a deleted one.
// The new constraints hold, and the migration goes down (dropping evict
// events, bringing deleted namespaces back) and up again.
func TestRemoteLeasesMigration(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.dialect), func(t *testing.T) {
			ctx := t.Context()
			dsn := testDSN(t, d.dialect)
			db := rawDBAt(t, d.dialect, dsn)
			p, err := migrations.NewProvider(d.dialect, rawDBAt(t, d.dialect, dsn))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.UpTo(ctx, 3); err != nil {
				t.Fatalf("up to 3: %v", err)
			}
			exec := func(stmt string, args ...any) error {
				_, err := db.ExecContext(ctx, stmt, args...)
				return err
			}
			mustExec := func(stmt string, args ...any) {
				t.Helper()
				if err := exec(stmt, args...); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			future := "'2999-01-01 00:00:00.000'"
			for _, row := range []string{
				`0, 0, 'old-a', 3, ` + future + `, 5000`,
				`0, 1, 'old-b', 2, ` + future + `, 7000`,
				`0, 2, NULL, 1, NULL, 100`,
			} {
				mustExec(`INSERT INTO worker_leases (datacenter_id, worker_id, holder, fencing_version, expires_at, ts_ceiling_ms) VALUES (` + row + `)`)
			}
			for i := range 3 {
				mustExec(fmt.Sprintf(`INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, detail)
					VALUES (0, %d, 'old', 1, 'acquire', 'before 00004')`, i))
			}
			mustExec(`DELETE FROM lease_events WHERE id = 3`) // pruned: its ID must not come back
			mustExec(`INSERT INTO segments (namespace, max_id, step, min_step, max_step, description) VALUES ('orders', 500, 10, 10, 10, '')`)

			// Up to the latest version: the store's code reads and writes
			// the columns of every migration.
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up from 3: %v", err)
			}
			s, err := stores.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			leases, err := s.ListLeases(ctx)
			if err != nil || len(leases) != 3 {
				t.Fatalf("ListLeases after 00004: %d rows, %v", len(leases), err)
			}
			for _, l := range leases {
				if l.FloorMS != 0 || l.Owner != "" {
					t.Errorf("worker %d after 00004: floor %d owner %q, want 0 (unknown) and NULL", l.WorkerID, l.FloorMS, l.Owner)
				}
			}
			// Released with nothing issued: the ceiling stays, since the
			// previous holder's is unknown.
			key := func(w int64) allocator.LeaseKey { return allocator.LeaseKey{WorkerID: w} }
			if c, err := s.Release(ctx, allocator.ReleaseRequest{Key: key(0), Holder: "old-a", FencingVersion: 3}); err != nil || c != 5000 {
				t.Errorf("release of a row from before 00004 with nothing issued: got ceiling %d, %v; want 5000 kept", c, err)
			}
			if c, err := s.Release(ctx, allocator.ReleaseRequest{Key: key(1), Holder: "old-b", FencingVersion: 2, LastTimestampMS: 7001}); !errors.Is(err, allocator.ErrInvalidRelease) {
				t.Errorf("release of a row from before 00004 above its ceiling: got %d, %v; want ErrInvalidRelease", c, err)
			}
			if c, err := s.Release(ctx, allocator.ReleaseRequest{Key: key(1), Holder: "old-b", FencingVersion: 2, LastTimestampMS: 6000}); err != nil || c != 6000 {
				t.Errorf("release of a row from before 00004 at its last timestamp: got ceiling %d, %v; want 6000", c, err)
			}
			// A claim records the floor.
			res, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 2, MaxWorkerID: 2, Holder: "new", TTL: time.Minute, Owner: "orders-api"})
			if err != nil || res.Lease.FloorMS != 101 {
				t.Errorf("claim after 00004: floor %d, %v; want 101", res.Lease.FloorMS, err)
			}
			if _, err := s.Evict(ctx, allocator.EvictRequest{Key: key(2), Owner: "ops", Reason: "test"}); err != nil {
				t.Errorf("Evict after 00004: %v", err)
			}
			if _, err := s.DeleteNamespace(ctx, "orders"); err != nil {
				t.Errorf("DeleteNamespace after 00004: %v", err)
			}
			events, err := s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 100})
			if err != nil {
				t.Fatalf("ListLeaseEvents: %v", err)
			}
			var gotIDs []int64
			for _, ev := range events {
				gotIDs = append(gotIDs, ev.ID)
			}
			// 1, 2 from before; two releases, a claim and an eviction after.
			if len(events) != 6 || gotIDs[0] != 1 || gotIDs[1] != 2 || gotIDs[2] <= 3 || events[0].Detail != "before 00004" || events[5].Kind != allocator.EventEvict {
				t.Errorf("events after 00004: IDs %v, %+v; want 1 and 2 kept, the new ones above 3, the last an eviction", gotIDs, events)
			}

			// The new constraints.
			for _, bad := range []string{
				`UPDATE worker_leases SET ts_floor_ms = ts_ceiling_ms + 2 WHERE worker_id = 2`,
				`UPDATE worker_leases SET ts_floor_ms = -1 WHERE worker_id = 2`,
				`UPDATE worker_leases SET owner = '' WHERE worker_id = 2`,
				`INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, detail) VALUES (0, 0, 'x', 1, 'heartbeat', '')`,
			} {
				if err := exec(bad); err == nil {
					t.Errorf("%s: want a CHECK violation", bad)
				}
			}

			if _, err := p.DownTo(ctx, 3); err != nil {
				t.Fatalf("down to 3: %v", err)
			}
			var n, maxID int64
			if err := db.QueryRowContext(ctx, `SELECT count(*), max(id) FROM lease_events`).Scan(&n, &maxID); err != nil || n != 5 {
				t.Errorf("down to 3: %d events, %v; want 5 (the eviction dropped)", n, err)
			}
			mustExec(`INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, detail) VALUES (0, 0, 'x', 1, 'lost', '')`)
			var next int64
			if err := db.QueryRowContext(ctx, `SELECT max(id) FROM lease_events`).Scan(&next); err != nil || next <= gotIDs[5] {
				t.Errorf("down to 3: next event ID %d, %v; want above the dropped eviction's %d", next, err, gotIDs[5])
			}
			if err := exec(`SELECT owner FROM lease_events`); err == nil {
				t.Errorf("down to 3: lease_events.owner still there")
			}
			if err := exec(`SELECT ts_floor_ms FROM worker_leases`); err == nil {
				t.Errorf("down to 3: worker_leases.ts_floor_ms still there")
			}
			if err := db.QueryRowContext(ctx, `SELECT max_id FROM segments WHERE namespace = 'orders'`).Scan(&n); err != nil || n != 500 {
				t.Errorf("down to 3: deleted namespace orders: max_id %d, %v; want it back at 500", n, err)
			}
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up again: %v", err)
			}
		})
	}
}

// TestLeaseSecretsMigration applies 00005 to a lease held through the API
// before it: the row keeps its holder and owner with no secret, and a
// heartbeat without a secret still matches it (the broker, which always
// sends one, finds it lost, and its holder acquires afresh). The secret's
// CHECK holds where the dialect has one, and the migration goes down and up
// again.
func TestLeaseSecretsMigration(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d.dialect), func(t *testing.T) {
			ctx := t.Context()
			dsn := testDSN(t, d.dialect)
			db := rawDBAt(t, d.dialect, dsn)
			p, err := migrations.NewProvider(d.dialect, rawDBAt(t, d.dialect, dsn))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.UpTo(ctx, 4); err != nil {
				t.Fatalf("up to 4: %v", err)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO worker_leases
				(datacenter_id, worker_id, holder, owner, fencing_version, expires_at, ts_ceiling_ms, ts_floor_ms)
				VALUES (0, 0, 'svc/h1', 'svc', 1, '2999-01-01 00:00:00.000', 5000, 1)`); err != nil {
				t.Fatalf("insert a lease of the API: %v", err)
			}
			if _, err := p.UpTo(ctx, 5); err != nil {
				t.Fatalf("up to 5: %v", err)
			}
			s, err := stores.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			hb := allocator.HeartbeatRequest{Key: allocator.LeaseKey{}, Holder: "svc/h1", FencingVersion: 1, TTL: time.Minute, Owner: "svc",
				SecretHash: strings.Repeat("0", allocator.SecretHashLen)}
			if _, _, err := s.Heartbeat(ctx, hb); !errors.Is(err, allocator.ErrLeaseLost) {
				t.Errorf("heartbeat with a secret of a lease granted before secrets: got %v, want ErrLeaseLost", err)
			}
			hb.SecretHash = ""
			if _, _, err := s.Heartbeat(ctx, hb); err != nil {
				t.Errorf("heartbeat without a secret of a lease granted before secrets: %v", err)
			}
			if d.dialect != migrations.DialectMySQL {
				if _, err := db.ExecContext(ctx, `UPDATE worker_leases SET secret_sha256 = 'short' WHERE worker_id = 0`); err == nil {
					t.Errorf("a secret hash of 5 characters: want a CHECK violation")
				}
			}
			if _, err := p.DownTo(ctx, 4); err != nil {
				t.Fatalf("down to 4: %v", err)
			}
			if _, err := db.ExecContext(ctx, `SELECT secret_sha256 FROM worker_leases`); err == nil {
				t.Errorf("down to 4: worker_leases.secret_sha256 still there")
			}
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("up again: %v", err)
			}
		})
	}
}
