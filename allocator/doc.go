// Package allocator is idgen's domain: it decides which IDs a node may hand
// out, and knows nothing of SQL or HTTP. It has two halves that share one
// store.
//
// Leases (Keeper, LeaseStore). A node leases a worker ID from the
// worker_leases table and issues Snowflake IDs in memory under it. The
// Keeper claims a lease, keeps it with heartbeats, releases it on Close, and
// feeds its snowflake.Generator a fence:
//
//   - The store decides expiry by its own time, never a node's clock, and
//     every write after a claim is fenced on the holder and the fencing
//     version the claim incremented.
//   - The generator never issues a timestamp above the ceiling the store has
//     committed for this holder (ts_ceiling_ms), and a new holder of a worker
//     ID starts strictly above the previous holder's ceiling (the floor). Two
//     holders of one worker ID therefore use disjoint timestamps whatever
//     their clocks say and however long a process was paused.
//   - The node trusts its lease until a local deadline on the monotonic
//     clock (the send time of its last successful claim or heartbeat, plus
//     the ttl, minus a margin), which passes before the store would let
//     anyone take the row; past it the keeper issues nothing.
//   - A clock that steps back further than the generator's backward wait
//     stops issuing on that worker ID; the keeper moves to a worker ID whose
//     ceiling lies below the clock, or waits.
//   - The keeper names the lease a batch of IDs was made under
//     (NextSnowflakesFenced, LeaseToken): datacenter, worker and fencing
//     version, which callers may use as a fencing token.
//
// Segments (Segments, SegmentStore). Dense, sequential IDs per namespace come
// from ranges of the namespace's counter in the segments table, fetched by
// one atomic statement and double-buffered in memory:
//
//   - An ID is handed out only from a range whose fetch the store
//     acknowledged; a fetch whose outcome is unknown throws its range away.
//   - A counter never passes its namespace's limit (Namespace.Limit).
//   - A tail is given back on Close only if nobody fetched since (a
//     compare-and-set on max_id and version).
//   - Every fetch increments the namespace's version in the same statement
//     and returns the version it left; the version never goes back (not on
//     a tail return, an update, or a deletion and revival). For a strict
//     namespace that version is the revision given to callers
//     (Batch.Revision): greater with every fetch, cluster-wide, and never
//     given twice, so a caller can tell a stale or replayed answer.
//   - A namespace with the Snowflake fallback has a max_id_limit one below
//     the smallest Snowflake ID of the moment the fallback was turned on
//     (FallbackLimit): the counter never passes it and the fallback never
//     serves an ID at or below it, so no ID comes from both.
//
// The rules of settings live on the domain types: KeeperSettings.Resolve and
// SegmentSettings.Resolve, whose errors name the field they refuse;
// NamespaceSpec and NamespaceUpdate for namespaces. The request
// types (ClaimRequest, HeartbeatRequest, ReleaseRequest) check themselves
// before a store touches its database.
//
// Where to start reading: store.go, the Store contract every store keeps
// (isolation, retries) and the errors; lease.go, the lease row, the requests
// and the LeaseStore protocol; keeper.go, the keeper's state machine (claim,
// heartbeat, lost, takeover, release, clock stepped back, pool full);
// namespace.go, the namespace row, its rules and the SegmentStore contract;
// segment.go and segment_namespace.go, the segment allocator and its
// per-namespace double buffer. allocator/postgres, allocator/mysql and
// allocator/sqlite implement the stores, allocator/etcd one on etcd, and
// allocator/storetest holds each of them to the contract.
// docs/architecture.md tells the whole story with diagrams.
package allocator
