package allocator

import (
	"context"
	"errors"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// Errors returned by a Store and by the lease keeper and segment allocator.
// Stores wrap them with %w; test for them with errors.Is.
var (
	// ErrLeaseLost is returned by Store.Heartbeat and Store.Release when the
	// row no longer belongs to the holder at the fencing version given: the
	// lease expired and was taken over, or was released.
	ErrLeaseLost = errors.New("lease lost")

	// ErrNoWorkerAvailable is returned by Store.Claim when every worker ID of
	// the pool is held by a live lease or has a timestamp ceiling too far ahead.
	ErrNoWorkerAvailable = errors.New("no worker ID available in the pool")

	// ErrLayoutMismatch is returned when the database records a Snowflake
	// layout other than the configured one.
	ErrLayoutMismatch = errors.New("snowflake layout differs from the one stored in the database")

	// ErrNamespaceNotFound is returned for a namespace that does not exist.
	ErrNamespaceNotFound = errors.New("namespace not found")

	// ErrNamespaceExists is returned by Store.CreateNamespace for a name in use.
	ErrNamespaceExists = errors.New("namespace already exists")

	// ErrInvalidNamespace is returned for a malformed name or settings.
	ErrInvalidNamespace = errors.New("invalid namespace")

	// ErrUnavailable is returned when IDs cannot be served now: the database
	// is unreachable and no buffer or fallback can serve, or the node cannot
	// prove its lease.
	ErrUnavailable = errors.New("unavailable")
)

// LeaseKey identifies one row of worker_leases.
type LeaseKey struct {
	DatacenterID int64
	WorkerID     int64
}

// Lease is one row of worker_leases. Times are database time; a zero time
// stands for NULL.
type Lease struct {
	LeaseKey
	Holder         string // "" when free
	FencingVersion int64  // incremented at every claim
	AcquiredAt     time.Time
	HeartbeatAt    time.Time
	ExpiresAt      time.Time
	ReleasedAt     time.Time
	CeilingMS      int64 // ts_ceiling_ms: highest Snowflake timestamp (Unix ms) the holder may use
}

// Lease event kinds recorded in lease_events.
const (
	EventAcquire  = "acquire"  // claimed a free row
	EventTakeover = "takeover" // claimed a row whose lease had expired
	EventRelease  = "release"  // released on graceful shutdown
	EventLost     = "lost"     // the holder found its lease gone
)

// LeaseEvent is one row of lease_events.
type LeaseEvent struct {
	ID int64
	LeaseKey
	Holder         string
	FencingVersion int64
	Kind           string // one of the Event constants
	At             time.Time
	Detail         string
}

// ClaimRequest asks a Store to claim one worker ID of a pool.
type ClaimRequest struct {
	DatacenterID int64
	MinWorkerID  int64 // inclusive
	MaxWorkerID  int64 // inclusive
	Holder       string
	TTL          time.Duration
	// CeilingMS is the ceiling the claim proposes; the row's ts_ceiling_ms
	// becomes the larger of it and the previous ceiling.
	CeilingMS int64
	// MaxPrevCeilingMS excludes rows whose ts_ceiling_ms is above it (the
	// previous holder's ceiling lies too far ahead of this node's clock).
	// Zero means no limit.
	MaxPrevCeilingMS int64
}

// ClaimResult is what a successful claim left in the table.
type ClaimResult struct {
	Lease         Lease     // the row after the claim
	PrevHolder    string    // holder before the claim, "" if the row was free
	PrevCeilingMS int64     // ts_ceiling_ms before the claim
	DBNow         time.Time // database time of the claim
}

// HeartbeatRequest extends a lease held at a fencing version.
type HeartbeatRequest struct {
	Key            LeaseKey
	Holder         string
	FencingVersion int64
	TTL            time.Duration
	CeilingMS      int64 // ts_ceiling_ms becomes the larger of it and the stored one
}

// ReleaseRequest gives a lease back, lowering its ceiling to CeilingMS.
type ReleaseRequest struct {
	Key            LeaseKey
	Holder         string
	FencingVersion int64
	CeilingMS      int64
}

// LeaseStore is the part of a Store the lease keeper uses.
type LeaseStore interface {
	// EnsureLayout records layout if the database has none and returns the
	// layout recorded, which may differ from layout.
	EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error)
	// Claim claims a free or expired worker ID of the pool in one
	// SERIALIZABLE transaction (retried on serialization failures). It
	// returns ErrNoWorkerAvailable when none can be claimed.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Heartbeat extends the lease, fenced on holder and fencing version. It
	// returns ErrLeaseLost when the row did not match, and database time.
	Heartbeat(ctx context.Context, req HeartbeatRequest) (Lease, time.Time, error)
	// Release frees the lease, fenced like Heartbeat; ErrLeaseLost if not held.
	Release(ctx context.Context, req ReleaseRequest) error
	// RecordLeaseEvent appends ev to lease_events (ID and At are set by the store).
	RecordLeaseEvent(ctx context.Context, ev LeaseEvent) error
	// ListLeases returns every row of worker_leases by datacenter and worker.
	ListLeases(ctx context.Context) ([]Lease, error)
	// ListLeaseEvents returns up to limit events with ID > afterID, oldest first.
	ListLeaseEvents(ctx context.Context, afterID int64, limit int) ([]LeaseEvent, error)
}

