// Package leaseapi is the lease API's one copy of its rules, whatever the
// transport: the HTTP routes under /v1/leases (httpapi) and the gRPC
// LeaseService (rpcapi) decode their requests, call a Broker, and encode
// its answer or its *Error.
//
// The lease API lets any process hold a worker-ID lease and make Snowflake
// IDs in its own memory (docs/leases.md). The broker, the node, runs the
// same store calls as a node's own keeper, and keeps every bound that
// protects other holders itself: the holder is qualified with the caller's
// token name, the ttl lies within the configured bounds, the pool within
// the layout, and every ceiling within store time + ttl + the broker's own
// allowed clock offset, whatever the caller asks.
package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/problem"
	"github.com/idgen-project/idgen/snowflake"
)

// MaxHolderLen is the longest holder name a caller may give, in bytes: the
// broker stores "<token name>/<holder>", and token names have at most 64
// bytes, so that every qualified holder fits allocator.MaxHolderLen.
const MaxHolderLen = allocator.MaxHolderLen - 65

// NoWorkerRetryAfter is the delay asked of a caller that found every
// worker ID held: one frees when a lease expires or is released, which the
// broker cannot foresee.
const NoWorkerRetryAfter = time.Second

// storeTimeout bounds each store call of the broker.
const storeTimeout = 5 * time.Second

// Store is what the broker calls: the lease table's protocol, the calls a
// node's keeper makes. Every allocator.Store is one.
type Store interface {
	Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error)
	Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error)
	Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error)
	RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error
}

// Config configures the lease API. With a nil Store it is off: every call
// answers not_found.
type Config struct {
	// Store runs the lease calls: the node's store.
	Store Store
	// MinTTL and MaxTTL bound the ttl a caller may ask for: at least
	// allocator.MinLeaseTTL, whole milliseconds, MinTTL <= MaxTTL.
	MinTTL, MaxTTL time.Duration
	// DefaultTTL is the ttl of a request that names none; within the
	// bounds.
	DefaultTTL time.Duration
	// MaxClockOffset is the broker's own allowed offset from store time,
	// passed to the store as the bound on every ceiling a caller proposes,
	// and told to holders as the offset beyond which they must not issue.
	MaxClockOffset time.Duration
	// MaxBackwardWait is told to holders: the largest backward step of
	// their clock they may wait out.
	MaxBackwardWait time.Duration
}

// Validate reports a configuration New refuses. prefix starts the message
// ("httpapi: ").
func (c Config) Validate() error {
	if c.Store == nil {
		return nil
	}
	switch {
	case c.MinTTL < allocator.MinLeaseTTL || c.MaxTTL < c.MinTTL:
		return fmt.Errorf("lease API ttl bounds %s..%s: want at least %s and min <= max", c.MinTTL, c.MaxTTL, allocator.MinLeaseTTL)
	case c.MinTTL%time.Millisecond != 0 || c.MaxTTL%time.Millisecond != 0 || c.DefaultTTL%time.Millisecond != 0:
		return fmt.Errorf("lease API ttls %s, %s, %s: want whole milliseconds", c.MinTTL, c.MaxTTL, c.DefaultTTL)
	case c.DefaultTTL < c.MinTTL || c.DefaultTTL > c.MaxTTL:
		return fmt.Errorf("lease API default ttl %s outside %s..%s", c.DefaultTTL, c.MinTTL, c.MaxTTL)
	case c.MaxClockOffset < 0 || c.MaxBackwardWait < 0:
		return fmt.Errorf("lease API max clock offset %s and max backward wait %s: want at least 0", c.MaxClockOffset, c.MaxBackwardWait)
	}
	return nil
}

