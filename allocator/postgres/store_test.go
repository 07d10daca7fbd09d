package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

// openTest opens a store on a fresh, migrated schema, closed when t ends.
var openTest = storetest.Migrated(Open, testkit.Postgres)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
}

func TestRestoreFence(t *testing.T) {
	storetest.RunRestoreFence(t, func(t *testing.T) storetest.FencedStore { return openTest(t) })
}

// TestConcurrentClaimsRetry checks that concurrent claims really collide in
// PostgreSQL and that the store resolves the collisions by retrying.
func TestConcurrentClaimsRetry(t *testing.T) {
	storetest.ClaimsCollide(t, openTest)
}

func TestMigrationsLeaveStoreOpen(t *testing.T) {
	storetest.MigrationsLeaveStoreOpen(t, openTest(t))
}

func TestOpenErrorsHidePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	storetest.OpenErrorsHidePassword(t, Open, secret, []storetest.DSNCase{
		{"refused", "postgres://idgen:" + secret + "@127.0.0.1:1/idgen?sslmode=disable&connect_timeout=2"},
		{"bad port", "postgres://idgen:" + secret + "@127.0.0.1:notaport/idgen"},
		{"bad parameter", "postgres://idgen:" + secret + "@127.0.0.1/idgen?sslmode=sometimes"},
		{"not a URL", "postgres://idgen:" + secret + "@[::1/idgen"},
		{"opaque", "postgres:idgen:" + secret + "@127.0.0.1/idgen"},
		{"key=value", "host=127.0.0.1 port=1 user=idgen password=" + secret + " connect_timeout=2"},
		{"key=value, bad", "host=127.0.0.1 port=x password=" + secret},
	})
}

func TestRetryable(t *testing.T) {
	storetest.Classifies(t, "retryable", retryable, []storetest.ErrCase{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"}), true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{pgx.ErrNoRows, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", allocator.ErrNoWorkerAvailable), false},
	})
}

// TestInTx checks the store's transactions through the retry helper, with
// the serialization failure as the driver's conflict.
func TestInTx(t *testing.T) {
	s := openTest(t)
	conflict := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
	storetest.RetriedTx(t, s, s.inTx, func(ctx context.Context, tx pgx.Tx, worker int) error {
		_, err := tx.Exec(ctx, `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, $1)`, worker)
		return err
	}, conflict, errRetry)
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
	dsn := testkit.Postgres(t)
	withParam := func(v string) string { return storetest.WithParam(t, dsn, idleTxTimeoutParam, v) }
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
