package idgen

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// The lease API lets any process hold a worker-ID lease and make Snowflake
// IDs in its own memory (docs/leases.md). The broker runs the keeper's
// store calls with the keeper's rules, and itself enforces every bound
// protecting other holders: holders are "api:<token name>/<holder>" with
// the token as owner and a secret's hash, all three checked on every
// heartbeat and release; the ttl, the pool (never the node's), each
// caller's MaxLeases and AcquireRate are bounded; ceilings stay within
// store time + ttl + clock offset; and a release must state its last
// timestamp or that none was used.

// MaxHolderLen is the longest holder a caller may give, in bytes, so that
// "api:<token name>/<holder>" fits allocator.MaxHolderLen.
const MaxHolderLen = allocator.MaxHolderLen - len(allocator.RemoteHolderPrefix) - allocator.MaxNameLen - 1

// Defaults of LeaseSettings.
const (
	DefaultLeaseMinTTL       = 3 * time.Second
	DefaultLeaseMaxTTL       = 5 * time.Minute
	DefaultLeaseMaxLeases    = 8
	DefaultLeaseAcquireRate  = 1.0 // acquires per second per caller
	DefaultLeaseAcquireBurst = 8
)

// NoWorkerRetryAfter is the delay asked of a caller that found every
// worker ID held.
const NoWorkerRetryAfter = time.Second

const storeTimeout = 5 * time.Second

// LeaseSettings configure the lease API. Zero fields mean their defaults.
type LeaseSettings struct {
	// MinTTL and MaxTTL bound the ttl a caller may ask for (at least
	// allocator.MinLeaseTTL, whole ms). The node's ttl, brought within them,
	// is the default.
	MinTTL, MaxTTL time.Duration
	// WorkerIDs is the lease API's own pool, never overlapping the node's.
	// Nil means the layout's worker IDs outside the node's pool (the larger
	// side); the node's nil pool is likewise the rest. With neither set the
	// lease API has none and every acquire answers NotFound.
	WorkerIDs *allocator.WorkerRange
	// MaxLeases caps one caller's live leases.
	MaxLeases int
	// AcquireRate and AcquireBurst limit each caller's acquires per node
	// (not heartbeats or releases).
	AcquireRate  float64
	AcquireBurst int
}

// Resolve returns l with defaults filled in and the resolved keeper
// settings ks with their pool set apart, or an error naming the refused
// field. It is idempotent.
func (l LeaseSettings) Resolve(ks allocator.KeeperSettings) (LeaseSettings, allocator.KeeperSettings, error) {
	if l.MinTTL == 0 {
		l.MinTTL = DefaultLeaseMinTTL
	}
	if l.MaxTTL == 0 {
		l.MaxTTL = DefaultLeaseMaxTTL
	}
	if l.MaxLeases == 0 {
		l.MaxLeases = DefaultLeaseMaxLeases
	}
	if l.AcquireRate == 0 {
		l.AcquireRate = DefaultLeaseAcquireRate
	}
	if l.AcquireBurst == 0 {
		l.AcquireBurst = DefaultLeaseAcquireBurst
	}
	switch {
	case l.MinTTL < allocator.MinLeaseTTL || l.MinTTL%time.Millisecond != 0:
		return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.MinTTL %s: want whole milliseconds, at least %s",
			l.MinTTL, allocator.MinLeaseTTL)
	case l.MaxTTL < l.MinTTL || l.MaxTTL%time.Millisecond != 0:
		return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.MaxTTL %s: want whole milliseconds, at least LeaseSettings.MinTTL %s",
			l.MaxTTL, l.MinTTL)
	case l.MaxLeases < 0:
		return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.MaxLeases %d: want at least 1", l.MaxLeases)
	case !(l.AcquireRate > 0 && l.AcquireRate <= 1e6):
		return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.AcquireRate %v: want above 0 and at most 1e6 a second", l.AcquireRate)
	case l.AcquireBurst < 0:
		return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.AcquireBurst %d: want at least 1", l.AcquireBurst)
	}
	all := allocator.WorkerRange{Min: 0, Max: ks.Layout.MaxWorker()}
	switch node, api := ks.WorkerIDs, l.WorkerIDs; {
	case api != nil:
		if api.Min < 0 || api.Max > all.Max || api.Min > api.Max {
			return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.WorkerIDs %d-%d: the layout allows 0 to %d", api.Min, api.Max, all.Max)
		}
		if node == nil {
			rest, ok := outside(all, *api)
			if !ok {
				return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.WorkerIDs %d-%d: they leave the node no worker ID; give it some outside them", api.Min, api.Max)
			}
			ks.WorkerIDs = &rest
		} else if node.Min <= api.Max && api.Min <= node.Max {
			return LeaseSettings{}, ks, fmt.Errorf("invalid LeaseSettings.WorkerIDs %d-%d: they overlap KeeperSettings.WorkerIDs %d-%d, so a caller of the lease API could take the node's worker IDs",
				api.Min, api.Max, node.Min, node.Max)
		}
	case node != nil:
		if rest, ok := outside(all, *node); ok {
			l.WorkerIDs = &rest
		}
	}
	return l, ks, nil
}

