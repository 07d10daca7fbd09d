// Package sqlite is idgen's Store on SQLite, through modernc.org/sqlite (pure
// Go, no cgo): the embedded default, for one node without a database server.
//
// Open takes a sqlite:path DSN; the schema is created by the goose migrations
// returned by Store.Migrations. The database is opened in WAL mode with a busy
// timeout and foreign keys on, and the store writes through a single
// connection whose transactions begin with BEGIN IMMEDIATE: they take the
// write lock at once, so they never fail half-way on a lock and need no retry.
// Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS', from SQLite's own clock
// (strftime('%Y-%m-%d %H:%M:%f', 'now')).
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/migrations"
)

var _ allocator.Store = (*Store)(nil)

// driverOptions are the modernc.org/sqlite parameters of every connection:
// wait up to 5 s for a lock held by another process, write-ahead logging
// (readers do not block the writer), foreign keys enforced, and BEGIN
// IMMEDIATE for transactions.
const driverOptions = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"

// Store is idgen's Store on SQLite. It is safe for concurrent use; writes are
// serialised through one connection.
type Store struct {
	db        *sql.DB
	driverDSN string // the file name and driverOptions
}

// Open opens (and creates when missing) the SQLite database file named by
// dsn: sqlite:path, e.g. sqlite:/var/lib/idgen/idgen.db or sqlite:idgen.db
// (relative to the working directory); sqlite:///var/lib/idgen/idgen.db is
// read as an absolute path too. In-memory databases are refused: a store and
// its migrations need to reach the same database from several connections.
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
	return &Store{db: db, driverDSN: driverDSN}, nil
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

// Migrations returns a goose provider for idgen's SQLite schema. It has a
// connection of its own to the same file, which closing the provider closes;
// the store stays open.
func (s *Store) Migrations() (*goose.Provider, error) {
	db, err := sql.Open("sqlite", s.driverDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open for migrations: %w", err)
	}
	db.SetMaxOpenConns(1)
	p, err := migrations.NewProvider(migrations.DialectSQLite, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return p, nil
}

// SerializationRetries returns 0: SQLite transactions take the write lock
// when they begin and wait for it (busy_timeout) instead of failing, so the
// store never runs one again.
func (s *Store) SerializationRetries() int64 { return 0 }

// inTx runs fn in a transaction, begun with BEGIN IMMEDIATE, and commits it.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error that made us roll back is the one to report
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}
