package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestInTx checks the store's transactions through the retry helper: a
// try that fails with the driver's conflict error, then one that returns
// errRetry, are rolled back (their rows are gone) and counted, and the third
// try commits.
func TestInTx(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	conflict := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
	before := s.SerializationRetries()
	tries := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tries++
		if _, err := tx.Exec(ctx, `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, $1)`, tries); err != nil {
			return err
		}
		switch tries {
		case 1:
			return fmt.Errorf("step: %w", conflict)
		case 2:
			return errRetry
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Fatalf("got %v after %d tries, want success after 3", err, tries)
	}
	if got := s.SerializationRetries() - before; got != 2 {
		t.Errorf("retry counter grew by %d, want 2", got)
	}
	leases, err := s.ListLeases(ctx)
	var workers []int64
	for _, l := range leases {
		workers = append(workers, l.WorkerID)
	}
	if err != nil || len(workers) != 1 || workers[0] != 3 {
		t.Errorf("got rows of workers %v, %v; want only worker 3's: the failed tries rolled back", workers, err)
	}
}

func TestPruneLeaseEventsInBatches(t *testing.T) {
	s := openTest(t)
	s.pruneBatch = 2
	storetest.PruneInBatches(t, s, s.pruneBatch)
}

// TestIdleInTransactionTimeout checks that idgen's sessions end a
// transaction left idle (a node cut off mid-heartbeat), so that its row
// locks do not outlive its lease, and that the DSN can set the timeout.
func TestIdleInTransactionTimeout(t *testing.T) {
	dsn := testdb.Postgres(t)
	withParam := func(v string) string {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + idleTxTimeoutParam + "=" + v
	}
	for _, tc := range []struct{ name, dsn, want string }{
		{"default", dsn, "5s"},
		{"off in the DSN", withParam("0"), "0"},
		{"set in the DSN", withParam("300"), "300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			var got string
			if err := s.pool.QueryRow(t.Context(), "SHOW "+idleTxTimeoutParam).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: got %q, want %q", idleTxTimeoutParam, got, tc.want)
			}
		})
	}

	// A transaction idle past the timeout is ended by the server.
	s, err := Open(t.Context(), withParam("300"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	tx, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var pid int
	if err := tx.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// Watch the session from another connection, without a statement on
	// the idle one (which would restart its timer), for at most 10 s.
	ended := false
	for deadline := time.Now().Add(10 * time.Second); !ended && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		var n int
		if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		ended = n == 0
	}
	if !ended {
		t.Error("the session idle in a transaction still exists after 10 s with a 300ms timeout; want it ended")
	}
	if _, err := tx.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Error("the transaction idle past its timeout still ran a statement; want the session ended")
	}
}
