package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

// openTest opens a store on a fresh, migrated database, closed when t ends.
var openTest = storetest.Migrated(Open, testkit.MySQL)

// openTestDSN opens and migrates the store dsn names, closed when t ends.
func openTestDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	return storetest.OpenMigrated(t.Context(), t, Open, dsn)
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
}

func TestRestoreFence(t *testing.T) {
	storetest.RunRestoreFence(t, func(t *testing.T) storetest.FencedStore { return openTest(t) })
}

// TestStoreSnapshotIsolation runs the suite with innodb_snapshot_isolation
// on for the session, as MariaDB 11.6.2 and later have it by default: a
// transaction that reads a row another one changed since its snapshot then
// fails with error 1020 ("Record has changed since last read"), which the
// store must retry like a deadlock. MySQL has no such variable.
func TestStoreSnapshotIsolation(t *testing.T) {
	probe := openTest(t)
	var on string
	err := probe.db.QueryRowContext(t.Context(), `SELECT @@innodb_snapshot_isolation`).Scan(&on)
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == 1193 { // ER_UNKNOWN_SYSTEM_VARIABLE
		t.Skip("the server has no innodb_snapshot_isolation (MySQL, or MariaDB before 10.6.18/10.11.8): it cannot return error 1020")
	}
	if err != nil {
		t.Fatalf("read innodb_snapshot_isolation: %v", err)
	}
	open := func(t *testing.T) *Store {
		return openTestDSN(t, storetest.WithParam(t, testkit.MySQL(t), "innodb_snapshot_isolation", "ON"))
	}
	t.Run("SessionVariable", func(t *testing.T) {
		s := open(t)
		var on int
		if err := s.db.QueryRowContext(t.Context(), `SELECT @@SESSION.innodb_snapshot_isolation`).Scan(&on); err != nil {
			t.Fatalf("read innodb_snapshot_isolation: %v", err)
		}
		if on != 1 {
			t.Fatalf("@@SESSION.innodb_snapshot_isolation = %d, want 1", on)
		}
	})
	storetest.Run(t, func(t *testing.T) allocator.Store { return open(t) })
}

// TestConcurrentClaimsRetry checks that concurrent claims really collide in
// InnoDB (deadlocks under SERIALIZABLE) and that the store resolves the
// collisions by retrying.
func TestConcurrentClaimsRetry(t *testing.T) {
	storetest.ClaimsCollide(t, openTest)
}

func TestSession(t *testing.T) {
	s := openTest(t)
	var lockWait int
	var zone string
	err := s.db.QueryRowContext(t.Context(), `SELECT @@SESSION.innodb_lock_wait_timeout, @@SESSION.time_zone`).Scan(&lockWait, &zone)
	if err != nil {
		t.Fatalf("read session variables: %v", err)
	}
	if lockWait != 5 || zone != "+00:00" {
		t.Errorf("got innodb_lock_wait_timeout %d time_zone %q, want 5 \"+00:00\"", lockWait, zone)
	}
}

