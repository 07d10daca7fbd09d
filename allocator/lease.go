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
// the lease API: "api:<token name>/<holder>". A keeper's own holder name
// never starts with it (KeeperSettings.Holder), so that a lease-API caller
// can never pass for a node, whatever names either chooses.
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
	// FloorMS is ts_floor_ms: the lowest Snowflake timestamp (Unix ms) the
	// holder of the last claim may use, one above the ceiling the claim
	// found. 0 means unknown: the row was last claimed before idgen
	// recorded floors (see ReleaseCeiling).
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
	// EventFence (fence.go): a restore fence took the lease from its
	// holder and raised its ceiling (RestoreFencer.FenceRestore).
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
	// Owner is the authenticated caller the event was recorded for: the
	// remote holder's for acquire, takeover, release and lost, the
	// operator's for evict; "" for idgen's own nodes.
	Owner string
	// RequestID is the ID of the request that caused the event, "" if none.
	RequestID string
	// Block, on a lost event a keeper records, is what the holder issued
	// since its last report, for the audit trail; stores neither write
	// nor read it.
	Block Block
}

// Validate reports an event no store could record: an unknown kind, or a
// holder, owner or request ID too long (see the limits). Stores call it
// before touching the database.
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
	// CeilingMS is the ceiling the claim proposes. The row's ts_ceiling_ms
	// becomes the larger of the previous ceiling and the smaller of
	// CeilingMS and store time + TTL + MaxClockOffset.
	CeilingMS int64
	// MaxClockOffset is how far ahead of store time (beyond the TTL) the
	// ceiling may reach; 0 allows none.
	MaxClockOffset time.Duration
	// MaxPrevCeilingMS excludes rows whose ts_ceiling_ms is above it (the
	// previous holder's ceiling lies too far ahead of this node's clock).
	// Zero means no limit.
	MaxPrevCeilingMS int64
	// Owner is the authenticated caller a remote holder acts for, written
	// to the row and to the claim's event; "" (NULL) for idgen's own nodes.
	// Every later heartbeat and release must name the same owner.
	Owner string
	// SecretHash is the SHA-256, in lower-case hex, of the lease secret the
	// lease API gave the holder with this claim, written to the row; ""
	// (NULL) for idgen's own nodes. Every later heartbeat and release must
	// name the same hash: knowing a holder's name and fencing version is
	// not enough to act on its lease.
	SecretHash string
	// MaxOwnerLeases, when above 0, caps the leases Owner may hold: the
	// claim fails with ErrTooManyLeases when Owner already holds that many
	// rows whose leases have not expired by store time, not counting a row
	// Holder holds (a claim of its own again).
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
	// CeilingMS is the ceiling the heartbeat proposes. Like a claim's, it
	// raises the row's ceiling to no more than store time + TTL +
	// MaxClockOffset, and never lowers it.
	CeilingMS      int64
	MaxClockOffset time.Duration
	// Owner and SecretHash must be the claim's: the row matches only with
	// both ("" matches the NULL of a node's own row). RequestID names the
	// request for the caller's own audit, such as the lost event it
	// records when the heartbeat returns ErrLeaseLost; a heartbeat records
	// no event.
	Owner      string
	SecretHash string
	RequestID  string
	// Block is what the holder issued since its last report, for the
	// audit trail; stores ignore it.
	Block Block
}

// ReleaseRequest gives a lease back. The store leaves behind the ceiling
// ReleaseCeiling computes from LastTimestampMS and the row's floor and
// ceiling.
type ReleaseRequest struct {
	Key            LeaseKey
	Holder         string
	FencingVersion int64
	// LastTimestampMS is the timestamp (Unix ms) of the last ID the holder
	// issued under this lease, 0 if it issued none: what the generator's
	// Stop returned.
	LastTimestampMS int64
	// Owner and SecretHash must be the claim's, as on a heartbeat; Owner
	// and RequestID are written to the release event.
	Owner      string
	SecretHash string
	RequestID  string
	// Block is what the holder issued since its last report, for the
	// audit trail; stores ignore it.
	Block Block
}

// EvictRequest asks LeaseAdmin.Evict to take a lease from its holder.
type EvictRequest struct {
	Key LeaseKey
	// FencingVersion, when not 0, is the version the operator saw: the
	// eviction is refused if the row has moved on since.
	FencingVersion int64
	// Owner is the operator's name and RequestID the request's, both
	// written to the evict event; Reason goes into its detail.
	Owner     string
	RequestID string
	Reason    string
}