// outside returns the larger range of worker IDs below or above r (upper
// on a tie), false when r covers all.
func outside(all, r allocator.WorkerRange) (allocator.WorkerRange, bool) {
	below := allocator.WorkerRange{Min: all.Min, Max: r.Min - 1}
	above := allocator.WorkerRange{Min: r.Max + 1, Max: all.Max}
	nb, na := below.Max-below.Min+1, above.Max-above.Min+1
	switch {
	case na > 0 && na >= nb:
		return above, true
	case nb > 0:
		return below, true
	}
	return allocator.WorkerRange{}, false
}

// LeaseStore is the lease table protocol the broker calls; every
// allocator.Store is one.
type LeaseStore interface {
	Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error)
	Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error)
	Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error)
	RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error
}

// Broker runs the lease API's calls for every transport. It starts no
// goroutine and keeps only per-caller acquire rates and recent lost events.
type Broker struct {
	store           LeaseStore // nil: the lease API is off
	s               LeaseSettings
	layout          snowflake.Layout
	defaultTTL      time.Duration
	maxOffset       time.Duration
	maxBackwardWait time.Duration
	log             *slog.Logger
	now             func() time.Time // the acquire rate's clock; tests step their own
	acquires        *callerLimits
	lost            *recentSet
}

// NewBroker returns the broker for keeper settings ks on store (nil turns
// the lease API off) with resolved settings l; ks gives the layout, the
// default ttl, the clock offset bounding ceilings and the backward wait.
// log receives grants, releases and losses (nil discards).
func NewBroker(store LeaseStore, ks allocator.KeeperSettings, l LeaseSettings, log *slog.Logger) (*Broker, error) {
	if w := l.WorkerIDs; w != nil && (w.Min < 0 || w.Min > w.Max || w.Max > ks.Layout.MaxWorker()) {
		return nil, fmt.Errorf("invalid LeaseSettings.WorkerIDs %d-%d: the layout allows 0 to %d", w.Min, w.Max, ks.Layout.MaxWorker())
	}
	if l.MinTTL < allocator.MinLeaseTTL || l.MaxTTL < l.MinTTL || l.MaxLeases < 1 || l.AcquireRate <= 0 || l.AcquireBurst < 1 {
		return nil, fmt.Errorf("lease API settings %+v: resolve them first (LeaseSettings.Resolve)", l)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{
		store: store, s: l, layout: ks.Layout, log: log, now: time.Now,
		defaultTTL:      min(max(ks.TTL.Truncate(time.Millisecond), l.MinTTL), l.MaxTTL),
		maxOffset:       ks.MaxClockOffset,
		maxBackwardWait: max(ks.MaxBackwardWait, 0),
		acquires:        newCallerLimits(rate.Limit(l.AcquireRate), l.AcquireBurst),
		lost:            newRecentSet(maxRecentLost),
	}, nil
}

// On reports whether the lease API is on.
func (b *Broker) On() bool { return b.store != nil }

// Layout returns the cluster's Snowflake layout.
func (b *Broker) Layout() snowflake.Layout { return b.layout }

func leaseInvalid(format string, args ...any) *Error { return Errorf(Invalid, format, args...) }

// Begin checks that the lease API is on and the call has a caller.
func (b *Broker) Begin(caller Caller) error {
	if b.store == nil {
		return &Error{Code: NotFound, Detail: "the lease API is off on this node"}
	}
	if caller.Name == "" {
		return &Error{Code: Unauthorized, Detail: "the lease API needs a token with the leases scope"}
	}
	return nil
}

// qualifiedHolder begins a call on a lease and returns its qualified holder.
func (b *Broker) qualifiedHolder(caller Caller, holder string) (string, error) {
	if err := b.Begin(caller); err != nil {
		return "", err
	}
	return qualify(caller, holder)
}

// holderAt begins a heartbeat or release: the qualified holder, once
// version is one an acquire can have returned.
func (b *Broker) holderAt(caller Caller, holder string, version int64) (string, error) {
	qualified, err := b.qualifiedHolder(caller, holder)
	if err != nil {
		return "", err
	}
	if version < 1 {
		return "", leaseInvalid("fencing_version must be the positive version the acquire returned")
	}
	return qualified, nil
}

// qualify checks holder and returns "api:<caller>/<holder>".
func qualify(caller Caller, holder string) (string, error) {
	if err := ValidHolder(holder); err != nil {
		return "", err
	}
	return allocator.RemoteHolderPrefix + caller.Name + "/" + holder, nil
}

// ValidHolder reports, as an Invalid *Error, a holder that is not 1 to
// MaxHolderLen bytes of printable ASCII without spaces.
func ValidHolder(holder string) error {
	if holder == "" || len(holder) > MaxHolderLen {
		return leaseInvalid("holder must have 1 to %d bytes", MaxHolderLen)
	}
	for i := 0; i < len(holder); i++ {
		if holder[i] < 0x21 || holder[i] > 0x7e {
			return leaseInvalid("holder must be printable ASCII without spaces")
		}
	}
	return nil
}

// secretLen: 32 random bytes in unpadded base64url.
const secretLen = 43

// newSecret returns a random lease secret and its stored hash.
func newSecret() (secret, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	return secret, hashSecret(secret)
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// secretHash checks a sent lease secret and returns its hash.
func secretHash(secret string) (string, error) {
	if secret == "" {
		return "", leaseInvalid("lease_secret is required: send the lease_secret of the acquire answer")
	}
	if len(secret) != secretLen {
		// Any other secret matches no lease: say so before the store does.
		return "", leaseInvalid("lease_secret must be the %d characters of the acquire answer's lease_secret", secretLen)
	}
	return hashSecret(secret), nil
}

// ttlOf returns the ttl asked for: default for 0, else within bounds.
func (b *Broker) ttlOf(ttlMS int64) (time.Duration, error) {
	if ttlMS == 0 {
		return b.defaultTTL, nil
	}
	lo, hi := b.s.MinTTL.Milliseconds(), b.s.MaxTTL.Milliseconds()
	if ttlMS < lo || ttlMS > hi {
		return 0, leaseInvalid("ttl_ms %d out of bounds: want %d to %d (or 0 for the default %d)", ttlMS, lo, hi, b.defaultTTL.Milliseconds())
	}
	return time.Duration(ttlMS) * time.Millisecond, nil
}

// ceilingOf returns the ceiling and offset to pass to the store: the
// proposal bounded by store time + ttl + offset, or for 0 store time + ttl.
func (b *Broker) ceilingOf(proposalMS int64) (int64, time.Duration, error) {
	switch {
	case proposalMS < 0:
		return 0, 0, leaseInvalid("ceiling_ms %d is negative", proposalMS)
	case proposalMS == 0:
		return math.MaxInt64, 0, nil
	}
	return proposalMS, b.maxOffset, nil
}

// bounds returns ttlOf and ceilingOf for a claim or extension.
func (b *Broker) bounds(ttlMS, ceilingMS int64) (ttl time.Duration, ceiling int64, offset time.Duration, err error) {
	if ttl, err = b.ttlOf(ttlMS); err != nil {
		return 0, 0, 0, err
	}
	if ceiling, offset, err = b.ceilingOf(ceilingMS); err != nil {
		return 0, 0, 0, err
	}
	return ttl, ceiling, offset, nil
}

// Key checks a lease's datacenter and worker IDs against the layout.
func (b *Broker) Key(datacenter, worker int64) (allocator.LeaseKey, error) {
	return LeaseKeyOf(b.layout, datacenter, worker)
}

// LeaseKeyOf checks a lease's IDs against layout, for the lease API and
// the admin API's evictions.
func LeaseKeyOf(layout snowflake.Layout, datacenter, worker int64) (allocator.LeaseKey, error) {
	if datacenter < 0 || datacenter > layout.MaxDatacenter() {
		return allocator.LeaseKey{}, leaseInvalid("datacenter must be an integer from 0 to %d", layout.MaxDatacenter())
	}
	if worker < 0 || worker > layout.MaxWorker() {
		return allocator.LeaseKey{}, leaseInvalid("worker must be an integer from 0 to %d", layout.MaxWorker())
	}
	return allocator.LeaseKey{DatacenterID: datacenter, WorkerID: worker}, nil
}

// storeError maps a store error to a refusal: unavailable for unknown
// (database) errors, logged; else the domain's code, naming nothing of
// the store.
func (b *Broker) storeError(ctx context.Context, op string, err error) error {
	if ErrorOf(err, "").Code == Internal {
		b.log.LogAttrs(ctx, slog.LevelWarn, "lease API: store call failed", slog.String("call", op), slog.Any("err", err))
	}
	return StoreError(err, "")
}

// AcquireRequest asks for a lease.
type AcquireRequest struct {
	Holder     string
	Datacenter int64
	// Workers is the pool to choose from within the lease API's; nil for all.
	Workers          *allocator.WorkerRange
	TTLMS            int64
	CeilingMS        int64
	MaxPrevCeilingMS int64
}

// Grant is a granted lease: what a holder in any language needs.
type Grant struct {
	Lease allocator.Lease // the row after the claim; Holder qualified
	// Secret must be sent with every heartbeat and release; only this
	// answer carries it, the store keeps its hash.
	Secret          string
	FloorMS         int64
	PrevHolder      string // empty when the worker ID was free
	TTL             time.Duration
	Heartbeat       time.Duration
	Margin          time.Duration
	MaxClockOffset  time.Duration
	MaxBackwardWait time.Duration
	DBTime          time.Time
	Layout          snowflake.Layout
}

// Acquire claims one worker ID of the pool for "api:<caller>/<holder>".
func (b *Broker) Acquire(ctx context.Context, caller Caller, req AcquireRequest) (Grant, error) {
	holder, err := b.qualifiedHolder(caller, req.Holder)
	if err != nil {
		return Grant{}, err
	}
	own := b.s.WorkerIDs
	if own == nil {
		return Grant{}, &Error{Code: NotFound,
			Detail: "the lease API has no worker IDs on this node: its operator sets --worker-ids and --lease-api-worker-ids apart"}
	}
	l := b.layout
	if req.Datacenter < 0 || req.Datacenter > l.MaxDatacenter() {
		return Grant{}, leaseInvalid("datacenter %d outside the layout: want 0 to %d", req.Datacenter, l.MaxDatacenter())
	}
	pool := *own
	if req.Workers != nil {
		pool = *req.Workers
	}
	if pool.Min > pool.Max || pool.Min < own.Min || pool.Max > own.Max {
		return Grant{}, leaseInvalid("workers %d-%d outside the lease API's worker IDs: want %d <= min <= max <= %d", pool.Min, pool.Max, own.Min, own.Max)
	}
	ttl, ceiling, offset, err := b.bounds(req.TTLMS, req.CeilingMS)
	if err != nil {
		return Grant{}, err
	}
	if req.MaxPrevCeilingMS < 0 {
		return Grant{}, leaseInvalid("max_prev_ceiling_ms %d is negative", req.MaxPrevCeilingMS)
	}
	if wait := b.acquires.take(caller.Name, b.now()); wait > 0 {
		return Grant{}, &Error{Code: TooMany, RetryAfter: wait,
			Detail: fmt.Sprintf("acquire rate limit exceeded (%v a second, bursts of %d, per caller); retry after %s",
				b.s.AcquireRate, b.s.AcquireBurst, wait.Round(time.Millisecond))}
	}
	secret, secretHash := newSecret()
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	res, err := b.store.Claim(sctx, allocator.ClaimRequest{
		DatacenterID: req.Datacenter, MinWorkerID: pool.Min, MaxWorkerID: pool.Max,
		Holder: holder, TTL: ttl, CeilingMS: ceiling, MaxClockOffset: offset,
		MaxPrevCeilingMS: req.MaxPrevCeilingMS, Owner: caller.Name, RequestID: caller.RequestID,
		SecretHash: secretHash, MaxOwnerLeases: b.s.MaxLeases,
	})
	switch {
	case errors.Is(err, allocator.ErrNoWorkerAvailable):
		return Grant{}, &Error{Code: NoWorkerAvailable, RetryAfter: NoWorkerRetryAfter, Err: err,
			Detail: fmt.Sprintf("every worker ID of datacenter %d, %d-%d, is held (or its previous ceiling lies above max_prev_ceiling_ms); one frees when its lease expires or is released",
				req.Datacenter, pool.Min, pool.Max)}
	case errors.Is(err, allocator.ErrTooManyLeases):
		return Grant{}, &Error{Code: TooMany, RetryAfter: NoWorkerRetryAfter, Err: err,
			Detail: fmt.Sprintf("%s holds %d leases, the most one caller may hold (--lease-api-max-leases); release one, or let one expire",
				caller.Name, b.s.MaxLeases)}
	case err != nil:
		return Grant{}, b.storeError(ctx, "acquire", err)
	}
	lease := res.Lease
	b.log.LogAttrs(ctx, slog.LevelInfo, "lease granted through the lease API",
		slog.String("holder", holder), slog.Int64("datacenter", lease.DatacenterID), slog.Int64("worker", lease.WorkerID),
		slog.Int64("fencing_version", lease.FencingVersion), slog.Int64("ceiling_ms", lease.CeilingMS),
		slog.String("previous_holder", res.PrevHolder))
	return Grant{
		Lease:           lease,
		Secret:          secret,
		FloorMS:         res.PrevCeilingMS + 1,
		PrevHolder:      res.PrevHolder,
		TTL:             ttl,
		Heartbeat:       allocator.DefaultHeartbeat(ttl),
		Margin:          allocator.DefaultMargin(ttl),
		MaxClockOffset:  b.maxOffset,
		MaxBackwardWait: b.maxBackwardWait,
		DBTime:          res.DBNow,
		Layout:          b.layout,
	}, nil
}

// HeartbeatRequest extends a lease.
type HeartbeatRequest struct {
	Key            allocator.LeaseKey // checked with Key
	Holder         string             // as the caller gave it to Acquire
	FencingVersion int64
	Secret         string // the acquire answer's lease secret
	// TTLMS is the ttl from now, within bounds; required.
	TTLMS     int64
	CeilingMS int64
	// Issued is what the holder issued since its last report; optional.
	// An impossible block is logged and left out, never refused.
	Issued allocator.Block
}

// Extension is an extended lease.
type Extension struct {
	Lease  allocator.Lease
	TTL    time.Duration // the ttl in effect from this heartbeat on
	DBTime time.Time
}

// Heartbeat extends a lease, fenced on qualified holder and version. A
// heartbeat matching no row records a lost event and answers lease_lost.
func (b *Broker) Heartbeat(ctx context.Context, caller Caller, req HeartbeatRequest) (Extension, error) {
	holder, err := b.holderAt(caller, req.Holder, req.FencingVersion)
	if err != nil {
		return Extension{}, err
	}
	hash, err := secretHash(req.Secret)
	if err != nil {
		return Extension{}, err
	}
	if req.TTLMS == 0 {
		return Extension{}, leaseInvalid("ttl_ms is required on a heartbeat: send the ttl_ms of the acquire answer to keep it, from %d to %d",
			b.s.MinTTL.Milliseconds(), b.s.MaxTTL.Milliseconds())
	}
	ttl, ceiling, offset, err := b.bounds(req.TTLMS, req.CeilingMS)
	if err != nil {
		return Extension{}, err
	}
	req.Issued = b.issued(ctx, caller, req.Issued)
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	lease, dbNow, err := b.store.Heartbeat(sctx, allocator.HeartbeatRequest{
		Key: req.Key, Holder: holder, FencingVersion: req.FencingVersion, TTL: ttl,
		CeilingMS: ceiling, MaxClockOffset: offset, Owner: caller.Name, SecretHash: hash, RequestID: caller.RequestID,
		Block: req.Issued,
	})
	if errors.Is(err, allocator.ErrLeaseLost) {
		b.recordLost(ctx, req.Key, caller, holder, req.FencingVersion, err)
		return Extension{}, lostError(req.Key, holder, req.FencingVersion, err)
	}
	if err != nil {
		return Extension{}, b.storeError(ctx, "heartbeat", err)
	}
	return Extension{Lease: lease, TTL: ttl, DBTime: dbNow}, nil
}

// issued returns the reported block, or none (logged) when no holder can
// have issued it: refusing would cost the holder its lease.
func (b *Broker) issued(ctx context.Context, caller Caller, blk allocator.Block) allocator.Block {
	if err := blk.Validate(b.layout.PerWorkerCap() / 1000); err != nil {
		b.log.LogAttrs(ctx, slog.LevelWarn, "lease API: issued block not recorded", slog.String("caller", caller.Name),
			slog.String("request_id", caller.RequestID), slog.Any("err", err))
		return allocator.Block{}
	}
	return blk
}

// maxRecentLost bounds the lost events a broker remembers having recorded.
const maxRecentLost = 4096

// recordLost records a lost event (failures logged), once per lost lease
// while remembered, so a holder heartbeating a lost lease adds one event.
// A wrong secret (ErrLeaseSecret) means the lease is not lost: logged only.
func (b *Broker) recordLost(ctx context.Context, key allocator.LeaseKey, caller Caller, holder string, version int64, err error) {
	if errors.Is(err, allocator.ErrLeaseSecret) {
		b.log.LogAttrs(ctx, slog.LevelWarn, "lease API: a heartbeat named a live lease with another lease secret",
			slog.String("caller", caller.Name), slog.String("holder", holder), slog.Int64("datacenter", key.DatacenterID),
			slog.Int64("worker", key.WorkerID), slog.Int64("fencing_version", version), slog.String("request_id", caller.RequestID))
		return
	}
	if !b.lost.add(lostKey{key, holder, version}) {
		return
	}
	// Recorded even if the caller goes away meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	attrs := []slog.Attr{slog.String("holder", holder), slog.Int64("datacenter", key.DatacenterID), slog.Int64("worker", key.WorkerID), slog.Int64("fencing_version", version)}
	err = b.store.RecordLeaseEvent(ctx, allocator.LeaseEvent{
		LeaseKey: key, Holder: holder, FencingVersion: version, Kind: allocator.EventLost,
		Detail: "heartbeat through the lease API matched no row", Owner: caller.Name, RequestID: caller.RequestID,
	})
	if err != nil {
		b.log.LogAttrs(ctx, slog.LevelWarn, "could not record a lost lease", append(attrs, slog.Any("err", err))...)
		return
	}
	b.log.LogAttrs(ctx, slog.LevelWarn, "lease lost: a heartbeat through the lease API matched no row", attrs...)
}

// lostError is the lease_lost refusal, naming nothing of the new holder.
func lostError(key allocator.LeaseKey, holder string, version int64, err error) *Error {
	return &Error{Code: LeaseLost, Err: err, Detail: fmt.Sprintf(
		"worker %d/%d is not held by %s at fencing version %d (taken over, evicted, released or expired): stop issuing and acquire afresh",
		key.DatacenterID, key.WorkerID, holder, version)}
}

// ReleaseRequest gives a lease back, stating either LastTimestampMS (above
// 0) or NoneIssued, never by omission.
type ReleaseRequest struct {
	Key             allocator.LeaseKey // checked with Key
	Holder          string             // as the caller gave it to Acquire
	FencingVersion  int64
	Secret          string // the acquire answer's lease secret
	LastTimestampMS int64
	NoneIssued      bool
	// Issued is what the holder issued since its last report; optional.
	Issued allocator.Block
}

// Release gives a lease back with its ceiling lowered (see
// allocator.ReleaseCeiling) and returns that ceiling. Neither or both of
// the last timestamp and NoneIssued is invalid; a timestamp outside the
// lease is invalid_release. Either changes nothing.
func (b *Broker) Release(ctx context.Context, caller Caller, req ReleaseRequest) (int64, error) {
	holder, err := b.holderAt(caller, req.Holder, req.FencingVersion)
	if err != nil {
		return 0, err
	}
	hash, err := secretHash(req.Secret)
	if err != nil {
		return 0, err
	}
	switch {
	case req.LastTimestampMS < 0:
		return 0, leaseInvalid("last_timestamp_ms %d is negative", req.LastTimestampMS)
	case req.LastTimestampMS == 0 && !req.NoneIssued:
		return 0, leaseInvalid("say what was issued: last_timestamp_ms, the timestamp of the last ID issued, or none_issued: true; the lease is unchanged")
	case req.LastTimestampMS > 0 && req.NoneIssued:
		return 0, leaseInvalid("last_timestamp_ms %d and none_issued: say one of them; the lease is unchanged", req.LastTimestampMS)
	}
	req.Issued = b.issued(ctx, caller, req.Issued)
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	ceiling, err := b.store.Release(sctx, allocator.ReleaseRequest{
		Key: req.Key, Holder: holder, FencingVersion: req.FencingVersion, LastTimestampMS: req.LastTimestampMS,
		Owner: caller.Name, SecretHash: hash, RequestID: caller.RequestID, Block: req.Issued,
	})
	switch {
	case errors.Is(err, allocator.ErrLeaseLost):
		return 0, lostError(req.Key, holder, req.FencingVersion, err)
	case err != nil:
		return 0, b.storeError(ctx, "release", err)
	}
	b.log.LogAttrs(ctx, slog.LevelInfo, "lease released through the lease API",
		slog.String("holder", holder), slog.Int64("datacenter", req.Key.DatacenterID), slog.Int64("worker", req.Key.WorkerID),
		slog.Int64("fencing_version", req.FencingVersion), slog.Int64("ceiling_ms", ceiling))
	return ceiling, nil
}

// callerLimits holds each caller's token bucket, by token name; past
// maxCallerLimits it drops full buckets, which are the same as none.
type callerLimits struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex // guards m
	m     map[string]*rate.Limiter
}

// maxCallerLimits bounds the buckets kept.
const maxCallerLimits = 1 << 12

func newCallerLimits(limit rate.Limit, burst int) *callerLimits {
	return &callerLimits{limit: limit, burst: burst, m: map[string]*rate.Limiter{}}
}

// take takes one token at now and returns 0, or the wait until one is
// available (taking nothing).
func (c *callerLimits) take(name string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[name]
	if l == nil {
		if len(c.m) >= maxCallerLimits {
			for k, v := range c.m {
				if v.TokensAt(now) >= float64(c.burst) {
					delete(c.m, k)
				}
			}
		}
		l = rate.NewLimiter(c.limit, c.burst)
		c.m[name] = l
	}
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// lostKey is a lease as a lost heartbeat named it.
type lostKey struct {
	key     allocator.LeaseKey
	holder  string
	version int64
}

// recentSet remembers the last max lost leases, oldest out first.
type recentSet struct {
	mu    sync.Mutex // guards seen, order and next
	seen  map[lostKey]struct{}
	order []lostKey // a ring of what seen holds, in the order added
	next  int
}

func newRecentSet(size int) *recentSet {
	return &recentSet{seen: make(map[lostKey]struct{}, size), order: make([]lostKey, 0, size)}
}

// add adds k and reports whether it was new.
func (r *recentSet) add(k lostKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[k]; ok {
		return false
	}
	if len(r.order) < cap(r.order) {
		r.order = append(r.order, k)
	} else {
		delete(r.seen, r.order[r.next])
		r.order[r.next] = k
		r.next = (r.next + 1) % len(r.order)
	}
	r.seen[k] = struct{}{}
	return true
}