func TestMigrationsLeaveStoreOpen(t *testing.T) {
	storetest.MigrationsLeaveStoreOpen(t, openTest(t))
}

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn                string
		addr, user, pass   string
		db                 string
		timeout, readTO    time.Duration
		lockWait, safeName string
	}{
		{"mysql://root@127.0.0.1/idgen", "127.0.0.1:3306", "root", "", "idgen", defaultDialTimeout, defaultIOTimeout, "5",
			"mysql://root@127.0.0.1/idgen"},
		{"mysql://app:p%40ss@db.internal:3307/ids?timeout=2s&readTimeout=9s&innodb_lock_wait_timeout=3",
			"db.internal:3307", "app", "p@ss", "ids", 2 * time.Second, 9 * time.Second, "3",
			"mysql://app:xxxxx@db.internal:3307/ids?timeout=2s&readTimeout=9s&innodb_lock_wait_timeout=3"},
		{"mysql://u:pw@[::1]/d?parseTime=false&loc=Local", "[::1]:3306", "u", "pw", "d", defaultDialTimeout, defaultIOTimeout, "5",
			"mysql://u:xxxxx@[::1]/d?parseTime=false&loc=Local"},
	} {
		cfg, safe, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("parseDSN(%s): %v", tc.safeName, err)
			continue
		}
		if cfg.Addr != tc.addr || cfg.User != tc.user || cfg.Passwd != tc.pass || cfg.DBName != tc.db {
			t.Errorf("parseDSN(%s): got addr %q user %q db %q, want %q %q %q", tc.safeName, cfg.Addr, cfg.User, cfg.DBName, tc.addr, tc.user, tc.db)
		}
		if cfg.Timeout != tc.timeout || cfg.ReadTimeout != tc.readTO || cfg.Params["innodb_lock_wait_timeout"] != tc.lockWait {
			t.Errorf("parseDSN(%s): got timeout %v read timeout %v lock wait %q, want %v %v %q",
				tc.safeName, cfg.Timeout, cfg.ReadTimeout, cfg.Params["innodb_lock_wait_timeout"], tc.timeout, tc.readTO, tc.lockWait)
		}
		if !cfg.ParseTime || cfg.Loc != time.UTC || !cfg.ClientFoundRows || cfg.Params["time_zone"] != "'+00:00'" {
			t.Errorf("parseDSN(%s): got parseTime %v loc %v clientFoundRows %v time_zone %q, want true UTC true '+00:00' whatever the DSN says",
				tc.safeName, cfg.ParseTime, cfg.Loc, cfg.ClientFoundRows, cfg.Params["time_zone"])
		}
		if safe != tc.safeName {
			t.Errorf("parseDSN: got redacted DSN %q, want %q", safe, tc.safeName)
		}
	}
}

func TestOpenErrorsHidePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	storetest.OpenErrorsHidePassword(t, Open, secret, []storetest.DSNCase{
		{"refused", "mysql://idgen:" + secret + "@127.0.0.1:1/idgen?timeout=2s"},
		{"no database", "mysql://idgen:" + secret + "@127.0.0.1:3306"},
		{"bad parameter", "mysql://idgen:" + secret + "@127.0.0.1/idgen?timeout=soon"},
		{"other scheme", "postgres://idgen:" + secret + "@127.0.0.1/idgen"},
		{"not a URL", "mysql://idgen:" + secret + "@[::1/idgen"},
		{"driver form", "idgen:" + secret + "@tcp(127.0.0.1:3306)/idgen"},
		{"opaque", "mysql:idgen:" + secret + "@tcp(127.0.0.1:3306)/idgen"},
	})
}