// Error is a refusal: its problem code, a detail for the caller (it never
// names a secret, nor anything of another caller's lease), the delay to ask
// for when the code is one to retry later, and the cause.
type Error struct {
	Code       problem.Code
	Detail     string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Detail + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// invalidf returns an invalid refusal.
func invalidf(format string, args ...any) *Error {
	return &Error{Code: problem.Invalid, Detail: fmt.Sprintf(format, args...)}
}

// Caller is who calls: the name of its token, which qualifies its holders
// and goes into the lease table's owner column, and the request ID, which
// the lease events record.
type Caller struct {
	Name      string
	RequestID string
}

// Broker runs the lease API's calls. It starts no goroutine and keeps no
// state between calls.
type Broker struct {
	cfg    Config
	layout snowflake.Layout
	log    *slog.Logger
}

// New returns the broker of cfg for the cluster's layout; log receives a
// line per lease granted, released and lost (nil discards them).
func New(cfg Config, layout snowflake.Layout, log *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{cfg: cfg, layout: layout, log: log}, nil
}

// On reports whether the lease API is on: it has a store.
func (b *Broker) On() bool { return b.cfg.Store != nil }

// Layout returns the cluster's Snowflake layout, which the node checked
// against the one its database records when it started.
func (b *Broker) Layout() snowflake.Layout { return b.layout }

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// Begin checks that the lease API is on and the call has a caller; every
// call starts with it (GetLayout too).
func (b *Broker) Begin(caller Caller) error {
	if b.cfg.Store == nil {
		return &Error{Code: problem.NotFound, Detail: "the lease API is off on this node"}
	}
	if caller.Name == "" {
		return &Error{Code: problem.Unauthorized, Detail: "the lease API needs a token with the leases scope"}
	}
	return nil
}

// qualifiedHolder begins a call on a lease (Begin) and returns the holder
// it names, qualified.
func (b *Broker) qualifiedHolder(caller Caller, holder string) (string, error) {
	if err := b.Begin(caller); err != nil {
		return "", err
	}
	return qualify(caller, holder)
}

// holderAt begins a call on a lease the caller holds, heartbeat or
// release: it returns the holder qualified (qualifiedHolder), once version
// is a fencing version an acquire can have returned.
func (b *Broker) holderAt(caller Caller, holder string, version int64) (string, error) {
	qualified, err := b.qualifiedHolder(caller, holder)
	if err != nil {
		return "", err
	}
	if version < 1 {
		return "", invalidf("fencing_version must be the positive version the acquire returned")
	}
	return qualified, nil
}

// qualify checks holder and returns "<caller>/<holder>".
func qualify(caller Caller, holder string) (string, error) {
	if holder == "" || len(holder) > MaxHolderLen {
		return "", invalidf("holder must have 1 to %d bytes", MaxHolderLen)
	}
	for i := 0; i < len(holder); i++ {
		if holder[i] < 0x21 || holder[i] > 0x7e {
			return "", invalidf("holder must be printable ASCII without spaces")
		}
	}
	return caller.Name + "/" + holder, nil
}

// ttlOf returns the ttl a request asks for: the default for 0, else ttlMS
// within the configured bounds.
func (b *Broker) ttlOf(ttlMS int64) (time.Duration, error) {
	if ttlMS == 0 {
		return b.cfg.DefaultTTL, nil
	}
	lo, hi := b.cfg.MinTTL.Milliseconds(), b.cfg.MaxTTL.Milliseconds()
	if ttlMS < lo || ttlMS > hi {
		return 0, invalidf("ttl_ms %d out of bounds: want %d to %d (or 0 for the default %d)", ttlMS, lo, hi, b.cfg.DefaultTTL.Milliseconds())
	}
	return time.Duration(ttlMS) * time.Millisecond, nil
}

// ceilingOf returns the ceiling and clock offset to pass to the store for a
// proposal: the proposal bounded by store time + ttl + the broker's allowed
// offset, or, for no proposal (0), store time + ttl exactly.
func (b *Broker) ceilingOf(proposalMS int64) (int64, time.Duration, error) {
	switch {
	case proposalMS < 0:
		return 0, 0, invalidf("ceiling_ms %d is negative", proposalMS)
	case proposalMS == 0:
		return math.MaxInt64, 0, nil
	}
	return proposalMS, b.cfg.MaxClockOffset, nil
}

// bounds returns the ttl, and the ceiling and clock offset to pass to the
// store, of a request that claims or extends a lease (ttlOf, ceilingOf).
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
	if datacenter < 0 || datacenter > b.layout.MaxDatacenter() {
		return allocator.LeaseKey{}, invalidf("datacenter must be an integer from 0 to %d", b.layout.MaxDatacenter())
	}
	if worker < 0 || worker > b.layout.MaxWorker() {
		return allocator.LeaseKey{}, invalidf("worker must be an integer from 0 to %d", b.layout.MaxWorker())
	}
	return allocator.LeaseKey{DatacenterID: datacenter, WorkerID: worker}, nil
}

// storeError is the refusal of a store call's error: the domain's code, or
// unavailable for an error the domain does not know (the database).
func storeError(err error) error {
	code, retry := problem.FromDomain(err)
	if code == problem.Internal && !errors.Is(err, context.Canceled) {
		return &Error{Code: problem.Unavailable, Detail: "database unavailable: " + err.Error(), RetryAfter: time.Second, Err: err}
	}
	if code == problem.Internal {
		return &Error{Code: code, Detail: "internal error; see the server log", Err: err}
	}
	return &Error{Code: code, Detail: err.Error(), RetryAfter: retry, Err: err}
}

// Pool is an inclusive range of worker IDs.
type Pool struct{ Min, Max int64 }

