package storetest

// The helpers below are shared by the in-package tests of idgen's own
// stores (allocator/mysql, postgres, sqlite and etcd); each store passes in
// what differs: its Open, its transaction helper, its driver's errors.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
)

// Migratable is what OpenMigrated needs of a store: every idgen store has
// its schema migrations.
type Migratable interface {
	Migrations() (*goose.Provider, error)
	Close() error
}

// OpenMigrated opens the store dsn names with open, applies every migration
// and closes the store when tb ends. It closes the migrations provider once
// done, which leaves the store open (see MigrationsLeaveStoreOpen).
func OpenMigrated[S Migratable](ctx context.Context, tb testing.TB, open func(context.Context, string) (S, error), dsn string) S {
	tb.Helper()
	s, err := open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	p, err := s.Migrations()
	if err != nil {
		tb.Fatalf("migrations: %v", err)
	}
	defer p.Close()
	if _, err := p.Up(ctx); err != nil {
		tb.Fatalf("migrate up: %v", err)
	}
	return s
}

// Migrated returns the openTest of a SQL store package's tests: it opens a
// store with open on the fresh database that fresh (testkit.Postgres,
// testkit.MySQL, testkit.SQLite) gives the test, migrated by OpenMigrated and
// closed when the test ends.
func Migrated[S Migratable](open func(context.Context, string) (S, error), fresh func(testing.TB) string) func(testing.TB) S {
	return func(tb testing.TB) S {
		tb.Helper()
		return OpenMigrated(tb.Context(), tb, open, fresh(tb))
	}
}

// MigrationsLeaveStoreOpen checks that closing the provider Migrations
// returns does not close s: app.Open migrates the store (migrateUp),
// closes the provider and goes on using the store.
func MigrationsLeaveStoreOpen(t *testing.T, s interface {
	Migratable
	Ping(ctx context.Context) error
}) {
	t.Helper()
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

// RetryingStore is a store that retries a transaction after a conflict and
// counts the retries.
type RetryingStore interface {
	allocator.Store
	allocator.RetryCounter
}

// ClaimsCollide checks that concurrent claims really collide in the store's
// database and that the store resolves the collisions by retrying. Whether
// two claims overlap is up to the scheduler: it repeats the race on a fresh
// store from open until one did (it nearly always does at once).
func ClaimsCollide[S RetryingStore](t *testing.T, open func(testing.TB) S) {
	t.Helper()
	const rounds = 10
	for round := 1; round <= rounds; round++ {
		s := open(t)
		ClaimConcurrently(t, s, 32, 8)
		if got := s.SerializationRetries(); got > 0 {
			t.Logf("round %d: %d serialization retries", round, got)
			return
		}
	}
	t.Errorf("SerializationRetries() = 0 after %d rounds of 32 concurrent claims of 8 worker IDs, want > 0", rounds)
}

// RetriedTx checks a SQL store's transaction helper inTx: a try that fails
// with the driver's conflict error, then one that returns errRetry, are
// rolled back (the worker_leases rows insert wrote in them are gone) and
// counted, and the third try commits. insert writes a row of datacenter 9
// and the worker ID it is given.
func RetriedTx[Tx any](t *testing.T, s RetryingStore, inTx func(context.Context, func(Tx) error) error,
	insert func(ctx context.Context, tx Tx, worker int) error, conflict, errRetry error) {
	t.Helper()
	ctx := t.Context()
	before := s.SerializationRetries()
	tries := 0
	err := inTx(ctx, func(tx Tx) error {
		tries++
		if err := insert(ctx, tx, tries); err != nil {
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

// DSNCase is a DSN that open must refuse, named for its subtest. It names
// an unnamed struct type, so that tables may list it unkeyed.
type DSNCase = struct{ Name, DSN string }

// OpenErrorsHidePassword checks that open refuses each DSN with an error
// that does not show secret, the password the DSNs carry.
func OpenErrorsHidePassword[S interface{ Close() error }](t *testing.T, open func(context.Context, string) (S, error), secret string, cases []DSNCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			s, err := open(t.Context(), tc.DSN)
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

// WantRisk is a durability risk a test expects: its String(), whether it
// is only a warning, and a text its Fix contains. It names an unnamed
// struct type, so that tables may list it unkeyed.
type WantRisk = struct {
	Risk    string // Setting=Value
	Warning bool
	Fix     string // in Fix
}

// CheckRisks checks that got are the risks want describes, in order.
func CheckRisks(t *testing.T, got []allocator.DurabilityRisk, want []WantRisk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got risks %v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].String() != w.Risk || got[i].Warning != w.Warning || !strings.Contains(got[i].Fix, w.Fix) {
			t.Errorf("risk %d: got %v (warning %v, fix %q), want %s (warning %v, fix containing %q)",
				i, got[i], got[i].Warning, got[i].Fix, w.Risk, w.Warning, w.Fix)
		}
	}
}

// WithParam returns the URL-form dsn with the query parameter key set to
// value.
func WithParam(tb testing.TB, dsn, key, value string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("test DSN: %v", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// ErrCase is an error and whether the classifier a test checks reports it.
// It names an unnamed struct type, so that tables may list it unkeyed.
type ErrCase = struct {
	Err  error
	Want bool
}

// Classifies checks that classify, called name in failures, reports each
// case's error as the case wants: how a store tells the errors it retries
// from those it returns.
func Classifies(t *testing.T, name string, classify func(error) bool, cases []ErrCase) {
	t.Helper()
	for _, tc := range cases {
		if got := classify(tc.Err); got != tc.Want {
			t.Errorf("%s(%v) = %v, want %v", name, tc.Err, got, tc.Want)
		}
	}
}
