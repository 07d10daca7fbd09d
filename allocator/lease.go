package allocator

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idgen-project/idgen/snowflake"
)

// LeaseKey identifies one row of worker_leases.
type LeaseKey struct {
	DatacenterID int64
	WorkerID     int64
}

// RemoteHolderPrefix starts the holder name of every lease granted through
// the lease API ("api:<token name>/<holder>"); a keeper's holder never does.
const RemoteHolderPrefix = "api:"

// Lease is one row of worker_leases. Times are database time; a zero time
// stands for NULL.
type Lease struct {
	LeaseKey
	Holder         string // "" when free
	Owner          string // the authenticated caller a remote holder acts for; "" for idgen's own nodes and when free
	FencingVersion int64  // incremented at every claim
	AcquiredAt     time.Time
	HeartbeatAt    time.Time
	ExpiresAt      time.Time
	ReleasedAt     time.Time
	CeilingMS      int64 // ts_ceiling_ms: highest Snowflake timestamp (Unix ms) the holder may use
	// FloorMS is ts_floor_ms: one above the ceiling the last claim found;
	// 0 means unknown (claimed before floors were recorded).
	FloorMS int64
}

// EventKind is the kind of a lease event recorded in lease_events.
type EventKind string

// Lease event kinds.
const (
	EventAcquire  EventKind = "acquire"  // claimed a free row (or one's own again)
	EventTakeover EventKind = "takeover" // claimed a row whose lease had expired
	EventRelease  EventKind = "release"  // released on graceful shutdown
	EventLost     EventKind = "lost"     // the holder found its lease gone
	EventEvict    EventKind = "evict"    // an operator took the lease from its holder (LeaseAdmin.Evict)
	// EventFence (fence.go): a restore fence took the lease.
)

// Validate reports a kind other than the EventKind constants.
func (k EventKind) Validate() error {
	switch k {
	case EventAcquire, EventTakeover, EventRelease, EventLost, EventEvict, EventFence:
		return nil
	}
	return fmt.Errorf("unknown lease event kind %q", string(k))
}

// LeaseEvent is one row of lease_events.
type LeaseEvent struct {
	ID int64
	LeaseKey
	Holder         string
	FencingVersion int64
	Kind           EventKind
	At             time.Time
	Detail         string
	// Owner: the remote holder's, or the operator's for evict; "" for nodes.
	Owner string
	// RequestID is the ID of the request that caused the event, "" if none.
	RequestID string
	// Block is what the holder issued since its last report (lost events
	// only); stores ignore it.
	Block Block
}

// Validate reports an event no store could record. Stores call it first.
func (ev LeaseEvent) Validate() error {
	if err := ev.Kind.Validate(); err != nil {
		return fmt.Errorf("invalid lease event: %w", err)
	}
	var problem string
	switch {
	case len(ev.Holder) > MaxHolderLen:
		problem = fmt.Sprintf("holder must have at most %d bytes", MaxHolderLen)
	case !validID(ev.DatacenterID) || !validID(ev.WorkerID):
		problem = fmt.Sprintf("worker %d/%d out of range", ev.DatacenterID, ev.WorkerID)
	default:
		problem = callerProblem(ev.Owner, ev.RequestID)
	}
	if problem == "" {
		return nil
	}
	return fmt.Errorf("invalid lease event: %s", problem)
}

