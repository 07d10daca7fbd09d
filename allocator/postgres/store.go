// Package postgres is idgen's Store on PostgreSQL, through pgx/v5.
//
// Open connects with a postgres:// URL; the schema is created by the goose
// migrations returned by Store.Migrations. Leases are claimed, extended and
// released in SERIALIZABLE transactions that are retried, whole, on
// serialization failures and deadlocks (internal/sqltx); every timestamp is
// the database's (now()), never the node's clock.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/migrations"
)

var (
	_ allocator.Store        = (*Store)(nil)
	_ allocator.RetryCounter = (*Store)(nil)
)

// Store is idgen's Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	dsn  string                // redacted, for error messages
	tx   *sqltx.Runner[pgx.Tx] // SERIALIZABLE transactions, retried on conflicts
	// pruneBatch is how many events one statement of PruneLeaseEvents
	// deletes.
	pruneBatch int
	seq        *seqsql.Store // Sequences
}

// idleTxTimeoutParam is the session setting that ends a session left idle
// inside a transaction.
const idleTxTimeoutParam = "idle_in_transaction_session_timeout"

// DefaultIdleInTransactionTimeout is the idle_in_transaction_session_timeout
// (milliseconds) of idgen's sessions unless the DSN sets one. idgen sends a
// transaction's statements back to back, so a session idle inside one has
// lost its client: a node cut off from the database mid-heartbeat by a
// silent network (no FIN, no RST), or paused. The server then ends that
// session after this long and releases its row locks, so that other nodes
// can claim the worker ID it held once its lease expires, instead of
// waiting on the lock until TCP keepalive notices, which takes hours by
// default. A DSN parameter idle_in_transaction_session_timeout=0 turns it
// off (for a pooler that refuses the setting, for example).
const DefaultIdleInTransactionTimeout = "5000"

// Open connects to the PostgreSQL database named by dsn, a URL such as
// postgres://user:pass@host:5432/db?sslmode=disable. Parameters pgx does not
// know (search_path, application_name, …) are sent as session settings, and
// pool_max_conns and the other pgxpool parameters size the pool. Open checks
// that the server answers. Errors name the DSN without its password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, fmt.Errorf("postgres: invalid DSN (not shown): %w", err)
	}
	safe := dburl.Redact(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(safe, err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleTxTimeoutParam]; !set {
		cfg.ConnConfig.RuntimeParams[idleTxTimeoutParam] = DefaultIdleInTransactionTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", safe, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", safe, err)
	}
	tx := sqltx.New(sqltx.Ops[pgx.Tx]{
		Begin: func(ctx context.Context) (pgx.Tx, error) {
			return pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
		},
		Commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		Rollback: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
	}, sqltx.Settings{Name: "postgres", Retryable: retryable})
	st := &Store{pool: pool, dsn: safe, tx: tx, pruneBatch: defaultPruneBatch}
	st.seq = st.newSequences()
	return st, nil
}

// dsnError is the error of a DSN pgx cannot parse; safe is the DSN without
// its password. pgx's own message quotes the DSN, with the password removed
// on a best-effort basis only; keep to its cause.
func dsnError(safe string, err error) error {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) && pce.Unwrap() != nil {
		return fmt.Errorf("postgres: invalid DSN %s: %w", safe, pce.Unwrap())
	}
	return fmt.Errorf("postgres: invalid DSN %s", safe)
}

// Close closes every connection of the store. It waits for connections in
// use to be given back.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return dialect.Ping(ctx, s.dsn, s.pool.Ping)
}

// Migrations returns a goose provider for idgen's PostgreSQL schema, working
// through the store's connections. Closing the provider leaves the store open.
func (s *Store) Migrations() (*goose.Provider, error) {
	// A database/sql view of the pool: closing it does not close the pool.
	return migrations.NewProvider(migrations.DialectPostgres, stdlib.OpenDBFromPool(s.pool))
}

// SerializationRetries returns how many transactions the store has run again
// after a serialization failure or deadlock since it was opened.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// errRetry, returned by fn, asks inTx for another try: a compare-and-set
// found the row changed, which SERIALIZABLE should have reported already.
var errRetry = sqltx.ErrRetry

// inTx runs fn in a SERIALIZABLE transaction and commits it, running it
// again, whole, on a conflict (retryable) or errRetry; see sqltx.Runner.Run.
// Transactions that return a value run through sqltx.Get(ctx, s.tx, …), the
// same runner.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.tx.Run(ctx, fn)
}

// retryable reports whether err is a serialization failure (SQLSTATE 40001)
// or a deadlock (40P01), after which another try may succeed.
func retryable(err error) bool {
	return sqltx.HasCode(err, func(e *pgconn.PgError) string { return e.Code }, "40001", "40P01")
}