func TestRetryable(t *testing.T) {
	storetest.Classifies(t, "retryable", retryable, []storetest.ErrCase{
		{&gomysql.MySQLError{Number: 1213}, true},
		{&gomysql.MySQLError{Number: 1205}, true},
		{&gomysql.MySQLError{Number: 1020}, true}, // record changed since last read (snapshot isolation)
		{fmt.Errorf("commit: %w", &gomysql.MySQLError{Number: 1213}), true},
		{&gomysql.MySQLError{Number: 1062}, false}, // duplicate entry
		{sql.ErrNoRows, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", allocator.ErrNoWorkerAvailable), false},
	})
}

// TestInTx checks the store's transactions through the retry helper, with
// the deadlock error as the driver's conflict.
func TestInTx(t *testing.T) {
	s := openTest(t)
	conflict := &gomysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	storetest.RetriedTx(t, s, s.inTx, func(ctx context.Context, tx *sql.Tx, worker int) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, ?)`, worker)
		return err
	}, conflict, errRetry)
}

func TestPruneLeaseEventsInBatches(t *testing.T) {
	s := openTest(t)
	s.pruneBatch = 2
	storetest.PruneInBatches(t, s, s.pruneBatch)
}

// idleTxTimeout returns the session's idle_transaction_timeout in seconds;
// it skips t on MySQL, which has no such setting.
func idleTxTimeout(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	err := s.db.QueryRowContext(t.Context(), "SELECT @@SESSION."+idleTxTimeoutParam).Scan(&v)
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == errUnknownVariable {
		t.Skip("the server has no idle_transaction_timeout (MySQL): it cannot end a session idle in a transaction")
	}
	if err != nil {
		t.Fatalf("read %s: %v", idleTxTimeoutParam, err)
	}
	return v
}

// TestIdleTransactionTimeout checks that idgen's sessions on MariaDB end a
// transaction left idle (a node paused or cut off mid-heartbeat), so that
// its row locks do not outlive its lease, and that the DSN can set the
// timeout.
func TestIdleTransactionTimeout(t *testing.T) {
	dsn := testkit.MySQL(t)
	withParam := func(v string) string { return storetest.WithParam(t, dsn, idleTxTimeoutParam, v) }
	for _, tc := range []struct {
		name, dsn string
		want      int
	}{
		{"default", dsn, 5},
		{"off in the DSN", withParam("0"), 0},
		{"set in the DSN", withParam("1"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if got := idleTxTimeout(t, s); got != tc.want {
				t.Errorf("%s: got %d, want %d", idleTxTimeoutParam, got, tc.want)
			}
		})
	}

	// A transaction idle past the timeout is ended by the server.
	s, err := Open(t.Context(), withParam("1"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	idleTxTimeout(t, s)
	tx, err := s.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var id int64
	if err := tx.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Watch the session from another connection, without a statement on
	// the idle one (which would restart its timer), for at most 10 s.
	ended := false
	for deadline := time.Now().Add(10 * time.Second); !ended && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		var n int
		if err := s.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		ended = n == 0
	}
	if !ended {
		t.Error("the session idle in a transaction still exists after 10 s with a 1 s timeout; want it ended")
	}
	if _, err := tx.ExecContext(t.Context(), "SELECT 1"); err == nil {
		t.Error("the transaction idle past its timeout still ran a statement; want the session ended")
	}
}

// TestTakeoverOfHolderPausedInTransaction pauses a holder in the middle of
// a heartbeat, as SIGSTOP or a silent network does: the server keeps its
// session idle in the transaction, with the lease row locked. Once the
// lease has expired, a spare claiming the pool as a node's keeper does
// (each try bounded by the ttl less the margin) must get the worker ID:
// the server ends the idle session and releases the lock. Without that the
// spare's claims wait on the lock for as long as the pause lasts.
func TestTakeoverOfHolderPausedInTransaction(t *testing.T) {
	s := openTest(t)
	idleTxTimeout(t, s)
	ctx := t.Context()
	claim := func(ctx context.Context, holder string, ttl time.Duration) (allocator.ClaimResult, error) {
		return s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 0, MaxWorkerID: 0, Holder: holder, TTL: ttl,
			CeilingMS: time.Now().Add(ttl).UnixMilli(), MaxClockOffset: time.Second})
	}
	paused, err := claim(ctx, "paused", time.Second)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	// The heartbeat the holder sent just before it stopped: its UPDATE ran,
	// its COMMIT never comes.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE worker_leases SET heartbeat_at = UTC_TIMESTAMP(6)
		WHERE datacenter_id = 0 AND worker_id = 0 AND holder = 'paused'`); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()

	// A bound on a hang: the lease expires after 1 s and the idle session
	// ends after DefaultIdleTransactionTimeout (5 s).
	const within = 30 * time.Second
	const ttl = 3 * time.Second
	tries := 0
	for {
		tries++
		cctx, cancel := context.WithTimeout(ctx, ttl-ttl/10)
		got, err := claim(cctx, "spare", ttl)
		cancel()
		if err == nil {
			if got.Lease.WorkerID != 0 || got.PrevHolder != "paused" || got.Lease.FencingVersion != paused.Lease.FencingVersion+1 {
				t.Errorf("spare's claim: got worker %d v%d from %q, want worker 0 v%d from the paused holder",
					got.Lease.WorkerID, got.Lease.FencingVersion, got.PrevHolder, paused.Lease.FencingVersion+1)
			}
			t.Logf("the spare took the worker ID over %s after the pause, at its claim %d", time.Since(pausedAt).Round(time.Millisecond), tries)
			return
		}
		if time.Since(pausedAt) > within {
			t.Fatalf("no takeover within %s of a holder paused inside a transaction (%d claims; the last: %v)", within, tries, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClaimLeavesOtherRowsUnlocked stops a holder inside a heartbeat (its
// UPDATE ran, its COMMIT never comes) and lets a spare claim the pool while
// that row stays locked. The spare waits for that row, but must hold no
// lock on the others meanwhile: the heartbeat of another holder must go
// through, not wait behind the spare's claim. A claim that read the pool
// with a locking read (SERIALIZABLE turns every read into one) held a
// shared lock on each row it passed, and a node paused inside a transaction
// stopped the heartbeats of every holder whose row came before its own.
func TestClaimLeavesOtherRowsUnlocked(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	claim := func(ctx context.Context, lo, hi int64, holder string, ttl time.Duration) (allocator.ClaimResult, error) {
		return s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: lo, MaxWorkerID: hi, Holder: holder, TTL: ttl,
			CeilingMS: time.Now().Add(ttl).UnixMilli(), MaxClockOffset: time.Second})
	}
	live, err := claim(ctx, 0, 0, "live", time.Minute)
	if err != nil {
		t.Fatalf("claim worker 0: %v", err)
	}
	if _, err := claim(ctx, 1, 1, "paused", 10*time.Millisecond); err != nil {
		t.Fatalf("claim worker 1: %v", err)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE worker_leases SET heartbeat_at = UTC_TIMESTAMP(6)
		WHERE datacenter_id = 0 AND worker_id = 1 AND holder = 'paused'`); err != nil {
		t.Fatal(err)
	}

	// lockWaits counts the transactions waiting for a lock whose statement
	// contains what. InnoDB refreshes what INNODB_TRX shows only when it
	// was not read for 100 ms: it is read no more often.
	lockWaits := func(what string) int {
		time.Sleep(150 * time.Millisecond)
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE CONCAT('%', ?, '%')`, what).Scan(&n)
		if err != nil {
			t.Fatalf("read the server's transactions: %v", err)
		}
		return n
	}
	testkit.WaitFor(t, 30*time.Second, "worker 1's lease expired", func() bool {
		var expired bool // a plain read: it does not wait for the lock
		err := s.db.QueryRowContext(ctx, `SELECT expires_at <= UTC_TIMESTAMP(6) FROM worker_leases
			WHERE datacenter_id = 0 AND worker_id = 1`).Scan(&expired)
		if err != nil {
			t.Fatal(err)
		}
		return expired
	})
	// The spare claims the pool: worker 1's lease has expired, and its row
	// is locked.
	spare := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, err := claim(cctx, 0, 1, "spare", 3*time.Second)
		spare <- err
	}()
	testkit.WaitFor(t, 30*time.Second, "the spare's claim waiting for worker 1's row", func() bool {
		return lockWaits("worker_leases") > 0
	})

	beat := make(chan error, 1)
	go func() {
		_, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: live.Lease.LeaseKey, Holder: "live",
			FencingVersion: live.Lease.FencingVersion, TTL: time.Minute, CeilingMS: time.Now().Add(time.Minute).UnixMilli(), MaxClockOffset: time.Second})
		beat <- err
	}()
	// Until the heartbeat is answered or waits for a lock (a bound on a
	// hang: 30 s).
	testkit.WaitFor(t, 30*time.Second, "the heartbeat of worker 0", func() bool {
		select {
		case err := <-beat:
			if err != nil {
				t.Errorf("heartbeat of worker 0 while the spare waits for worker 1: %v", err)
			}
			return true
		default:
		}
		if lockWaits("heartbeat_at") > 0 {
			t.Fatal("the heartbeat of worker 0 waits for a lock held by the spare's claim, which waits for worker 1")
		}
		return false
	})

	// The paused holder's transaction ends: the spare gets worker 1.
	_ = tx.Rollback()
	select {
	case err := <-spare:
		if err != nil {
			t.Errorf("the spare's claim after the paused transaction ended: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the spare's claim did not return within 60 s of the paused transaction's end")
	}
}