// ClaimRequest asks a LeaseStore to claim one worker ID of a pool.
type ClaimRequest struct {
	DatacenterID int64
	MinWorkerID  int64 // inclusive
	MaxWorkerID  int64 // inclusive
	Holder       string
	TTL          time.Duration
	// CeilingMS is the proposed ceiling: the row's becomes max(previous,
	// min(CeilingMS, store time + TTL + MaxClockOffset)).
	CeilingMS int64
	// MaxClockOffset is how far beyond store time + TTL the ceiling may reach.
	MaxClockOffset time.Duration
	// MaxPrevCeilingMS, when not 0, excludes rows whose ceiling is above it.
	MaxPrevCeilingMS int64
	// Owner is the authenticated caller a remote holder acts for ("" for
	// nodes); later heartbeats and releases must name the same owner.
	Owner string
	// SecretHash is the lower-case hex SHA-256 of the lease secret ("" for
	// nodes); later heartbeats and releases must name the same hash.
	SecretHash string
	// MaxOwnerLeases, when above 0, caps Owner's unexpired leases (not
	// counting a row Holder holds); over it the claim fails with ErrTooManyLeases.
	MaxOwnerLeases int
	// RequestID identifies the request in the claim's event; optional.
	RequestID string
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
	// CeilingMS raises the row's ceiling as a claim's does, never lowers it.
	CeilingMS      int64
	MaxClockOffset time.Duration
	// Owner and SecretHash must be the claim's. RequestID is for the
	// caller's own audit; a heartbeat records no event.
	Owner      string
	SecretHash string
	RequestID  string
	// Block is for the audit trail; stores ignore it.
	Block Block
}

// ReleaseRequest gives a lease back, leaving the ceiling ReleaseCeiling computes.
type ReleaseRequest struct {
	Key            LeaseKey
	Holder         string
	FencingVersion int64
	// LastTimestampMS is the last ID's timestamp (Unix ms), 0 if none.
	LastTimestampMS int64
	// Owner and SecretHash must be the claim's, as on a heartbeat.
	Owner      string
	SecretHash string
	RequestID  string
	// Block is for the audit trail; stores ignore it.
	Block Block
}

// EvictRequest asks LeaseAdmin.Evict to take a lease from its holder.
type EvictRequest struct {
	Key LeaseKey
	// FencingVersion, when not 0, must still be the row's.
	FencingVersion int64
	// Owner, RequestID and Reason go into the evict event.
	Owner     string
	RequestID string
	Reason    string
}

// LeaseEventFilter selects lease events for LeaseAdmin.ListLeaseEvents.
// Zero fields select everything.
type LeaseEventFilter struct {
	// AfterID selects events with a higher ID (paging).
	AfterID int64
	// Limit is the most events returned; none when it is not positive.
	Limit        int
	DatacenterID *int64    // only this datacenter
	WorkerID     *int64    // only this worker ID
	Holder       string    // only events naming this holder
	Owner        string    // only events recorded for this owner
	Kind         EventKind // only events of this kind
	Since        time.Time // only events at or after it
	Until        time.Time // only events before it
}

// Validate reports a filter no store could apply. Stores call it first.
func (f LeaseEventFilter) Validate() error {
	var problem string
	switch {
	case f.Kind != "" && f.Kind.Validate() != nil:
		problem = f.Kind.Validate().Error()
	case f.AfterID < 0:
		problem = fmt.Sprintf("negative event ID %d", f.AfterID)
	case f.DatacenterID != nil && !validID(*f.DatacenterID):
		problem = fmt.Sprintf("datacenter %d out of range", *f.DatacenterID)
	case f.WorkerID != nil && !validID(*f.WorkerID):
		problem = fmt.Sprintf("worker %d out of range", *f.WorkerID)
	case len(f.Holder) > MaxHolderLen:
		problem = fmt.Sprintf("holder must have at most %d bytes", MaxHolderLen)
	case len(f.Owner) > MaxOwnerLen:
		problem = fmt.Sprintf("owner must have at most %d bytes", MaxOwnerLen)
	case !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since):
		problem = fmt.Sprintf("until %s is before since %s", f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano))
	default:
		return nil
	}
	return fmt.Errorf("invalid lease event filter: %s", problem)
}

