// Package sqlite is idgen's Store on SQLite, through modernc.org/sqlite (pure
// Go, no cgo): the embedded default, for one node without a database server.
//
// Open takes a sqlite:path DSN; the schema is created by the goose migrations
// returned by Store.Migrations. The database is opened in WAL mode with
// synchronous=FULL, a busy timeout and foreign keys on, and the store writes
// through a single connection whose transactions begin with BEGIN IMMEDIATE:
// they take the write lock at once, so they never fail half-way on a lock and
// need no retry. Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS', from SQLite's
// own clock (strftime('%Y-%m-%d %H:%M:%f', 'now')).
//
// synchronous=FULL makes every commit durable before it is acknowledged. In
// WAL mode NORMAL syncs only at checkpoints: a power loss or an OS crash can
// then undo transactions already acknowledged — a fetched segment range, a
// raised timestamp ceiling — and the same IDs would be handed out again.
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

// driverOptions are the modernc.org/sqlite parameters of every connection:
// wait up to 5 s for a lock held by another process, write-ahead logging
// (readers do not block the writer), every commit synced to disk before it
// is acknowledged (synchronous=FULL), foreign keys enforced, and BEGIN
// IMMEDIATE for transactions.
const driverOptions = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"

// Store is idgen's Store on SQLite. It is safe for concurrent use; writes are
// serialised through one connection.
type Store struct {
	db        *sql.DB
	driverDSN string                 // the file name and driverOptions
	tx        *sqltx.Runner[*sql.Tx] // BEGIN IMMEDIATE transactions, never retried
	// pruneBatch is how many events one statement of PruneLeaseEvents
	// deletes.
	pruneBatch int
	seq        *seqsql.Store // Sequences
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
	// BEGIN IMMEDIATE (_txlock) takes the write lock when the transaction
	// begins and waits busy_timeout for it: no statement fails later on a
	// conflict, so no error is worth another try.
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

// Migrations returns a goose provider for idgen's SQLite schema. It has a
// connection of its own to the same file, which closing the provider closes;
// the store stays open.
func (s *Store) Migrations() (*goose.Provider, error) {
	db, err := sql.Open("sqlite", s.driverDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open for migrations: %w", err)
	}
	db.SetMaxOpenConns(1)
	return sqlstore.Migrations(migrations.DialectSQLite, db)
}

// SerializationRetries returns how many transactions the store has run
// again: 0, since SQLite transactions take the write lock when they begin
// and wait for it (busy_timeout) instead of failing on a conflict.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// inTx runs fn in a transaction, begun with BEGIN IMMEDIATE, and commits it;
// a failed transaction is rolled back and not run again. Transactions that
// return a value run through sqltx.Get(ctx, s.tx, …), the same runner.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.tx.Run(ctx, fn)
}
