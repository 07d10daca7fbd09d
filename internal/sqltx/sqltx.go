// Package sqltx is the one transaction-retry helper of idgen's SQL stores:
// begin, run, commit and, when the database reports a conflict that another
// try may resolve (a serialization failure, a deadlock), roll back and run
// the whole transaction again after a capped, jittered backoff, until it
// commits, fails for another reason or the context ends.
//
// It imports no database driver. A store describes its driver's
// transactions with an Ops (how to begin, commit and roll back one) and
// says which errors deserve another try with Settings.Retryable, usually an
// errors.As on the driver's error type (HasCode):
//
//	deadlock := func(err error) bool {
//		return sqltx.HasCode(err, func(e *mysql.MySQLError) uint16 { return e.Number }, 1213)
//	}
//	r := sqltx.New(sqltx.DB(db, &sql.TxOptions{Isolation: sql.LevelSerializable}),
//		sqltx.Settings{Name: "mysql", Retryable: deadlock})
//	err := r.Run(ctx, func(tx *sql.Tx) error { … })
//
// Because a failed try is run again from the start, the function given to
// Run must not keep anything from a failed try: everything it learns, it
// learns again.
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

// ErrRetry, returned by the function given to Runner.Run (wrapped with %w
// or not), asks for the transaction to be run again like a conflict the
// database reported: the function found a row changed under it, which its
// isolation level should already have reported. Every Runner retries it.
var ErrRetry = errors.New("row changed during the transaction")

// Defaults of Settings.
const (
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait between tries:
	// it starts below DefaultMinBackoff and doubles up to DefaultMaxBackoff.
	DefaultMinBackoff = 2 * time.Millisecond
	DefaultMaxBackoff = 250 * time.Millisecond
	// RollbackTimeout bounds the rollback of a failed try. The rollback
	// runs even when the caller's context has ended.
	RollbackTimeout = 5 * time.Second
)

// Ops is how a store begins and ends one transaction of its driver; Tx is
// the driver's transaction handle (pgx.Tx, *sql.Tx), which the function
// given to Runner.Run works with. DB builds the Ops of database/sql.
type Ops[Tx any] struct {
	// Begin starts a transaction with the store's isolation level.
	Begin func(ctx context.Context) (Tx, error)
	// Commit commits tx.
	Commit func(ctx context.Context, tx Tx) error
	// Rollback rolls tx back after a failed try; its error is dropped, since
	// the failure that led to it is the one to report. ctx is not the
	// caller's: it ends after RollbackTimeout, not when the caller gives up.
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

// Settings configure a Runner. The zero value means the defaults: errors
// prefixed "sql", only ErrRetry retried, DefaultMinBackoff to
// DefaultMaxBackoff between tries.
type Settings struct {
	// Name prefixes the Runner's own errors: "postgres: commit: …".
	Name string
	// Retryable reports whether err, returned by a statement of the
	// transaction, by Begin or by Commit, means that running the whole
	// transaction again may succeed. Nil retries nothing but ErrRetry: the
	// right choice for a database whose transactions take their locks when
	// they begin (SQLite's BEGIN IMMEDIATE) and so never fail on a conflict.
	Retryable func(err error) bool
	// MinBackoff and MaxBackoff bound the wait between tries (see
	// internal/backoff); zero means the defaults.
	MinBackoff, MaxBackoff time.Duration
}

// Runner runs transactions with retries and counts the retries. It is safe
// for concurrent use; each Run has a backoff of its own.
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

// Run runs fn in a transaction and commits it. When a try fails with an
// error that is retryable (Settings.Retryable, or ErrRetry) — at Begin, in
// fn or at Commit — the transaction is rolled back and, after a backoff,
// run again from the start. Only the context ends the retries: a
// transaction that keeps colliding with others is still worth finishing,
// and the caller decides how long it may take. ctx is checked before every
// try.
//
// Errors from fn come back as fn returned them; Run's own are prefixed with
// the Runner's name and wrap their cause with %w, so that errors.Is and
// errors.As still see what the database said. When ctx ends between tries
// the error wraps both ctx.Err() and the last try's failure.
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

// Get runs fn in a transaction as r.Run does, and returns the value fn
// returned in the try that committed; on an error, the zero value. Because
// a failed try is run again, only the committed try's value is kept.
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

// try runs fn in one transaction. A try that does not commit — fn or Commit
// failed, or fn panicked — is rolled back.
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

// HasCode reports whether errors.As finds a driver error of type E in err's
// chain whose code, as code reads it, is one of codes: the test a store's
// Settings.Retryable makes, e.g. for pgx
//
//	sqltx.HasCode(err, func(e *pgconn.PgError) string { return e.Code }, "40001", "40P01")
func HasCode[E error, C comparable](err error, code func(E) C, codes ...C) bool {
	var e E
	return errors.As(err, &e) && slices.Contains(codes, code(e))
}

// Retries returns how many tries failed with a retryable error since the
// Runner was made: the transactions run again, and those a context ended
// before they could be.
func (r *Runner[Tx]) Retries() int64 { return r.retries.Load() }