// LeaseStore is the lease table's protocol, implemented by
// allocator/postgres, mysql and sqlite and checked by allocator/storetest.
//
// Every time a store compares or writes is its own, never the caller's.
// Each method is one transaction, retried on serialization failures, so
// its writes and its event commit together. A request its Validate refuses
// changes nothing and its error wraps no sentinel.
type LeaseStore interface {
	// EnsureLayout records layout (default when zero) unless one is recorded
	// and returns the recorded one; concurrent first calls agree on one.
	EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error)

	// Claim claims one worker ID of req's pool, creating missing rows.
	// Candidates are free, expired by store time, or held by req.Holder for
	// req.Owner already; rows with a ceiling above a non-zero
	// req.MaxPrevCeilingMS are excluded. It takes the lowest ceiling, then
	// the lowest worker ID.
	//
	// The row gets the holder, owner and secret, fencing_version + 1,
	// acquired_at = heartbeat_at = store time, expires_at = store time + TTL,
	// ts_floor_ms = previous ceiling + 1, and ts_ceiling_ms = max(previous,
	// min(req.CeilingMS, store time + TTL + MaxClockOffset)). It records the
	// ClaimEvent. Errors wrap ErrNoWorkerAvailable (no candidate) or
	// ErrTooManyLeases.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Heartbeat extends req.Key's lease if the holder, fencing version, owner
	// and secret match and it has not expired by store time, raising the
	// ceiling as a claim does. It returns the row and store time, and records
	// no event. Otherwise it changes nothing and returns ErrLeaseLost (also
	// ErrLeaseSecret when only owner or secret differ).
	Heartbeat(ctx context.Context, req HeartbeatRequest) (Lease, time.Time, error)

	// Release gives req.Key's lease back if the row matches as for a
	// heartbeat: holder, owner and secret NULL, released_at = expires_at =
	// store time, ts_ceiling_ms = ReleaseCeiling(...). It records an
	// EventRelease and returns the ceiling left. A mismatch returns
	// ErrLeaseLost, an impossible LastTimestampMS ErrInvalidRelease; either
	// way nothing changes.
	Release(ctx context.Context, req ReleaseRequest) (ceilingMS int64, err error)

	// RecordLeaseEvent appends ev at store time (ev.ID and ev.At ignored).
	RecordLeaseEvent(ctx context.Context, ev LeaseEvent) error
}

// LeaseAdmin is what the admin API, status page and CLI do with the lease
// tables; its writes follow LeaseStore's rules.
type LeaseAdmin interface {
	// ListLeases returns every row, by datacenter and worker ID.
	ListLeases(ctx context.Context) ([]Lease, error)

	// ListLeaseEvents returns up to f.Limit events f selects, oldest first.
	ListLeaseEvents(ctx context.Context, f LeaseEventFilter) ([]LeaseEvent, error)

	// PruneLeaseEvents deletes events before before (store time; zero
	// deletes nothing) in batches, one transaction each so no lock is held
	// long, and returns the count.
	PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error)

	// Evict takes req.Key's lease: fencing_version + 1, holder, owner and
	// secret NULL, expires_at = store time, ceiling unchanged (the holder may
	// still issue up to it; the next holder starts above it). It records an
	// EventEvict and returns the row. A free or missing row (an expired
	// one is held) returns ErrLeaseNotHeld, a stale req.FencingVersion
	// ErrLeaseLost; either way nothing changes.
	Evict(ctx context.Context, req EvictRequest) (Lease, error)
}

// Limits every LeaseStore enforces on a request.
const (
	// MaxHolderLen is the longest holder name, in bytes.
	MaxHolderLen = 255
	// MaxOwnerLen is the longest owner (caller) name, in bytes of UTF-8.
	MaxOwnerLen = 255
	// MaxRequestIDLen is the longest request ID, in bytes of UTF-8.
	MaxRequestIDLen = 255
	// MaxEvictReasonLen is the longest eviction reason, in bytes.
	MaxEvictReasonLen = 1024
	// MaxPoolSize bounds the worker IDs of one claim (one row each).
	MaxPoolSize = 1 << 16
)