// AcquireRequest asks for a lease.
type AcquireRequest struct {
	Holder     string
	Datacenter int64
	// Workers is the pool to choose from; nil for every worker ID of the
	// layout.
	Workers          *Pool
	TTLMS            int64
	CeilingMS        int64
	MaxPrevCeilingMS int64
}

// Grant is a granted lease: what a holder in any language needs.
type Grant struct {
	Lease           allocator.Lease // the row after the claim; Holder qualified
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

// Acquire claims one worker ID of the pool for "<caller>/<holder>".
func (b *Broker) Acquire(ctx context.Context, caller Caller, req AcquireRequest) (Grant, error) {
	holder, err := b.qualifiedHolder(caller, req.Holder)
	if err != nil {
		return Grant{}, err
	}
	l := b.layout
	if req.Datacenter < 0 || req.Datacenter > l.MaxDatacenter() {
		return Grant{}, invalidf("datacenter %d outside the layout: want 0 to %d", req.Datacenter, l.MaxDatacenter())
	}
	pool := allocator.WorkerRange{Min: 0, Max: l.MaxWorker()}
	if w := req.Workers; w != nil {
		pool = allocator.WorkerRange{Min: w.Min, Max: w.Max}
	}
	switch {
	case pool.Min < 0 || pool.Max > l.MaxWorker() || pool.Min > pool.Max:
		return Grant{}, invalidf("workers %d-%d outside the layout: want 0 <= min <= max <= %d", pool.Min, pool.Max, l.MaxWorker())
	case pool.Max-pool.Min >= allocator.MaxPoolSize:
		return Grant{}, invalidf("workers %d-%d: %d worker IDs, want at most %d", pool.Min, pool.Max, pool.Max-pool.Min+1, allocator.MaxPoolSize)
	}
	ttl, ceiling, offset, err := b.bounds(req.TTLMS, req.CeilingMS)
	if err != nil {
		return Grant{}, err
	}
	if req.MaxPrevCeilingMS < 0 {
		return Grant{}, invalidf("max_prev_ceiling_ms %d is negative", req.MaxPrevCeilingMS)
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	res, err := b.cfg.Store.Claim(sctx, allocator.ClaimRequest{
		DatacenterID: req.Datacenter, MinWorkerID: pool.Min, MaxWorkerID: pool.Max,
		Holder: holder, TTL: ttl, CeilingMS: ceiling, MaxClockOffset: offset,
		MaxPrevCeilingMS: req.MaxPrevCeilingMS, Owner: caller.Name, RequestID: caller.RequestID,
	})
	if err != nil {
		if errors.Is(err, allocator.ErrNoWorkerAvailable) {
			return Grant{}, &Error{Code: problem.NoWorkerAvailable, RetryAfter: NoWorkerRetryAfter, Err: err,
				Detail: fmt.Sprintf("every worker ID of datacenter %d, %d-%d, is held (or its previous ceiling lies above max_prev_ceiling_ms); one frees when its lease expires or is released",
					req.Datacenter, pool.Min, pool.Max)}
		}
		return Grant{}, storeError(err)
	}
	lease := res.Lease
	b.log.LogAttrs(ctx, slog.LevelInfo, "lease granted through the lease API",
		slog.String("holder", holder), slog.Int64("datacenter", lease.DatacenterID), slog.Int64("worker", lease.WorkerID),
		slog.Int64("fencing_version", lease.FencingVersion), slog.Int64("ceiling_ms", lease.CeilingMS),
		slog.String("previous_holder", res.PrevHolder))
	return Grant{
		Lease:           lease,
		FloorMS:         res.PrevCeilingMS + 1,
		PrevHolder:      res.PrevHolder,
		TTL:             ttl,
		Heartbeat:       ttl / 3,
		Margin:          ttl / 10,
		MaxClockOffset:  b.cfg.MaxClockOffset,
		MaxBackwardWait: b.cfg.MaxBackwardWait,
		DBTime:          res.DBNow,
		Layout:          b.layout,
	}, nil
}

// HeartbeatRequest extends a lease.
type HeartbeatRequest struct {
	Key            allocator.LeaseKey // checked with Key
	Holder         string             // as the caller gave it to Acquire
	FencingVersion int64
	TTLMS          int64
	CeilingMS      int64
}

// Extension is an extended lease.
type Extension struct {
	Lease  allocator.Lease
	DBTime time.Time
}

// Heartbeat extends a lease, fenced on the qualified holder and the
// version. A heartbeat that matches no row is a lost lease: the broker
// records the lost event, as a node's keeper does, and answers lease_lost.
func (b *Broker) Heartbeat(ctx context.Context, caller Caller, req HeartbeatRequest) (Extension, error) {
	holder, err := b.holderAt(caller, req.Holder, req.FencingVersion)
	if err != nil {
		return Extension{}, err
	}
	ttl, ceiling, offset, err := b.bounds(req.TTLMS, req.CeilingMS)
	if err != nil {
		return Extension{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	lease, dbNow, err := b.cfg.Store.Heartbeat(sctx, allocator.HeartbeatRequest{
		Key: req.Key, Holder: holder, FencingVersion: req.FencingVersion, TTL: ttl,
		CeilingMS: ceiling, MaxClockOffset: offset, Owner: caller.Name, RequestID: caller.RequestID,
	})
	if errors.Is(err, allocator.ErrLeaseLost) {
		b.recordLost(ctx, req.Key, caller, holder, req.FencingVersion)
		return Extension{}, lostError(req.Key, holder, req.FencingVersion, err)
	}
	if err != nil {
		return Extension{}, storeError(err)
	}
	return Extension{Lease: lease, DBTime: dbNow}, nil
}

// recordLost records the lost event of a heartbeat that matched no row,
// with the caller and the request ID; a failure to record it is logged.
func (b *Broker) recordLost(ctx context.Context, key allocator.LeaseKey, caller Caller, holder string, version int64) {
	// Recorded even if the caller goes away meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	attrs := []slog.Attr{slog.String("holder", holder), slog.Int64("datacenter", key.DatacenterID), slog.Int64("worker", key.WorkerID), slog.Int64("fencing_version", version)}
	err := b.cfg.Store.RecordLeaseEvent(ctx, allocator.LeaseEvent{
		LeaseKey: key, Holder: holder, FencingVersion: version, Kind: allocator.EventLost,
		Detail: "heartbeat through the lease API matched no row", Owner: caller.Name, RequestID: caller.RequestID,
	})
	if err != nil {
		b.log.LogAttrs(ctx, slog.LevelWarn, "could not record a lost lease", append(attrs, slog.Any("err", err))...)
		return
	}
	b.log.LogAttrs(ctx, slog.LevelWarn, "lease lost: a heartbeat through the lease API matched no row", attrs...)
}

// lostError is the lease_lost refusal: the detail names the lease the
// caller thought it held, and nothing of whoever holds it now.
func lostError(key allocator.LeaseKey, holder string, version int64, err error) *Error {
	return &Error{Code: problem.LeaseLost, Err: err, Detail: fmt.Sprintf(
		"worker %d/%d is not held by %s at fencing version %d (taken over, evicted, released or expired): stop issuing and acquire afresh",
		key.DatacenterID, key.WorkerID, holder, version)}
}

// ReleaseRequest gives a lease back.
type ReleaseRequest struct {
	Key             allocator.LeaseKey // checked with Key
	Holder          string             // as the caller gave it to Acquire
	FencingVersion  int64
	LastTimestampMS int64
}

// Release gives a lease back, its ceiling lowered to the last timestamp
// used (see allocator.ReleaseCeiling), and returns that ceiling. A last
// timestamp outside the lease's floor and ceiling is refused with
// invalid_release and changes nothing.
func (b *Broker) Release(ctx context.Context, caller Caller, req ReleaseRequest) (int64, error) {
	holder, err := b.holderAt(caller, req.Holder, req.FencingVersion)
	if err != nil {
		return 0, err
	}
	if req.LastTimestampMS < 0 {
		return 0, invalidf("last_timestamp_ms %d is negative; 0 means no ID was issued", req.LastTimestampMS)
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	ceiling, err := b.cfg.Store.Release(sctx, allocator.ReleaseRequest{
		Key: req.Key, Holder: holder, FencingVersion: req.FencingVersion, LastTimestampMS: req.LastTimestampMS,
		Owner: caller.Name, RequestID: caller.RequestID,
	})
	switch {
	case errors.Is(err, allocator.ErrLeaseLost):
		return 0, lostError(req.Key, holder, req.FencingVersion, err)
	case errors.Is(err, allocator.ErrInvalidRelease):
		// The refusal and its figures, without the store's prefix.
		detail := err.Error()
		if i := strings.Index(detail, allocator.ErrInvalidRelease.Error()); i >= 0 {
			detail = detail[i:]
		}
		return 0, &Error{Code: problem.InvalidRelease, Err: err, Detail: detail + "; the lease is unchanged"}
	case err != nil:
		return 0, storeError(err)
	}
	b.log.LogAttrs(ctx, slog.LevelInfo, "lease released through the lease API",
		slog.String("holder", holder), slog.Int64("datacenter", req.Key.DatacenterID), slog.Int64("worker", req.Key.WorkerID),
		slog.Int64("fencing_version", req.FencingVersion), slog.Int64("ceiling_ms", ceiling))
	return ceiling, nil
}
