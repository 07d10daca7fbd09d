package allocator

import (
	"context"
	"errors"
)

// Errors of a Store, the lease keeper and the segment allocator; test with
// errors.Is.
var (
	// ErrLeaseLost: Heartbeat or Release found the row no longer the
	// holder's at that version (expired, taken over, released, evicted), or
	// Evict found it moved past the version given.
	ErrLeaseLost = errors.New("lease lost")

	// ErrInvalidRelease: Release got a last timestamp the holder cannot have
	// used (see ReleaseCeiling); the row is unchanged.
	ErrInvalidRelease = errors.New("release refused: last timestamp outside the lease")

	// ErrLeaseNotHeld: Evict found the row free or missing.
	ErrLeaseNotHeld = errors.New("lease not held")

	// ErrNoWorkerAvailable: Claim found every worker ID held or with a
	// ceiling too far ahead.
	ErrNoWorkerAvailable = errors.New("no worker ID available in the pool")

	// ErrLeaseSecret comes with ErrLeaseLost when the lease is held at that
	// version but for another owner or secret: the caller is not the holder.
	ErrLeaseSecret = errors.New("lease held with another owner or lease secret")

	// ErrTooManyLeases: the owner already holds MaxOwnerLeases leases.
	ErrTooManyLeases = errors.New("the owner holds as many leases as it may")

	// ErrLayoutMismatch: the database records another Snowflake layout.
	ErrLayoutMismatch = errors.New("snowflake layout differs from the one stored in the database")

	// ErrNamespaceNotFound: the namespace does not exist or was deleted.
	ErrNamespaceNotFound = errors.New("namespace not found")

	// ErrNamespaceExists: CreateNamespace for a name in use.
	ErrNamespaceExists = errors.New("namespace already exists")

	// ErrInvalidNamespace: a malformed name or settings.
	ErrInvalidNamespace = errors.New("invalid namespace")

	// ErrNamespaceExhausted: the counter cannot advance by the IDs asked for
	// without passing Namespace.Limit. Retrying does not help.
	ErrNamespaceExhausted = errors.New("namespace exhausted")

	// ErrUnavailable: IDs cannot be served now (database unreachable with no
	// buffer or fallback, or no provable lease).
	ErrUnavailable = errors.New("unavailable")

	// ErrStoreFull: the database refuses writes for lack of space (etcd's
	// NOSPACE alarm) until an operator frees some; reads still work.
	ErrStoreFull = errors.New("the database is out of space and refuses every write")
)

// Store is everything idgen keeps in a database; allocator/storetest
// checks that the stores behave alike.
//
// Every read-then-write method runs in one transaction, isolated so two
// nodes never both act on what they read: PostgreSQL and MySQL run it
// SERIALIZABLE and retry it whole on conflicts (40001, 40P01; 1213, 1205,
// 1020 on MariaDB) with capped backoff until ctx ends, counting retries;
// SQLite uses BEGIN IMMEDIATE (one writer at a time, nothing retried).
//
// Segment fetches and tail returns are not retried: an error means no
// range may be used, and the segment allocator decides when to fetch again.
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

// RetryCounter is implemented by stores that retry transactions after a
// conflict; SerializationRetries counts them since opening.
type RetryCounter interface {
	SerializationRetries() int64
}

// DurabilityRisk is a database setting under which an acknowledged commit
// can be undone by a crash or failover, which would hand out IDs twice.
type DurabilityRisk struct {
	// Setting is the setting's name, e.g. "synchronous_commit".
	Setting string
	// Value is the setting's value as reported.
	Value string
	// Fix says what to change, in one sentence.
	Fix string
	// Warning marks a risk idgen cannot prove from its connection (such as
	// lagging replicas): reported, but it does not stop a node.
	Warning bool
}

// String returns "setting=value".
func (r DurabilityRisk) String() string { return r.Setting + "=" + r.Value }

// DurabilityChecker is implemented by stores that can read their commit
// settings. idgen serve refuses to serve on a non-Warning risk unless
// overridden.
type DurabilityChecker interface {
	CheckDurability(ctx context.Context) ([]DurabilityRisk, error)
}

// StoreSpace is the space a store's database takes (for etcd, the largest
// member's backend).
type StoreSpace struct {
	// Size is the bytes on disk, InUse the part holding data; 0 if unknown.
	Size, InUse int64
	// Quota is the size past which writes are refused; 0 if unreported.
	Quota int64
	// Alarms are the raised alarms by name ("NOSPACE").
	Alarms []string
	// Revision and CompactRevision, for stores with a history (etcd); 0
	// when unknown.
	Revision, CompactRevision int64
}

// SpaceReporter is implemented by stores that report their space and
// alarms (etcd), for metrics, /readyz and the status page.
type SpaceReporter interface {
	Space(ctx context.Context) (StoreSpace, error)
}