// Validate reports a claim request no store could carry out. Stores call
// it first.
func (r ClaimRequest) Validate() error {
	return invalidRequest("claim",
		holderProblem(r.Holder),
		ttlProblem(r.TTL),
		problemIf(!validID(r.DatacenterID), "datacenter %d out of range", r.DatacenterID),
		problemIf(r.MinWorkerID < 0 || r.MaxWorkerID < r.MinWorkerID || r.MaxWorkerID > math.MaxInt32,
			"worker IDs %d..%d are not a range of non-negative IDs", r.MinWorkerID, r.MaxWorkerID),
		problemIf(r.MaxWorkerID-r.MinWorkerID >= MaxPoolSize,
			"pool of %d worker IDs is larger than %d", r.MaxWorkerID-r.MinWorkerID+1, MaxPoolSize),
		problemIf(r.CeilingMS < 0 || r.MaxPrevCeilingMS < 0, "negative ceiling"),
		problemIf(r.MaxClockOffset < 0, "negative clock offset %s", r.MaxClockOffset),
		problemIf(r.MaxOwnerLeases < 0, "negative lease cap %d", r.MaxOwnerLeases),
		secretProblem(r.SecretHash),
		callerProblem(r.Owner, r.RequestID))
}

// Validate reports a heartbeat no store could carry out.
func (r HeartbeatRequest) Validate() error {
	return invalidRequest("heartbeat",
		holderProblem(r.Holder),
		ttlProblem(r.TTL),
		fencedKeyProblem(r.Key, r.FencingVersion),
		problemIf(r.CeilingMS < 0, "negative ceiling %d", r.CeilingMS),
		problemIf(r.MaxClockOffset < 0, "negative clock offset %s", r.MaxClockOffset),
		secretProblem(r.SecretHash),
		callerProblem(r.Owner, r.RequestID))
}

// Validate reports a release no store could carry out; whether the last
// timestamp fits the lease is for ReleaseCeiling.
func (r ReleaseRequest) Validate() error {
	return invalidRequest("release",
		holderProblem(r.Holder),
		fencedKeyProblem(r.Key, r.FencingVersion),
		problemIf(r.LastTimestampMS < 0, "negative last timestamp %d", r.LastTimestampMS),
		secretProblem(r.SecretHash),
		callerProblem(r.Owner, r.RequestID))
}

// Validate reports an eviction no store could carry out.
func (r EvictRequest) Validate() error {
	return invalidRequest("eviction",
		fencedKeyProblem(r.Key, r.FencingVersion),
		callerProblem(r.Owner, r.RequestID),
		textProblem("reason", r.Reason, MaxEvictReasonLen))
}

// invalidRequest returns nil or "invalid <what>: " and the first problem,
// so a faulty request is always reported the same way.
func invalidRequest(what string, problems ...string) error {
	for _, p := range problems {
		if p != "" {
			return fmt.Errorf("invalid %s: %s", what, p)
		}
	}
	return nil
}