// LeaseEventFilter selects lease events for LeaseAdmin.ListLeaseEvents.
// Zero fields select everything.
type LeaseEventFilter struct {
	// AfterID selects events with an ID above it: pass the last ID of a page
	// to read the next one.
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

// Validate reports a filter no store could apply: an unknown kind, an ID
// out of range, a holder or owner too long, or Until before Since. Stores
// call it before touching the database.
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

// LeaseStore is what the lease keeper calls: the lease table's protocol.
// allocator/postgres, allocator/mysql and allocator/sqlite implement it as
// written here, and allocator/storetest holds them to it.
//
// Every time a store compares or writes (expiry, acquired_at, heartbeat_at,
// expires_at, released_at, the bound on ceilings) is its own, never the
// caller's. Each method runs in one transaction at the store's isolation
// (see Store), retried on serialization failures until ctx ends, so a
// method's writes and the event it records commit together or not at all.
// Requests are checked with their Validate method before anything is read
// or written: a request it refuses changes nothing, and its error wraps no
// sentinel.
type LeaseStore interface {
	// EnsureLayout records layout (the default layout when layout is zero)
	// as the Snowflake layout of the database unless one is recorded
	// already, and returns the recorded one, which may differ from layout.
	// Of concurrent first calls exactly one layout wins, and every call
	// returns it.
	EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error)

	// Claim claims one worker ID of the pool req describes, creating the
	// pool's rows that do not exist yet.
	//
	// A candidate row is free (no holder), or its lease has expired by store
	// time, or req.Holder holds it already for req.Owner (a claim of its own
	// whose outcome it did not learn). When req.MaxPrevCeilingMS is not
	// zero, rows whose ceiling lies above it are no candidates. Of the
	// candidates, Claim takes the one with the lowest ceiling, then the
	// lowest worker ID.
	//
	// The row claimed gets holder req.Holder, owner req.Owner and secret
	// req.SecretHash (NULL when empty), fencing_version + 1, acquired_at = heartbeat_at = store time,
	// expires_at = store time + req.TTL, released_at NULL, ts_floor_ms =
	// previous ceiling + 1, and ts_ceiling_ms = max(previous ceiling,
	// min(req.CeilingMS, store time + req.TTL + req.MaxClockOffset)): no
	// request can push a ceiling further ahead of store time. The claim
	// records an EventAcquire, or an EventTakeover when the row had another
	// holder (see ClaimEvent), with req.Owner and req.RequestID. It returns
	// the row after the claim, the holder and ceiling before it, and the
	// store time of the claim.
	//
	// It returns an error wrapping ErrNoWorkerAvailable when no row of the
	// pool is a candidate, and one wrapping ErrTooManyLeases when
	// req.MaxOwnerLeases refuses the claim (see ClaimRequest).
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Heartbeat extends the lease of req.Key, provided req.Holder holds it at
	// req.FencingVersion, for req.Owner with req.SecretHash, and it has not
	// expired by store time: heartbeat_at
	// = store time, expires_at = store time + req.TTL, and ts_ceiling_ms
	// raised as a claim raises it, never lowered. It returns the row after
	// the heartbeat and the store's time, which the caller compares with its
	// own clock. It records no event.
	//
	// It returns an error wrapping ErrLeaseLost, and changes nothing, when
	// the row does not match: another holder, owner, secret or fencing
	// version, released, or expired (whether or not anyone took it over
	// since). When only the owner or the secret differs, the error wraps
	// ErrLeaseSecret too.
	Heartbeat(ctx context.Context, req HeartbeatRequest) (Lease, time.Time, error)

	// Release gives the lease of req.Key back, provided the row matches as
	// for a heartbeat (holder, fencing version, owner, secret, and not
	// expired by store time: a release agrees with a heartbeat on whether a
	// lease is still held): holder, owner and secret NULL,
	// released_at = expires_at = store time, and ts_ceiling_ms set to
	// ReleaseCeiling(ts_floor_ms, ts_ceiling_ms, req.LastTimestampMS), which
	// is never above the ceiling the row had. It records an EventRelease
	// with req.Owner and req.RequestID, and returns the ceiling it left.
	//
	// It returns an error wrapping ErrLeaseLost, and changes nothing, when
	// the row does not match (with ErrLeaseSecret as for a heartbeat); one
	// wrapping ErrInvalidRelease, and changes
	// nothing, when req.LastTimestampMS is one the holder cannot have used
	// (see ReleaseCeiling).
	Release(ctx context.Context, req ReleaseRequest) (ceilingMS int64, err error)

	// RecordLeaseEvent appends ev to lease_events at store time; ev.ID and
	// ev.At are ignored. An event its Validate method refuses (such as a
	// kind other than the EventKind constants) is refused.
	RecordLeaseEvent(ctx context.Context, ev LeaseEvent) error
}

