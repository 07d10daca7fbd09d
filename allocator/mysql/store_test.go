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
	"github.com/idgen-project/idgen/internal/testdb"
	"github.com/idgen-project/idgen/internal/teststore/storecheck"
)

// openTest opens a store on a fresh, migrated database, closed when t ends.
var openTest = storecheck.Migrated(Open, testdb.MySQL)

// openTestDSN opens and migrates the store dsn names, closed when t ends.
func openTestDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	return storecheck.OpenMigrated(t.Context(), t, Open, dsn)
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
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
		return openTestDSN(t, storecheck.WithParam(t, testdb.MySQL(t), "innodb_snapshot_isolation", "ON"))
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
	storecheck.ClaimsCollide(t, openTest)
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
	storecheck.MigrationsLeaveStoreOpen(t, openTest(t))
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
	storecheck.OpenErrorsHidePassword(t, Open, secret, []storecheck.DSNCase{
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
	storecheck.Classifies(t, "retryable", retryable, []storecheck.ErrCase{
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
	storecheck.RetriedTx(t, s, s.inTx, func(ctx context.Context, tx *sql.Tx, worker int) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, ?)`, worker)
		return err
	}, conflict, errRetry)
}

func TestPruneLeaseEventsInBatches(t *testing.T) {
	s := openTest(t)
	s.pruneBatch = 2
	storetest.PruneInBatches(t, s, s.pruneBatch)
}