// problemIf formats the problem only when bad holds.
func problemIf(bad bool, format string, args ...any) string {
	if !bad {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func holderProblem(h string) string {
	return problemIf(!validHolder(h), "holder must have 1 to %d bytes", MaxHolderLen)
}

func ttlProblem(ttl time.Duration) string {
	return problemIf(ttl < time.Millisecond, "ttl %s is below 1ms", ttl)
}

// fencedKeyProblem checks a worker key and fencing version.
func fencedKeyProblem(k LeaseKey, fencingVersion int64) string {
	if p := problemIf(!validID(k.DatacenterID) || !validID(k.WorkerID), "worker %d/%d out of range", k.DatacenterID, k.WorkerID); p != "" {
		return p
	}
	return problemIf(fencingVersion < 0, "negative fencing version %d", fencingVersion)
}

// CheckRow reports whether the eviction may go ahead on row (found false
// when missing): ErrLeaseNotHeld, ErrLeaseLost or nil.
func (r EvictRequest) CheckRow(row Lease, found bool) error {
	switch {
	case !found:
		return fmt.Errorf("evict worker %d/%d: no such worker ID: %w", r.Key.DatacenterID, r.Key.WorkerID, ErrLeaseNotHeld)
	case row.Holder == "":
		return fmt.Errorf("evict worker %d/%d: free since version %d: %w", r.Key.DatacenterID, r.Key.WorkerID, row.FencingVersion, ErrLeaseNotHeld)
	case r.FencingVersion != 0 && r.FencingVersion != row.FencingVersion:
		return fmt.Errorf("evict worker %d/%d at version %d: held by %s at version %d: %w",
			r.Key.DatacenterID, r.Key.WorkerID, r.FencingVersion, row.Holder, row.FencingVersion, ErrLeaseLost)
	}
	return nil
}

// ReleaseCeiling is the ceiling a released lease leaves behind, given its
// floor, committed ceiling and last used timestamp (0 if none).
//
// A lastMS outside [floor, ceiling] cannot have been used, so it is
// refused with ErrInvalidRelease. Otherwise the ceiling becomes
// max(floor − 1, lastMS), never above ceilingMS. A floor of 0 is unknown:
// then a holder that issued nothing leaves the ceiling as it is.
func ReleaseCeiling(floorMS, ceilingMS, lastMS int64) (int64, error) {
	switch {
	case lastMS > ceilingMS:
		return 0, fmt.Errorf("%w: %d is above the committed ceiling %d", ErrInvalidRelease, lastMS, ceilingMS)
	case lastMS > 0 && lastMS < floorMS:
		return 0, fmt.Errorf("%w: %d is below the floor %d", ErrInvalidRelease, lastMS, floorMS)
	case floorMS > 0:
		return max(floorMS-1, lastMS), nil
	case lastMS > 0:
		return lastMS, nil
	default:
		return ceilingMS, nil
	}
}

func validHolder(h string) bool { return h != "" && len(h) <= MaxHolderLen }

// SecretHashLen is the length of a hex SHA-256 secret hash.
const SecretHashLen = 64

func secretProblem(h string) string {
	if h == "" {
		return ""
	}
	ok := len(h) == SecretHashLen
	for i := 0; ok && i < len(h); i++ {
		ok = (h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')
	}
	return problemIf(!ok, "secret hash must be %d lower-case hex digits", SecretHashLen)
}

func callerProblem(owner, requestID string) string {
	if p := textProblem("owner", owner, MaxOwnerLen); p != "" {
		return p
	}
	return textProblem("request ID", requestID, MaxRequestIDLen)
}

// textProblem checks an optional text field every database must store as
// given: length, UTF-8, no NUL.
func textProblem(what, v string, maxLen int) string {
	switch {
	case len(v) > maxLen:
		return fmt.Sprintf("%s of %d bytes is longer than %d", what, len(v), maxLen)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return fmt.Sprintf("%s must be UTF-8 text without NUL bytes", what)
	}
	return ""
}

func validID(id int64) bool { return id >= 0 && id <= math.MaxInt32 }

// EvictDetail returns the detail of an eviction's event.
func EvictDetail(prev Lease, reason string) string {
	d := fmt.Sprintf("evicted at version %d (now %d), ceiling %d kept", prev.FencingVersion, prev.FencingVersion+1, prev.CeilingMS)
	if prev.Owner != "" {
		d += fmt.Sprintf(", owner %s", prev.Owner)
	}
	if reason != "" {
		d += ": " + reason
	}
	return d
}

// ClaimEvent returns the event a claim records: takeover when the row had
// another holder, acquire otherwise.
func ClaimEvent(prevHolder, holder string, prevVersion, prevCeiling int64) (kind EventKind, detail string) {
	switch prevHolder {
	case "":
		return EventAcquire, fmt.Sprintf("free row, previous ceiling %d", prevCeiling)
	case holder:
		return EventAcquire, fmt.Sprintf("claimed again from version %d, previous ceiling %d", prevVersion, prevCeiling)
	default:
		return EventTakeover, fmt.Sprintf("taken over from %s at version %d, previous ceiling %d", prevHolder, prevVersion, prevCeiling)
	}
}