// LeaseAdmin is what people do with the lease tables: the admin API, the
// status page and the CLI. Like LeaseStore's, its writes run in one
// transaction each, at store time, and a request its Validate method
// refuses changes nothing and returns an error that wraps no sentinel.
type LeaseAdmin interface {
	// ListLeases returns every row of worker_leases, ordered by datacenter
	// and worker ID.
	ListLeases(ctx context.Context) ([]Lease, error)

	// ListLeaseEvents returns up to f.Limit events that f selects, in the
	// order of their IDs (oldest first); none when f.Limit is not positive.
	// Pass the last ID of a page as f.AfterID to read the next one.
	ListLeaseEvents(ctx context.Context, f LeaseEventFilter) ([]LeaseEvent, error)

	// PruneLeaseEvents deletes the events recorded before before (store
	// time) and returns how many it deleted. It deletes in batches, each a
	// transaction of its own, so that a large prune holds no lock for long;
	// on an error the batches before it stay deleted. A zero before deletes
	// nothing.
	PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error)

	// Evict takes the lease of req.Key from its holder: fencing_version + 1,
	// holder and owner NULL, expires_at = store time, and ts_ceiling_ms
	// unchanged. The holder's next heartbeat and its release fail with
	// ErrLeaseLost; until then it may still issue up to the ceiling the
	// store committed for it, and the next holder starts above that
	// ceiling, as after any takeover. Evict records an EventEvict naming the
	// evicted holder and the version it held, with req.Owner, req.RequestID
	// and req.Reason, and returns the row after the eviction.
	//
	// The row's secret becomes NULL with its holder. A row is held when it
	// has a holder, expired or not. Evict returns an
	// error wrapping ErrLeaseNotHeld for a row that is free or does not
	// exist, and one wrapping ErrLeaseLost when req.FencingVersion is not 0
	// and differs from the row's; either way it changes nothing.
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
	// MaxEvictReasonLen is the longest reason of an eviction, in bytes of
	// UTF-8.
	MaxEvictReasonLen = 1024
	// MaxPoolSize bounds the worker IDs of one claim: Claim creates a row
	// for each of them.
	MaxPoolSize = 1 << 16
)

// Validate reports a claim request no store could carry out: no holder or
// one over MaxHolderLen bytes, a ttl under 1ms, negative or reversed IDs, a
// pool larger than MaxPoolSize, a negative ceiling, clock offset or lease
// cap, a secret hash that is not 64 lower-case hex digits, or an owner or
// request ID that is too long or not UTF-8. Stores call it
// before touching the database.
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

// Validate reports a heartbeat no store could carry out: no holder or one
// over MaxHolderLen bytes, a ttl under 1ms, a key or fencing version out of
// range, a negative ceiling, a negative clock offset, or an owner or
// request ID that is too long or not UTF-8. Stores call it before touching
// the database.
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

// Validate reports a release no store could carry out: no holder or one
// over MaxHolderLen bytes, a key or fencing version out of range, a
// negative last timestamp, or an owner or request ID that is too long or
// not UTF-8. Stores call it before touching the database. Whether the last
// timestamp fits the lease is for ReleaseCeiling, which sees the row.
func (r ReleaseRequest) Validate() error {
	return invalidRequest("release",
		holderProblem(r.Holder),
		fencedKeyProblem(r.Key, r.FencingVersion),
		problemIf(r.LastTimestampMS < 0, "negative last timestamp %d", r.LastTimestampMS),
		secretProblem(r.SecretHash),
		callerProblem(r.Owner, r.RequestID))
}

// Validate reports an eviction no store could carry out: a key or fencing
// version out of range, or an owner, request ID or reason that is too long
// or not UTF-8. Stores call it before touching the database.
func (r EvictRequest) Validate() error {
	return invalidRequest("eviction",
		fencedKeyProblem(r.Key, r.FencingVersion),
		callerProblem(r.Owner, r.RequestID),
		textProblem("reason", r.Reason, MaxEvictReasonLen))
}

