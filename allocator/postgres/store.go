// Package postgres is idgen's Store on PostgreSQL, through pgx/v5. The
// schema comes from goose migrations (Store.Migrations); lease writes run
// in SERIALIZABLE transactions retried whole (internal/sqltx), and every
// timestamp is the database's.
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
	// pruneBatch is PruneLeaseEvents's rows per statement.
	pruneBatch int
	seq        *seqsql.Store // Sequences
}

// idleTxTimeoutParam ends sessions left idle inside a transaction.
const idleTxTimeoutParam = "idle_in_transaction_session_timeout"

// DefaultIdleInTransactionTimeout is idgen's sessions'
// idle_in_transaction_session_timeout (ms) unless the DSN sets one. A
// session idle inside idgen's back-to-back statements has lost its client
// (silent network, pause); the server then ends it and frees its row
// locks instead of waiting hours for TCP keepalive. A DSN value of 0 turns
// it off (e.g. for a pooler refusing the setting).
const DefaultIdleInTransactionTimeout = "5000"

// Open connects to dsn, e.g. postgres://user:pass@host:5432/db. Unknown
// parameters are sent as session settings, pgxpool ones size the pool. It
// pings the server; errors name the DSN without its password.
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

// dsnError is the error of an unparsable DSN, naming it without password
// (pgx only tries to remove it from its message, so keep to its cause).
func dsnError(safe string, err error) error {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) && pce.Unwrap() != nil {
		return fmt.Errorf("postgres: invalid DSN %s: %w", safe, pce.Unwrap())
	}
	return fmt.Errorf("postgres: invalid DSN %s", safe)
}

// Close closes every connection, waiting for those in use.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return dialect.Ping(ctx, s.dsn, s.pool.Ping)
}

// Migrations returns a goose provider for the PostgreSQL schema over the
// store's connections; closing it leaves the store open.
func (s *Store) Migrations() (*goose.Provider, error) {
	// A database/sql view of the pool: closing it does not close the pool.
	return migrations.NewProvider(migrations.DialectPostgres, stdlib.OpenDBFromPool(s.pool))
}

// SerializationRetries counts transactions rerun after a conflict.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// errRetry, from fn, asks inTx for another try: a compare-and-set found
// the row changed, which SERIALIZABLE should have reported.
var errRetry = sqltx.ErrRetry

// inTx runs fn in a SERIALIZABLE transaction, rerun whole on a conflict
// or errRetry (sqltx.Runner.Run; sqltx.Get for values).
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.tx.Run(ctx, fn)
}

// retryable reports a serialization failure (40001) or deadlock (40P01).
func retryable(err error) bool {
	return sqltx.HasCode(err, func(e *pgconn.PgError) string { return e.Code }, "40001", "40P01")
}
