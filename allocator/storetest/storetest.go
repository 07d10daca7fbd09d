// Package storetest is the behavioural suite every allocator.Store must pass:
// Postgres, MySQL, SQLite and etcd run the same tests, so that they behave
// alike by construction and the allocator can rely on one contract.
//
// A store package's test calls Run with a function that opens a store on a
// fresh, migrated database (see internal/testdb):
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) allocator.Store {
//			s, err := postgres.Open(t.Context(), testdb.Postgres(t))
//			…
//			return s
//		})
//	}
//
// Every subtest opens its own store and closes nothing: open registers the
// cleanup.
package storetest

import (
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

// Run runs the whole suite against the stores open returns. open must return
// a store on an empty, migrated database of its own, and close it when t
// ends.
func Run(t *testing.T, open func(t *testing.T) allocator.Store) {
	t.Helper()
	runLeaseTests(t, open)
	runRemoteLeaseTests(t, open)
	runSegmentTests(t, open)
	runDeleteNamespaceTests(t, open)
}
