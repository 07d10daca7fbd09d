// Package allocator is idgen's domain: it decides which IDs a node may hand
// out, and knows nothing of SQL or HTTP. Its two halves share one store.
//
// Leases (Keeper, LeaseStore). A node leases a worker ID from worker_leases
// and issues Snowflake IDs under it. The store decides expiry by its own
// time; every write is fenced on holder and fencing version. The generator
// stays at or below the ceiling the store committed, and a new holder
// starts above the previous one's ceiling, so two holders of a worker ID
// use disjoint timestamps whatever their clocks or pauses. The node trusts
// its lease only until a monotonic local deadline that passes before the
// store would let anyone take the row. A clock stepping back moves the
// keeper to another worker ID, or waits.
//
// Segments (Segments, SegmentStore). Dense per-namespace IDs come from
// ranges of a counter, fetched by one atomic statement and double-buffered.
// Only acknowledged ranges are used; counters never pass Namespace.Limit;
// tails go back only by compare-and-set; every fetch raises the version,
// which strict namespaces give callers as a revision (Batch.Revision). A
// Snowflake fallback namespace's max_id_limit keeps the two ID spaces apart
// (FallbackLimit).
//
// Start reading at store.go (contract and errors), lease.go, keeper.go,
// namespace.go, then segment.go. docs/architecture.md tells the whole story.
package allocator
