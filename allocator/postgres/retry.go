package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Backoff between tries of a transaction: a random wait (full jitter) below a
// bound that starts at retryBackoffMin and doubles after every failure up to
// retryBackoffMax. Only the context ends the retries: a claim that keeps
// colliding with others is still worth finishing, and the caller decides how
// long it may take.
const (
	retryBackoffMin = 2 * time.Millisecond
	retryBackoffMax = 250 * time.Millisecond
)

// rollbackTimeout bounds the rollback of a failed transaction.
const rollbackTimeout = 5 * time.Second

// errRetry asks inTx to run the transaction again: its compare-and-set found
// the row changed under it, which SERIALIZABLE isolation should already have
// reported as a serialization failure.
var errRetry = errors.New("row changed during the transaction")

// inTx runs fn in a SERIALIZABLE transaction and commits it. When the
// transaction fails with a serialization failure (SQLSTATE 40001) or a
// deadlock (40P01), at any statement or at commit, it is rolled back and run
// again, whole, after a backoff. fn must therefore not keep anything from a
// failed try. The context is checked before every try.
//
// Errors are returned wrapped with %w, so that callers and tests can still
// see what the database said; a retry cut short by ctx returns an error that
// wraps both ctx.Err() and the last failure.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	bound := retryBackoffMin
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("postgres: transaction not started: %w", err)
		}
		err := s.tryTx(ctx, fn)
		if err == nil || !retryable(err) {
			return err
		}
		s.retries.Add(1)
		t := time.NewTimer(rand.N(bound) + 1)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("postgres: transaction not retried: %w (last try: %w)", ctx.Err(), err)
		case <-t.C:
		}
		bound = min(2*bound, retryBackoffMax)
	}
}

// tryTx runs fn in one SERIALIZABLE transaction.
func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The transaction failed already; a failed rollback adds
			// nothing (the server aborts the transaction when the
			// connection goes). It runs even when ctx is done.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			_ = tx.Rollback(rctx)
			cancel()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// retryable reports whether err means that running the transaction again may
// succeed: a serialization failure, a deadlock, or errRetry.
func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01": // deadlock_detected
			return true
		}
	}
	return false
}