// invalidRequest is the error of the Validate methods: nil when every
// problem is "", otherwise "invalid <what>: " and the first problem, so a
// request with several faults is always reported by the same one, in the
// order the method lists its checks.
func invalidRequest(what string, problems ...string) error {
	for _, p := range problems {
		if p != "" {
			return fmt.Errorf("invalid %s: %s", what, p)
		}
	}
	return nil
}

// problemIf returns the problem format describes when bad holds, "" otherwise.
// The message is only formatted for a bad request.
func problemIf(bad bool, format string, args ...any) string {
	if !bad {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// holderProblem describes a holder no store accepts (empty, or over
// MaxHolderLen bytes), or returns "".
func holderProblem(h string) string {
	return problemIf(!validHolder(h), "holder must have 1 to %d bytes", MaxHolderLen)
}

// ttlProblem describes a lease ttl under the 1ms every store can keep, or
// returns "".
func ttlProblem(ttl time.Duration) string {
	return problemIf(ttl < time.Millisecond, "ttl %s is below 1ms", ttl)
}

// fencedKeyProblem describes a worker key out of the lease table's range
// or a negative fencing version, the two checks of every request naming
// one lease, or returns "".
func fencedKeyProblem(k LeaseKey, fencingVersion int64) string {
	if p := problemIf(!validID(k.DatacenterID) || !validID(k.WorkerID), "worker %d/%d out of range", k.DatacenterID, k.WorkerID); p != "" {
		return p
	}
	return problemIf(fencingVersion < 0, "negative fencing version %d", fencingVersion)
}

// CheckRow reports whether the eviction may go ahead on row, the row of
// r.Key as the store read it in the eviction's transaction (found is false
// when there is none): an error wrapping ErrLeaseNotHeld for a missing or
// free row, one wrapping ErrLeaseLost when r.FencingVersion is not 0 and
// differs from the row's, nil otherwise. Every store applies it.
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

// ReleaseCeiling is the rule of a release: the ceiling a lease with floor
// floorMS and committed ceiling ceilingMS leaves behind when its holder
// last used timestamp lastMS (0 if it issued nothing). Every store applies
// it, so that a remote holder is held to it as a node is.
//
// A holder issues timestamps in [floor, ceiling] only, so a last timestamp
// above the ceiling or below the floor (other than 0) is one it cannot have
// used: a tampered or corrupted release. ReleaseCeiling refuses it with an
// error wrapping ErrInvalidRelease, and the store then changes nothing.
// Otherwise the ceiling becomes max(floor − 1, lastMS): the next holder
// starts right after the last timestamp used, and never at or below the
// previous holder's ceiling (floor − 1), even when this holder issued
// nothing. The result is never above ceilingMS.
//
// A floor of 0 is unknown: the row was claimed before floors were
// recorded. The previous holder's ceiling is then unknown too, so a
// release that issued nothing leaves the ceiling as it is, and one that
// did lowers it to lastMS, which lies above that previous ceiling.
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

// SecretHashLen is the length of a ClaimRequest.SecretHash: a SHA-256 in
// hex.
const SecretHashLen = 64

// secretProblem describes a secret hash that is neither "" nor 64
// lower-case hex digits, or returns "".
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

// callerProblem describes what is wrong with an owner and a request ID, or
// returns "".
func callerProblem(owner, requestID string) string {
	if p := textProblem("owner", owner, MaxOwnerLen); p != "" {
		return p
	}
	return textProblem("request ID", requestID, MaxRequestIDLen)
}

// textProblem describes what is wrong with an optional text field that
// every database must store as given: more than maxLen bytes, not UTF-8,
// or a NUL byte. It returns "" for a good one.
func textProblem(what, v string, maxLen int) string {
	switch {
	case len(v) > maxLen:
		return fmt.Sprintf("%s of %d bytes is longer than %d", what, len(v), maxLen)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return fmt.Sprintf("%s must be UTF-8 text without NUL bytes", what)
	}
	return ""
}

// validID reports whether a datacenter or worker ID fits the lease table.
func validID(id int64) bool { return id >= 0 && id <= math.MaxInt32 }

// EvictDetail returns the detail of the event an eviction of the lease
// held as prev records.
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

// ClaimEvent returns the lease event a claim records: a takeover when the
// row had another holder (whose lease had expired), an acquire otherwise.
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
