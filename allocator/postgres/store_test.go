package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testdb"
)

// openTest opens a store on a fresh, migrated schema, closed when t ends.
func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), testdb.Postgres(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p, err := s.Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	defer p.Close()
	if _, err := p.Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
}

// TestConcurrentClaimsRetry checks that concurrent claims really collide in
// PostgreSQL and that the store resolves the collisions by retrying.
func TestConcurrentClaimsRetry(t *testing.T) {
	// Whether two claims overlap is up to the scheduler; repeat the race on
	// a fresh database until one did (it nearly always does at once).
	const rounds = 10
	for round := 1; round <= rounds; round++ {
		s := openTest(t)
		storetest.ClaimConcurrently(t, s, 32, 8)
		if got := s.SerializationRetries(); got > 0 {
			t.Logf("round %d: %d serialization retries", round, got)
			return
		}
	}
	t.Errorf("SerializationRetries() = 0 after %d rounds of 32 concurrent claims of 8 worker IDs, want > 0", rounds)
}

func TestMigrationsLeaveStoreOpen(t *testing.T) {
	s := openTest(t)
	p, err := s.Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close provider: %v", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after closing the migrations provider: %v", err)
	}
}

func TestOpenErrorsHidePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, tc := range []struct{ name, dsn string }{
		{"refused", "postgres://idgen:" + secret + "@127.0.0.1:1/idgen?sslmode=disable&connect_timeout=2"},
		{"bad port", "postgres://idgen:" + secret + "@127.0.0.1:notaport/idgen"},
		{"bad parameter", "postgres://idgen:" + secret + "@127.0.0.1/idgen?sslmode=sometimes"},
		{"not a URL", "postgres://idgen:" + secret + "@[::1/idgen"},
		{"opaque", "postgres:idgen:" + secret + "@127.0.0.1/idgen"},
		{"key=value", "host=127.0.0.1 port=1 user=idgen password=" + secret + " connect_timeout=2"},
		{"key=value, bad", "host=127.0.0.1 port=x password=" + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.dsn)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open succeeded, want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"}), true},
		{errRetry, true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{pgx.ErrNoRows, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", allocator.ErrNoWorkerAvailable), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestInTx(t *testing.T) {
	s := openTest(t)
	serialization := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}

	t.Run("retries until success", func(t *testing.T) {
		before := s.SerializationRetries()
		tries := 0
		err := s.inTx(t.Context(), func(tx pgx.Tx) error {
			tries++
			if tries < 3 {
				return fmt.Errorf("step: %w", serialization)
			}
			_, err := tx.Exec(t.Context(), "SELECT 1")
			return err
		})
		if err != nil || tries != 3 {
			t.Errorf("got %v after %d tries, want success after 3", err, tries)
		}
		if got := s.SerializationRetries() - before; got != 2 {
			t.Errorf("retry counter grew by %d, want 2", got)
		}
	})
	t.Run("other errors are not retried", func(t *testing.T) {
		tries := 0
		boom := errors.New("boom")
		err := s.inTx(t.Context(), func(pgx.Tx) error { tries++; return boom })
		if !errors.Is(err, boom) || tries != 1 {
			t.Errorf("got %v after %d tries, want boom after 1", err, tries)
		}
	})
	t.Run("context ends the retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		tries := 0
		err := s.inTx(ctx, func(pgx.Tx) error {
			tries++
			if tries == 2 {
				cancel()
			}
			return serialization
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, serialization) {
			t.Errorf("got %v, want an error wrapping context.Canceled and the last failure", err)
		}
		if tries != 2 {
			t.Errorf("got %d tries, want 2 (none after the context ended)", tries)
		}
	})
	t.Run("rolled back on failure", func(t *testing.T) {
		boom := errors.New("boom")
		err := s.inTx(t.Context(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(t.Context(), `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, 9)`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want boom", err)
		}
		leases, err := s.ListLeases(t.Context())
		if err != nil || len(leases) != 0 {
			t.Errorf("after a failed transaction: %d rows, %v; want none", len(leases), err)
		}
	})
}
