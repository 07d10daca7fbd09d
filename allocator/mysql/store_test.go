package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testdb"
)

// openTest opens a store on a fresh, migrated database, closed when t ends.
func openTest(t *testing.T) *Store {
	t.Helper()
	return openTestDSN(t, testdb.MySQL(t))
}

// openTestDSN opens and migrates the store dsn names, closed when t ends.
func openTestDSN(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
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
		u, err := url.Parse(testdb.MySQL(t))
		if err != nil {
			t.Fatalf("test DSN: %v", err)
		}
		q := u.Query()
		q.Set("innodb_snapshot_isolation", "ON")
		u.RawQuery = q.Encode()
		return openTestDSN(t, u.String())
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
	for _, tc := range []struct{ name, dsn string }{
		{"refused", "mysql://idgen:" + secret + "@127.0.0.1:1/idgen?timeout=2s"},
		{"no database", "mysql://idgen:" + secret + "@127.0.0.1:3306"},
		{"bad parameter", "mysql://idgen:" + secret + "@127.0.0.1/idgen?timeout=soon"},
		{"other scheme", "postgres://idgen:" + secret + "@127.0.0.1/idgen"},
		{"not a URL", "mysql://idgen:" + secret + "@[::1/idgen"},
		{"driver form", "idgen:" + secret + "@tcp(127.0.0.1:3306)/idgen"},
		{"opaque", "mysql:idgen:" + secret + "@tcp(127.0.0.1:3306)/idgen"},
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
		{&gomysql.MySQLError{Number: 1213}, true},
		{&gomysql.MySQLError{Number: 1205}, true},
		{&gomysql.MySQLError{Number: 1020}, true}, // record changed since last read (snapshot isolation)
		{fmt.Errorf("commit: %w", &gomysql.MySQLError{Number: 1213}), true},
		{&gomysql.MySQLError{Number: 1062}, false}, // duplicate entry
		{sql.ErrNoRows, false},
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
	conflict := &gomysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	before := s.SerializationRetries()
	tries := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		tries++
		if _, err := tx.ExecContext(ctx, `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, ?)`, tries); err != nil {
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