// Segment modes and fallbacks.
type (
	Mode     string
	Fallback string
)

const (
	ModeBuffered Mode = "buffered" // ranges are pre-fetched and double-buffered
	ModeStrict   Mode = "strict"   // every request is its own fetch of exactly N

	FallbackNone      Fallback = "none"      // unavailable while the database is
	FallbackSnowflake Fallback = "snowflake" // Snowflake IDs while the database is unreachable
)

// Namespace is one row of segments.
type Namespace struct {
	Name        string
	MaxID       int64 // last ID of the last range handed out; the next range starts at MaxID+1
	Step        int64
	MinStep     int64
	MaxStep     int64
	Mode        Mode
	Fallback    Fallback
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Description string
}

// NamespaceUpdate changes the fields that are not nil.
type NamespaceUpdate struct {
	Step        *int64
	MinStep     *int64
	MaxStep     *int64
	Mode        *Mode
	Fallback    *Fallback
	Description *string
}

// Segment is a range of IDs First..Last (inclusive) whose fetch committed,
// with the namespace row as the fetch left it (Namespace.MaxID == Last).
type Segment struct {
	Namespace Namespace
	First     int64
	Last      int64
}

// SegmentStore is the part of a Store the segment allocator uses.
type SegmentStore interface {
	// CreateNamespace inserts ns; ErrNamespaceExists if the name is taken.
	CreateNamespace(ctx context.Context, ns Namespace) (Namespace, error)
	// GetNamespace returns one namespace; ErrNamespaceNotFound if absent.
	GetNamespace(ctx context.Context, name string) (Namespace, error)
	// ListNamespaces returns every namespace ordered by name.
	ListNamespaces(ctx context.Context) ([]Namespace, error)
	// UpdateNamespace changes settings; ErrNamespaceNotFound if absent.
	UpdateNamespace(ctx context.Context, name string, u NamespaceUpdate) (Namespace, error)
	// FetchSegment advances max_id by n in one atomic statement and returns
	// the range (old max_id, new max_id]; ErrNamespaceNotFound if absent. An
	// error means no range may be used, whatever the database did.
	FetchSegment(ctx context.Context, name string, n int64) (Segment, error)
	// ReturnTail sets max_id to newMaxID if max_id and version still equal
	// the expected values, and reports whether it did.
	ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error)
}

// Store is everything idgen keeps in a database. allocator/postgres,
// allocator/mysql and allocator/sqlite implement it, and
// allocator/storetest checks that they behave alike.
type Store interface {
	LeaseStore
	SegmentStore
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}
