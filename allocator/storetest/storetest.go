// Package storetest is the behavioural suite every allocator.Store must
// pass, so that all stores behave alike under one contract.
//
// A store package's test calls Run with a function that opens a store on a
// fresh, migrated database (see internal/testkit):
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) allocator.Store {
//			s, err := postgres.Open(t.Context(), testkit.Postgres(t))
//			…
//			return s
//		})
//	}
//
// Every subtest opens its own store; open registers the cleanup.
package storetest

import (
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

// Run runs the whole suite. open must return a store on an empty, migrated
// database of its own, closed when t ends.
func Run(t *testing.T, open func(t *testing.T) allocator.Store) {
	t.Helper()
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// suite is every subtest Run runs, in order.
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

	// Remote holders and operators (remote.go).
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

	// The SegmentStore part (segment.go).
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

	// Namespace deletion and revival (delete.go).
	{"DeleteNamespace", testDeleteNamespace},
	{"DeleteNamespaceUnknown", testDeleteUnknown},
	{"ReviveNamespace", testReviveNamespace},
	{"ReviveNamespaceKeepsLimit", testReviveKeepsLimit},
}
