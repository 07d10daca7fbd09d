// Package sqlite is idgen's Store on SQLite, through modernc.org/sqlite (pure
// Go, no cgo): the embedded default, for one node without a database server.
//
// Open takes a sqlite:path DSN. The database runs in WAL mode with
// synchronous=FULL, a busy timeout and foreign keys, and writes through one
// connection whose BEGIN IMMEDIATE transactions take the write lock at once,
// so they never fail half-way and need no retry. Times are UTC text from
// SQLite's clock. FULL matters: in WAL mode NORMAL lets a power loss undo
// acknowledged commits, and IDs would be handed out twice.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/migrations"
)

var (
	_ allocator.Store        = (*Store)(nil)
	_ allocator.RetryCounter = (*Store)(nil)
)

// driverOptions are every connection's parameters: 5 s busy timeout, WAL,
// synchronous=FULL, foreign keys, BEGIN IMMEDIATE.
const driverOptions = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"

// Store is idgen's Store on SQLite. It is safe for concurrent use; writes
// go through one connection.
type Store struct {
	db        *sql.DB
	driverDSN string                 // the file name and driverOptions
	tx        *sqltx.Runner[*sql.Tx] // BEGIN IMMEDIATE transactions, never retried
	// pruneBatch is how many events one prune statement deletes.
	pruneBatch int
	seq        *seqsql.Store // Sequences
}

// Open opens (creating if missing) the database file dsn names: sqlite:path,
// relative or absolute (sqlite:///abs works too). In-memory databases are
// refused: the store and migrations need the same database.
func Open(ctx context.Context, dsn string) (*Store, error) {
	path, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	driverDSN := path + driverOptions
	db, err := sql.Open("sqlite", driverDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// BEGIN IMMEDIATE waits busy_timeout for the write lock up front, so
	// no statement later fails on a conflict.
	tx := sqltx.New(sqltx.DB(db, nil), sqltx.Settings{Name: "sqlite"})
	st := &Store{db: db, driverDSN: driverDSN, tx: tx, pruneBatch: defaultPruneBatch}
	st.seq = st.newSequences()
	return st, nil
}

// parseDSN returns the file name in a sqlite: DSN.
func parseDSN(dsn string) (string, error) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return "", fmt.Errorf("sqlite: invalid DSN %q: want sqlite:path", dsn)
	}
	path = strings.TrimPrefix(path, "//")
	switch {
	case path == "":
		return "", fmt.Errorf("sqlite: invalid DSN %q: no file name", dsn)
	case path == ":memory:" || strings.HasPrefix(path, "file:") || strings.Contains(path, "mode=memory"):
		return "", fmt.Errorf("sqlite: invalid DSN %q: give the path of a database file", dsn)
	case strings.Contains(path, "?"):
		return "", fmt.Errorf("sqlite: invalid DSN %q: parameters are not accepted", dsn)
	}
	return path, nil
}

// Close closes the store's connection.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// Ping checks that the database can be reached.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// Migrations returns a goose provider for the SQLite schema on its own
// connection; closing it leaves the store open.
func (s *Store) Migrations() (*goose.Provider, error) {
	db, err := sql.Open("sqlite", s.driverDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open for migrations: %w", err)
	}
	db.SetMaxOpenConns(1)
	return sqlstore.Migrations(migrations.DialectSQLite, db)
}

// SerializationRetries returns 0: transactions wait for the write lock
// instead of failing on a conflict.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// inTx runs fn in a BEGIN IMMEDIATE transaction and commits it; a failure
// rolls back and is not retried.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.tx.Run(ctx, fn)
}
