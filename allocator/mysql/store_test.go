package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	s, err := Open(t.Context(), testdb.MySQL(t))
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
		{fmt.Errorf("commit: %w", &gomysql.MySQLError{Number: 1213}), true},
		{errRetry, true},
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

func TestInTx(t *testing.T) {
	s := openTest(t)
	deadlock := &gomysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}

	t.Run("retries until success", func(t *testing.T) {
		before := s.SerializationRetries()
		tries := 0
		err := s.inTx(t.Context(), func(tx *sql.Tx) error {
			tries++
			if tries < 3 {
				return fmt.Errorf("step: %w", deadlock)
			}
			_, err := tx.ExecContext(t.Context(), "SELECT 1")
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
		err := s.inTx(t.Context(), func(*sql.Tx) error { tries++; return boom })
		if !errors.Is(err, boom) || tries != 1 {
			t.Errorf("got %v after %d tries, want boom after 1", err, tries)
		}
	})
	t.Run("context ends the retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		tries := 0
		err := s.inTx(ctx, func(*sql.Tx) error {
			tries++
			if tries == 2 {
				cancel()
			}
			return deadlock
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, deadlock) {
			t.Errorf("got %v, want an error wrapping context.Canceled and the last failure", err)
		}
		if tries != 2 {
			t.Errorf("got %d tries, want 2 (none after the context ended)", tries)
		}
	})
	t.Run("rolled back on failure", func(t *testing.T) {
		boom := errors.New("boom")
		err := s.inTx(t.Context(), func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(t.Context(), `INSERT INTO worker_leases (datacenter_id, worker_id) VALUES (9, 9)`); err != nil {
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
