// Package teststore gives a test a migrated Store of its own on each
// database idgen supports, built on internal/testdb and, for etcd,
// internal/etcdtest.
package teststore

import (
	"context"
	"testing"

	"github.com/idgen-project/idgen/internal/etcdtest"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testdb"
	"github.com/idgen-project/idgen/internal/teststore/storecheck"
)

// Dialects are the databases every store-backed test runs on: the SQL
// databases, whose schema, migrations and command-line output are alike.
var Dialects = []string{"sqlite", "postgres", "mysql"}

// StoreDialects are Dialects and etcd: every Store, for the tests of the
// lease keeper and the segment allocator, which see a store only through
// the allocator's interfaces. A package that runs them calls etcdtest.Main
// from its TestMain, so that the etcd test cluster is stopped.
var StoreDialects = []string{"sqlite", "postgres", "mysql", "etcd"}

// Parallel runs test once per dialect of dialects (Dialects or
// StoreDialects), each in a parallel subtest named after its dialect.
func Parallel(t *testing.T, dialects []string, test func(t *testing.T, dialect string)) {
	t.Helper()
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			test(t, dialect)
		})
	}
}

// DSN returns the DSN of a fresh, empty database of the dialect (for etcd,
// a fresh key prefix on the test cluster); see testdb and etcdtest for
// where it comes from and when the test is skipped or fails instead.
func DSN(tb testing.TB, dialect string) string {
	tb.Helper()
	switch dialect {
	case "postgres":
		return testdb.Postgres(tb)
	case "mysql":
		return testdb.MySQL(tb)
	case "sqlite":
		return testdb.SQLite(tb)
	case "etcd":
		return etcdtest.DSN(tb)
	}
	tb.Fatalf("teststore: unknown dialect %q", dialect)
	return ""
}

// Open returns a Store on a fresh database of the dialect with every
// migration applied, closed when the test ends.
func Open(tb testing.TB, dialect string) stores.Store {
	tb.Helper()
	return OpenDSN(tb, DSN(tb, dialect))
}

// OpenDSN opens and migrates the store dsn names, closed when the test ends.
func OpenDSN(tb testing.TB, dsn string) stores.Store {
	tb.Helper()
	return storecheck.OpenMigrated(context.Background(), tb, stores.Open, dsn)
}
