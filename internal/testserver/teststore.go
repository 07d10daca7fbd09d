// Stores: a migrated Store of a test's own on each database idgen supports,
// built on internal/testkit.

package testserver

import (
	"context"
	"testing"

	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
)

// Dialects are the databases every store-backed test runs on: the SQL
// databases, whose schema, migrations and command-line output are alike.
var Dialects = []string{"sqlite", "postgres", "mysql"}

// StoreDialects are Dialects and etcd: every Store, for the tests of the
// lease keeper and the segment allocator, which see a store only through
// the allocator's interfaces. A package that runs them calls testkit.EtcdMain
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

// StoreDSN returns the DSN of a fresh, empty database of the dialect (for
// etcd, a fresh key prefix on the test cluster); see internal/testkit for
// where it comes from and when the test is skipped or fails instead.
func StoreDSN(tb testing.TB, dialect string) string {
	tb.Helper()
	switch dialect {
	case "postgres":
		return testkit.Postgres(tb)
	case "mysql":
		return testkit.MySQL(tb)
	case "sqlite":
		return testkit.SQLite(tb)
	case "etcd":
		return testkit.EtcdDSN(tb)
	}
	tb.Fatalf("testserver: unknown dialect %q", dialect)
	return ""
}

// OpenStore returns a Store on a fresh database of the dialect with every
// migration applied, closed when the test ends.
func OpenStore(tb testing.TB, dialect string) stores.Store {
	tb.Helper()
	return OpenStoreDSN(tb, StoreDSN(tb, dialect))
}

// OpenStoreDSN opens and migrates the store dsn names, closed when the test ends.
func OpenStoreDSN(tb testing.TB, dsn string) stores.Store {
	tb.Helper()
	return storetest.OpenMigrated(context.Background(), tb, stores.Open, dsn)
}
