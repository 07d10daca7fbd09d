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
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// suite is every subtest Run runs, in order: a name, and a check of a store
// on a database of its own.
var suite = []struct {
	name string
	run  func(t *testing.T, s allocator.Store)
}{
	// The LeaseStore part of a Store (lease.go).
	{"EnsureLayoutFirstWriterWins", testEnsureLayout},
	{"EnsureLayoutRace", testEnsureLayoutRace},
	{"EnsureLayoutNarrow", testEnsureLayoutNarrow},
	{"ClaimFreshPool", testClaimFreshPool},
	{"ClaimPrefersLowestCeiling", testClaimLowestCeiling},
	{"ClaimPoolExhausted", testPoolExhausted},
	{"ClaimMaxPrevCeiling", testMaxPrevCeiling},
	{"ClaimSameHolderAgain", testSameHolderReclaim},
	{"ClaimInvalid", testInvalidClaims},
	{"CeilingBoundedByStoreTime", testCeilingBounded},
	{"Heartbeat", testHeartbeat},
	{"HeartbeatReleaseInvalid", testInvalidHeartbeatRelease},
	{"HeartbeatAfterExpiry", testHeartbeatAfterExpiry},
	{"ExpiryAndTakeover", testExpiryTakeover},
	{"Release", testRelease},
	{"ReleaseNeverRaisesCeiling", testReleaseNeverRaises},
	{"ConcurrentClaims", func(t *testing.T, s allocator.Store) { ClaimConcurrently(t, s, 32, 8) }},
	{"ListLeasesOrder", testListLeasesOrder},
	{"LeaseEventsPaging", testLeaseEventsPaging},

	// The parts of LeaseStore and LeaseAdmin that serve remote holders and
	// operators (remote.go).
	{"ClaimRecordsFloor", testClaimRecordsFloor},
	{"ReleaseWithLastTimestamp", testReleaseLastTimestamp},
	{"ReleaseBelowFloorRefused", testReleaseBelowFloor},
	{"OwnerAndRequestID", testOwnerAndRequestID},
	{"OwnerAndSecretFence", testOwnerAndSecretFence},
	{"NodeHolderNeverAPIHolder", testNodeHolderNeverAPIHolder},
	{"MaxOwnerLeases", testMaxOwnerLeases},
	{"Evict", testEvict},
	{"EvictRefused", testEvictRefused},
	{"LeaseEventsFilter", testLeaseEventsFilter},
	{"PruneLeaseEvents", testPruneLeaseEvents},

	// The SegmentStore part of a Store (segment.go): namespace bookkeeping,
	// the atomic range fetch the segment allocator relies on for uniqueness,
	// and the compare-and-set tail return.
	{"NamespaceRoundTrip", testNamespaceRoundTrip},
	{"UpdateNamespace", testUpdateNamespace},
	{"UpdateNamespaceBumpsUpdatedAt", testUpdateBumpsUpdatedAt},
	{"InvalidUpdateNamespace", testInvalidUpdateNamespace},
	{"DuplicateNamespace", testDuplicateNamespace},
	{"InvalidNamespace", testInvalidNamespace},
	{"UnknownNamespace", testUnknownNamespace},
	{"ConsecutiveFetches", testConsecutiveFetches},
	{"FetchInvalidCount", testFetchInvalidCount},
	{"FetchOverflow", testFetchOverflow},
	{"FetchLimit", testFetchLimit},
	{"LimitConstraints", testLimitConstraints},
	{"UpdateLimit", testUpdateLimit},
	{"ConcurrentFetches", testConcurrentFetches},
	{"ReturnTail", testReturnTail},
	{"ReturnTailStale", testReturnTailStale},
	{"StrictRevision", testStrictRevision},
	{"NamespaceStride", testNamespaceStride},

	// Namespace deletion (delete.go): a tombstone that hides the namespace
	// from every call, and a revival that never starts below IDs already
	// handed out.
	{"DeleteNamespace", testDeleteNamespace},
	{"DeleteNamespaceUnknown", testDeleteUnknown},
	{"ReviveNamespace", testReviveNamespace},
	{"ReviveNamespaceKeepsLimit", testReviveKeepsLimit},
}
