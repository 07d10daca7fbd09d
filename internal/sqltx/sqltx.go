// Package sqltx is the transaction-retry helper of idgen's SQL stores:
// begin, run, commit, and on a conflict (serialization failure, deadlock)
// roll back and rerun the whole transaction after a capped, jittered
// backoff, until it commits, fails otherwise or ctx ends. It imports no
// driver: stores supply an Ops and Settings.Retryable (usually HasCode):
//
//	deadlock := func(err error) bool {
//		return sqltx.HasCode(err, func(e *mysql.MySQLError) uint16 { return e.Number }, 1213)
//	}
//	r := sqltx.New(sqltx.DB(db, &sql.TxOptions{Isolation: sql.LevelSerializable}),
//		sqltx.Settings{Name: "mysql", Retryable: deadlock})
//	err := r.Run(ctx, func(tx *sql.Tx) error { … })
//
// The function given to Run must keep nothing from a failed try.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/internal/backoff"
)

// ErrRetry, from Run's function, reruns the transaction like a conflict:
// a row changed that the isolation level should have reported.
var ErrRetry = errors.New("row changed during the transaction")

// Defaults of Settings.
const (
	DefaultMinBackoff = 2 * time.Millisecond
	DefaultMaxBackoff = 250 * time.Millisecond
	// RollbackTimeout bounds a failed try's rollback, which runs even
	// after the caller's context ended.
	RollbackTimeout = 5 * time.Second
)

// Ops begins and ends one transaction of a driver; Tx is the driver's
// handle. DB builds database/sql's.
type Ops[Tx any] struct {
	Begin  func(ctx context.Context) (Tx, error) // with the store's isolation level
	Commit func(ctx context.Context, tx Tx) error
	// Rollback rolls tx back after a failed try; its error is dropped and
	// its ctx ends after RollbackTimeout.
	Rollback func(ctx context.Context, tx Tx) error
}

// DB returns the Ops of database/sql transactions begun on db with opts
// (nil for the driver's defaults).
func DB(db *sql.DB, opts *sql.TxOptions) Ops[*sql.Tx] {
	return Ops[*sql.Tx]{
		Begin:    func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, opts) },
		Commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		Rollback: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
	}
}

// Settings configure a Runner; zero fields mean the defaults.
type Settings struct {
	// Name prefixes the Runner's own errors; "" is "sql".
	Name string
	// Retryable reports whether err (statement, Begin or Commit) may pass
	// on a rerun. Nil retries only ErrRetry, right for databases that
	// lock at begin (SQLite's BEGIN IMMEDIATE).
	Retryable func(err error) bool
	// MinBackoff and MaxBackoff bound the wait between tries.
	MinBackoff, MaxBackoff time.Duration
}

// Runner runs transactions with retries and counts them; safe for
// concurrent use.
type Runner[Tx any] struct {
	ops       Ops[Tx]
	name      string
	retryable func(error) bool
	min, max  time.Duration
	retries   atomic.Int64
}

// New returns a Runner for the transactions ops begins.
func New[Tx any](ops Ops[Tx], s Settings) *Runner[Tx] {
	r := &Runner[Tx]{ops: ops, name: s.Name, retryable: s.Retryable, min: s.MinBackoff, max: s.MaxBackoff}
	if r.name == "" {
		r.name = "sql"
	}
	if r.retryable == nil {
		r.retryable = func(error) bool { return false }
	}
	if r.min <= 0 {
		r.min = DefaultMinBackoff
	}
	if r.max <= 0 {
		r.max = DefaultMaxBackoff
	}
	return r
}

// Run runs fn in a transaction and commits it; a retryable failure at
// Begin, in fn or at Commit is rolled back and rerun after a backoff. Only
// ctx ends the retries. fn's errors come back as is; Run's own are
// prefixed with the Runner's name. When ctx ends between tries the error
// wraps ctx.Err() and the last failure.
func (r *Runner[Tx]) Run(ctx context.Context, fn func(tx Tx) error) error {
	var b *backoff.Backoff // made at the first retry: most transactions need none
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: transaction not started: %w", r.name, err)
		}
		err := r.try(ctx, fn)
		if err == nil || !(errors.Is(err, ErrRetry) || r.retryable(err)) {
			return err
		}
		r.retries.Add(1)
		if b == nil {
			b = backoff.New(r.min, r.max)
		}
		if werr := b.Wait(ctx); werr != nil {
			return fmt.Errorf("%s: transaction not retried: %w (last try: %w)", r.name, werr, err)
		}
	}
}

// Get runs fn as Run does and returns the committed try's value.
func Get[T, Tx any](ctx context.Context, r *Runner[Tx], fn func(tx Tx) (T, error)) (T, error) {
	var v T
	err := r.Run(ctx, func(tx Tx) error {
		var err error
		v, err = fn(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// try runs fn in one transaction, rolled back unless committed (panics
// too).
func (r *Runner[Tx]) try(ctx context.Context, fn func(tx Tx) error) error {
	tx, err := r.ops.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", r.name, err)
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackTimeout)
			_ = r.ops.Rollback(rctx, tx)
			cancel()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := r.ops.Commit(ctx, tx); err != nil {
		return fmt.Errorf("%s: commit: %w", r.name, err)
	}
	committed = true
	return nil
}

// HasCode reports whether err's chain holds a driver error of type E whose
// code is one of codes, e.g. for pgx
//
//	sqltx.HasCode(err, func(e *pgconn.PgError) string { return e.Code }, "40001", "40P01")
func HasCode[E error, C comparable](err error, code func(E) C, codes ...C) bool {
	var e E
	return errors.As(err, &e) && slices.Contains(codes, code(e))
}

// Retries counts tries failed with a retryable error.
func (r *Runner[Tx]) Retries() int64 { return r.retries.Load() }
