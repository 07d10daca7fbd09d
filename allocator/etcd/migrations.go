package etcd

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keyLayoutVersion is the etcd store's one "migration".
const keyLayoutVersion = 1

// Migrations returns a goose provider so migrate treats etcd like the SQL
// stores: its one migration writes nothing up and deletes the layout's
// keys down. Closing it leaves the store open.
func (s *Store) Migrations() (*goose.Provider, error) {
	m := goose.NewGoMigration(keyLayoutVersion,
		&goose.GoFunc{RunDB: func(context.Context, *sql.DB) error { return nil }},
		&goose.GoFunc{RunDB: func(ctx context.Context, _ *sql.DB) error { return s.deleteLayout(ctx) }},
	)
	m.Source = "00001_etcd_key_layout.go"
	p, err := goose.NewProvider(goose.DialectCustom, sql.OpenDB(noSQL{}), nil,
		goose.WithStore(gooseStore{s}),
		goose.WithGoMigrations(m),
		goose.WithDisableGlobalRegistry(true),
		// Without it goose records its zero version in a SQL transaction.
		goose.WithIsolateDDL(true),
	)
	if err != nil {
		return nil, fmt.Errorf("etcd: migrations: %w", err)
	}
	return p, nil
}

// deleteLayout deletes the layout's keys under the prefix, not goose's.
func (s *Store) deleteLayout(ctx context.Context) error {
	ops := []clientv3.Op{clientv3.OpDelete(s.keys.layout()), clientv3.OpDelete(s.keys.eventSeq()), clientv3.OpDelete(s.keys.fence())}
	for _, p := range []string{s.keys.leases(), string(s.keys) + "holders/", s.keys.events(), s.keys.segments()} {
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithRange(rangeEnd(p))))
	}
	if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("etcd: delete the key layout under %s: %w", s.keys, err)
	}
	return nil
}

// gooseStore keeps goose's version records in etcd.
type gooseStore struct{ s *Store }

var _ database.Store = gooseStore{}

type gooseRecord struct {
	Version   int64     `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

func (g gooseStore) Tablename() string { return strings.TrimSuffix(g.s.keys.goose(), "/") }

// TableExists reports whether goose's zero version is recorded.
func (g gooseStore) TableExists(ctx context.Context, db database.DBTxConn) (bool, error) {
	_, err := g.GetMigration(ctx, db, 0)
	if errors.Is(err, database.ErrVersionNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (g gooseStore) CreateVersionTable(context.Context, database.DBTxConn) error { return nil }

func (g gooseStore) Insert(ctx context.Context, _ database.DBTxConn, req database.InsertRequest) error {
	rec := gooseRecord{Version: req.Version, AppliedAt: g.s.segmentTime(time.Time{})}
	if _, err := g.s.cli.Put(ctx, g.s.keys.gooseVersion(req.Version), encode(rec)); err != nil {
		return fmt.Errorf("etcd: record migration %d: %w", req.Version, err)
	}
	return nil
}

func (g gooseStore) Delete(ctx context.Context, _ database.DBTxConn, version int64) error {
	if _, err := g.s.cli.Delete(ctx, g.s.keys.gooseVersion(version)); err != nil {
		return fmt.Errorf("etcd: delete migration %d: %w", version, err)
	}
	return nil
}

func (g gooseStore) GetMigration(ctx context.Context, _ database.DBTxConn, version int64) (*database.GetMigrationResult, error) {
	resp, err := g.s.cli.Get(ctx, g.s.keys.gooseVersion(version))
	if err != nil {
		return nil, fmt.Errorf("etcd: read migration %d: %w", version, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("migration %d: %w", version, database.ErrVersionNotFound)
	}
	var rec gooseRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return nil, fmt.Errorf("etcd: migration %d: %w", version, err)
	}
	return &database.GetMigrationResult{Timestamp: rec.AppliedAt, IsApplied: true}, nil
}

func (g gooseStore) GetLatestVersion(ctx context.Context, db database.DBTxConn) (int64, error) {
	list, err := g.ListMigrations(ctx, db)
	if err != nil {
		return 0, err
	}
	if len(list) == 0 {
		return 0, database.ErrVersionNotFound
	}
	return list[0].Version, nil
}

// ListMigrations returns the applied versions, newest first.
func (g gooseStore) ListMigrations(ctx context.Context, _ database.DBTxConn) ([]*database.ListMigrationsResult, error) {
	prefix := g.s.keys.goose()
	resp, err := g.s.cli.Get(ctx, prefix, clientv3.WithRange(rangeEnd(prefix)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, fmt.Errorf("etcd: list migrations: %w", err)
	}
	list := make([]*database.ListMigrationsResult, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), prefix), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("etcd: key %s names no migration version", kv.Key)
		}
		list = append(list, &database.ListMigrationsResult{Version: v, IsApplied: true})
	}
	return list, nil
}

// noSQL is the connector of the provider's *sql.DB; there is no SQL.
type noSQL struct{}

var errNoSQL = errors.New("etcd: the etcd store runs no SQL")

func (noSQL) Connect(context.Context) (driver.Conn, error) { return noSQLConn{}, nil }
func (noSQL) Driver() driver.Driver                        { return noSQLDriver{} }

type noSQLDriver struct{}

func (noSQLDriver) Open(string) (driver.Conn, error) { return noSQLConn{}, nil }

type noSQLConn struct{}

func (noSQLConn) Prepare(string) (driver.Stmt, error) { return nil, errNoSQL }
func (noSQLConn) Close() error                        { return nil }
func (noSQLConn) Begin() (driver.Tx, error)           { return nil, errNoSQL }
