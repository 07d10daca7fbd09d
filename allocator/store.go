package allocator

import (
	"context"
	"errors"
)

// Errors returned by a Store and by the lease keeper and segment allocator.
// Stores wrap them with %w; test for them with errors.Is.
var (
	// ErrLeaseLost is returned by Store.Heartbeat and Store.Release when the
	// row no longer belongs to the holder at the fencing version given (with
	// its owner and lease secret): the lease expired, was taken over, was
	// released or was evicted; and by
	// Store.Evict when the row has moved past the fencing version given.
	ErrLeaseLost = errors.New("lease lost")

	// ErrInvalidRelease is returned by LeaseStore.Release when the last
	// timestamp given is one the holder cannot have used: above the ceiling
	// the store committed for it, or below its floor (see ReleaseCeiling).
	// The row is left unchanged. It wraps no other sentinel.
	ErrInvalidRelease = errors.New("release refused: last timestamp outside the lease")

	// ErrLeaseNotHeld is returned by LeaseAdmin.Evict for a worker ID whose
	// row is free or does not exist: there is no holder to evict.
	ErrLeaseNotHeld = errors.New("lease not held")

	// ErrNoWorkerAvailable is returned by Store.Claim when every worker ID of
	// the pool is held by a live lease or has a timestamp ceiling too far ahead.
	ErrNoWorkerAvailable = errors.New("no worker ID available in the pool")

	// ErrLeaseSecret is returned, with ErrLeaseLost, by Store.Heartbeat and
	// Store.Release when the lease is held by the holder at the fencing
	// version given, and has not expired, but for another owner or with
	// another lease secret: the caller is not the holder, and the lease is
	// not lost to the one who is.
	ErrLeaseSecret = errors.New("lease held with another owner or lease secret")

	// ErrTooManyLeases is returned by Store.Claim when the claim's owner
	// already holds ClaimRequest.MaxOwnerLeases unexpired leases.
	ErrTooManyLeases = errors.New("the owner holds as many leases as it may")

	// ErrLayoutMismatch is returned when the database records a Snowflake
	// layout other than the configured one.
	ErrLayoutMismatch = errors.New("snowflake layout differs from the one stored in the database")

	// ErrNamespaceNotFound is returned for a namespace that does not exist
	// or was deleted.
	ErrNamespaceNotFound = errors.New("namespace not found")

	// ErrNamespaceExists is returned by Store.CreateNamespace for a name in use.
	ErrNamespaceExists = errors.New("namespace already exists")

	// ErrInvalidNamespace is returned for a malformed name or settings.
	ErrInvalidNamespace = errors.New("invalid namespace")

	// ErrNamespaceExhausted is returned by SegmentStore.FetchSegment, and by
	// the segment allocator's draws, when a namespace's counter cannot
	// advance by the IDs asked for: it would pass the namespace's limit
	// (Namespace.Limit). Retrying does not help.
	ErrNamespaceExhausted = errors.New("namespace exhausted")

	// ErrUnavailable is returned when IDs cannot be served now: the database
	// is unreachable and no buffer or fallback can serve, or the node cannot
	// prove its lease.
	ErrUnavailable = errors.New("unavailable")

	// ErrStoreFull is wrapped by a store's errors when its database refuses
	// writes because it has run out of the space it may use (etcd's NOSPACE
	// alarm, raised when the backend passes --quota-backend-bytes). Nothing
	// is written until an operator frees space; reads still work.
	ErrStoreFull = errors.New("the database is out of space and refuses every write")
)

// Store is everything idgen keeps in a database. allocator/postgres,
// allocator/mysql and allocator/sqlite implement it, and
// allocator/storetest checks that they behave alike.
//
// Isolation. Every method that reads and then writes (a claim, a heartbeat,
// a release, recording the layout) runs in one transaction, isolated so
// that two nodes never both act on what they read:
//   - PostgreSQL and MySQL run it SERIALIZABLE. The database may abort it on
//     a conflict (PostgreSQL 40001 and 40P01; MySQL 1213, 1205, and 1020 on
//     MariaDB with innodb_snapshot_isolation): the store rolls it back and
//     runs it again, whole, with a capped backoff, until it commits or the
//     context ends, and counts the retries (RetryCounter).
//   - SQLite begins it with BEGIN IMMEDIATE: it takes the database's write
//     lock at once, waiting for it up to the busy timeout, so one writer at a
//     time runs and no transaction fails half-way on a conflict. That is
//     SQLite's isolation (serial execution); nothing is retried.
//
// Segment fetches and tail returns are not retried by the store: each starts
// with one atomic write to the namespace's row, and an error means that no
// range may be used, whatever the database did; the segment allocator
// decides when to fetch again.
type Store interface {
	LeaseStore
	LeaseAdmin
	SegmentStore
	NamespaceAdmin
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// RetryCounter is implemented by stores that run a transaction again after
// a conflict (see Store): SerializationRetries returns how many times they
// did since they were opened. It feeds the retry metric.
type RetryCounter interface {
	SerializationRetries() int64
}

// DurabilityRisk is a database setting under which a commit the database
// acknowledged can be undone by a crash or a failover. idgen must never
// lose such a commit: a fetched segment range that comes back is handed out
// again, and a lease row whose ceiling or fencing version falls back lets a
// new holder issue timestamps a running holder has already used. Either way
// the same IDs go out twice.
type DurabilityRisk struct {
	// Setting is the database setting, as its documentation names it:
	// "synchronous_commit", "innodb_flush_log_at_trx_commit".
	Setting string
	// Value is the setting's value as the database reports it.
	Value string
	// Fix says what to change, in one sentence an operator can act on.
	Fix string
	// Warning marks a risk that idgen sees but cannot prove from its own
	// connection, such as replicas that a failover could promote without
	// the latest commits: it is reported, and does not stop a node.
	Warning bool
}

// String returns "setting=value".
func (r DurabilityRisk) String() string { return r.Setting + "=" + r.Value }

// DurabilityChecker is implemented by stores that can read the settings
// their database commits under. CheckDurability returns the risks it finds
// (none when every commit is durable), or an error when the settings cannot
// be read. idgen serve calls it at start and refuses to serve on a risk
// that is not a Warning unless the operator overrides it.
type DurabilityChecker interface {
	CheckDurability(ctx context.Context) ([]DurabilityRisk, error)
}

// StoreSpace is what a store reports of the space its database takes
// (SpaceReporter): for etcd, the backend of the largest member.
type StoreSpace struct {
	// Size is the bytes the database takes on disk; InUse the part of it
	// that holds data, the rest being free pages a defragmentation gives
	// back. Zero when unknown.
	Size, InUse int64
	// Quota is the size past which the database refuses writes (etcd's
	// --quota-backend-bytes); zero when the database does not report it.
	Quota int64
	// Alarms are the database's raised alarms, by name ("NOSPACE",
	// "CORRUPT"); empty when none is raised.
	Alarms []string
	// Revision is the database's current revision and CompactRevision the
	// one up to which its history was compacted, for databases that keep
	// a history (etcd): zero when unknown or none was compacted.
	Revision, CompactRevision int64
}

// SpaceReporter is implemented by stores that can say how much space their
// database takes and whether it has raised an alarm (etcd). The node
// samples it for its metrics, /readyz and the status page.
type SpaceReporter interface {
	Space(ctx context.Context) (StoreSpace, error)
}
