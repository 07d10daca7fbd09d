package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
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

// MySQL error numbers after which the whole transaction is run again.
const (
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: InnoDB rolled the transaction back
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: innodb_lock_wait_timeout passed
)

// errRetry asks inTx to run the transaction again: its compare-and-set found
// the row changed under it, which SERIALIZABLE isolation should already have
// prevented.
var errRetry = errors.New("row changed during the transaction")

// inTx runs fn in a SERIALIZABLE transaction and commits it. When the
// transaction fails with a deadlock (1213) or a lock wait timeout (1205), at
// any statement or at commit, it is rolled back and run again, whole, after a
// backoff. fn must therefore not keep anything from a failed try. The context
// is checked before every try.
//
// Under SERIALIZABLE, InnoDB turns plain reads into shared locks, so two
// claimers that read the same rows and then update one deadlock, and InnoDB
// rolls one back: that is the conflict the retry resolves.
//
// Errors are returned wrapped with %w; a retry cut short by ctx returns an
// error that wraps both ctx.Err() and the last failure.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	bound := retryBackoffMin
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mysql: transaction not started: %w", err)
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
			return fmt.Errorf("mysql: transaction not retried: %w (last try: %w)", ctx.Err(), err)
		case <-t.C:
		}
		bound = min(2*bound, retryBackoffMax)
	}
}

// tryTx runs fn in one SERIALIZABLE transaction.
func (s *Store) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return fmt.Errorf("mysql: begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The transaction failed already; a failed rollback adds
			// nothing (the server rolls back when the connection goes).
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mysql: commit: %w", err)
	}
	return nil
}

// retryable reports whether err means that running the transaction again may
// succeed: a deadlock, a lock wait timeout, or errRetry.
func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case errLockDeadlock, errLockWaitTimeout:
			return true
		}
	}
	return false
}
