package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
)

// The lease API under /v1/leases lets any process hold a worker-ID lease
// and make Snowflake IDs in its own memory (docs/leases.md). The broker,
// this node, runs the same store calls as a node's own keeper, and keeps
// every bound that protects other holders itself: the holder is qualified
// with the caller's name, the ttl lies within the configured bounds, the
// pool within the layout, and every ceiling within store time + ttl + the
// broker's own allowed clock offset, whatever the caller asks.

// MaxLeaseHolderLen is the longest holder name a lease API caller may
// give, in bytes: the broker stores "<token name>/<holder>", and token
// names have at most 64 bytes, so that every qualified holder fits
// allocator.MaxHolderLen.
const MaxLeaseHolderLen = allocator.MaxHolderLen - 65

// noWorkerRetryAfter is the Retry-After of a no_worker_available answer:
// a worker ID frees when a lease expires or is released, which the broker
// cannot foresee.
const noWorkerRetryAfter = time.Second

// LeaseBroker is what the lease API calls: the lease table's protocol, the
// calls a node's keeper makes. Every allocator.Store is one.
type LeaseBroker interface {
	Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error)
	Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error)
	Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error)
	RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error
}

// LeaseAPIConfig configures the lease API. With a nil Store the routes
// answer 404: the lease API is off.
type LeaseAPIConfig struct {
	// Store runs the lease calls: the node's store.
	Store LeaseBroker
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

// validate reports a configuration New refuses.
func (c LeaseAPIConfig) validate() error {
	if c.Store == nil {
		return nil
	}
	switch {
	case c.MinTTL < allocator.MinLeaseTTL || c.MaxTTL < c.MinTTL:
		return fmt.Errorf("httpapi: lease API ttl bounds %s..%s: want at least %s and min <= max", c.MinTTL, c.MaxTTL, allocator.MinLeaseTTL)
	case c.MinTTL%time.Millisecond != 0 || c.MaxTTL%time.Millisecond != 0 || c.DefaultTTL%time.Millisecond != 0:
		return fmt.Errorf("httpapi: lease API ttls %s, %s, %s: want whole milliseconds", c.MinTTL, c.MaxTTL, c.DefaultTTL)
	case c.DefaultTTL < c.MinTTL || c.DefaultTTL > c.MaxTTL:
		return fmt.Errorf("httpapi: lease API default ttl %s outside %s..%s", c.DefaultTTL, c.MinTTL, c.MaxTTL)
	case c.MaxClockOffset < 0 || c.MaxBackwardWait < 0:
		return fmt.Errorf("httpapi: lease API max clock offset %s and max backward wait %s: want at least 0", c.MaxClockOffset, c.MaxBackwardWait)
	}
	return nil
}

// addLeaseRoutes registers the lease API, behind the leases scope.
func (s *Server) addLeaseRoutes(e *echo.Echo) {
	g := e.Group("/v1/leases", s.requireScope(ScopeLeases))
	s.add(g.GET, "/layout", s.handleLeaseLayout)
	s.add(g.POST, "", s.handleLeaseAcquire)
	s.add(g.POST, "/:datacenter/:worker/heartbeat", s.handleLeaseHeartbeat)
	s.add(g.POST, "/:datacenter/:worker/release", s.handleLeaseRelease)
}

// layoutJSON is the Snowflake layout: sign bit 0 | time | datacenter |
// worker | sequence.
type layoutJSON struct {
	TimeBits       int   `json:"time_bits"`
	DatacenterBits int   `json:"datacenter_bits"`
	WorkerBits     int   `json:"worker_bits"`
	SequenceBits   int   `json:"sequence_bits"`
	EpochMS        int64 `json:"epoch_ms"`
}

func (s *Server) layoutJSON() layoutJSON {
	l := s.layout
	return layoutJSON{TimeBits: l.TimeBits, DatacenterBits: l.DatacenterBits, WorkerBits: l.WorkerBits,
		SequenceBits: l.SequenceBits, EpochMS: l.EpochMillis()}
}

// workersJSON is an inclusive range of worker IDs.
type workersJSON struct {
	Min *int64 `json:"min"`
	Max *int64 `json:"max"`
}

// acquireRequest is the body of POST /v1/leases.
type acquireRequest struct {
	Holder           string       `json:"holder"`
	Datacenter       int64        `json:"datacenter"`
	Workers          *workersJSON `json:"workers"`
	TTLMS            int64        `json:"ttl_ms"`
	CeilingMS        int64        `json:"ceiling_ms"`
	MaxPrevCeilingMS int64        `json:"max_prev_ceiling_ms"`
}

// acquireResponse is a granted lease: what a holder in any language needs.
type acquireResponse struct {
	Datacenter        int64      `json:"datacenter"`
	Worker            int64      `json:"worker"`
	FencingVersion    int64      `json:"fencing_version"`
	Holder            string     `json:"holder"`
	FloorMS           int64      `json:"floor_ms"`
	CeilingMS         int64      `json:"ceiling_ms"`
	PreviousHolder    *string    `json:"previous_holder"`
	TTLMS             int64      `json:"ttl_ms"`
	HeartbeatMS       int64      `json:"heartbeat_ms"`
	MarginMS          int64      `json:"margin_ms"`
	MaxClockOffsetMS  int64      `json:"max_clock_offset_ms"`
	MaxBackwardWaitMS int64      `json:"max_backward_wait_ms"`
	ExpiresAtMS       int64      `json:"expires_at_ms"`
	DBTimeMS          int64      `json:"db_time_ms"`
	Layout            layoutJSON `json:"layout"`
}

// heartbeatRequest is the body of POST /v1/leases/{dc}/{worker}/heartbeat.
type heartbeatRequest struct {
	Holder         string `json:"holder"`
	FencingVersion int64  `json:"fencing_version"`
	TTLMS          int64  `json:"ttl_ms"`
	CeilingMS      int64  `json:"ceiling_ms"`
}

// heartbeatResponse is an extended lease.
type heartbeatResponse struct {
	FencingVersion int64 `json:"fencing_version"`
	CeilingMS      int64 `json:"ceiling_ms"`
	ExpiresAtMS    int64 `json:"expires_at_ms"`
	DBTimeMS       int64 `json:"db_time_ms"`
}

// releaseRequest is the body of POST /v1/leases/{dc}/{worker}/release.
type releaseRequest struct {
	Holder          string `json:"holder"`
	FencingVersion  int64  `json:"fencing_version"`
	LastTimestampMS int64  `json:"last_timestamp_ms"`
}

// releaseResponse is the ceiling a release left behind.
type releaseResponse struct {
	CeilingMS int64 `json:"ceiling_ms"`
}

// leaseCall is what every lease call starts from: the caller, the request
// ID, and the holder qualified with the caller's name.
type leaseCall struct {
	owner     string
	requestID string
	holder    string // "<caller>/<holder>"
}

// beginLease checks that the lease API is on and the request has a
// caller.
func (s *Server) beginLease(c echo.Context) (leaseCall, error) {
	if s.leases.Store == nil {
		return leaseCall{}, &apiError{code: codeNotFound, detail: "the lease API is off on this node"}
	}
	caller, ok := callerOf(c)
	if !ok || caller.Name == "" {
		return leaseCall{}, &apiError{code: codeUnauthorized, detail: "the lease API needs a token with the leases scope"}
	}
	return leaseCall{owner: caller.Name, requestID: requestIDOf(c)}, nil
}

// qualify checks holder and sets lc.holder to "<caller>/<holder>".
func (lc *leaseCall) qualify(holder string) *apiError {
	if err := validLeaseHolder(holder); err != nil {
		return err
	}
	lc.holder = lc.owner + "/" + holder
	return nil
}

// validLeaseHolder checks a holder name: 1 to MaxLeaseHolderLen bytes of
// printable ASCII without spaces.
func validLeaseHolder(h string) *apiError {
	if h == "" || len(h) > MaxLeaseHolderLen {
		return invalidf("holder must have 1 to %d bytes", MaxLeaseHolderLen)
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x21 || h[i] > 0x7e {
			return invalidf("holder must be printable ASCII without spaces")
		}
	}
	return nil
}

// ttlOf returns the ttl a request asks for: the default for 0, else
// ttlMS within the configured bounds.
func (s *Server) ttlOf(ttlMS int64) (time.Duration, *apiError) {
	if ttlMS == 0 {
		return s.leases.DefaultTTL, nil
	}
	lo, hi := s.leases.MinTTL.Milliseconds(), s.leases.MaxTTL.Milliseconds()
	if ttlMS < lo || ttlMS > hi {
		return 0, invalidf("ttl_ms %d out of bounds: want %d to %d (or 0 for the default %d)", ttlMS, lo, hi, s.leases.DefaultTTL.Milliseconds())
	}
	return time.Duration(ttlMS) * time.Millisecond, nil
}

// ceilingOf returns the ceiling and clock offset to pass to the store for a
// proposal: the proposal bounded by store time + ttl + the broker's allowed
// offset, or, for no proposal (0), store time + ttl exactly.
func (s *Server) ceilingOf(proposalMS int64) (int64, time.Duration, *apiError) {
	switch {
	case proposalMS < 0:
		return 0, 0, invalidf("ceiling_ms %d is negative", proposalMS)
	case proposalMS == 0:
		return math.MaxInt64, 0, nil
	}
	return proposalMS, s.leases.MaxClockOffset, nil
}

// handleLeaseLayout serves GET /v1/leases/layout: the Snowflake layout
// of the cluster, which the node checked against the one its database
// records when it started.
func (s *Server) handleLeaseLayout(c echo.Context) error {
	if _, err := s.beginLease(c); err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, s.layoutJSON())
}

// handleLeaseAcquire serves POST /v1/leases: a claim of one worker ID of
// the pool for "<caller>/<holder>".
func (s *Server) handleLeaseAcquire(c echo.Context) error {
	lc, err := s.beginLease(c)
	if err != nil {
		return err
	}
	var req acquireRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := lc.qualify(req.Holder); err != nil {
		return err
	}
	l := s.layout
	if req.Datacenter < 0 || req.Datacenter > l.MaxDatacenter() {
		return invalidf("datacenter %d outside the layout: want 0 to %d", req.Datacenter, l.MaxDatacenter())
	}
	pool := allocator.WorkerRange{Min: 0, Max: l.MaxWorker()}
	if w := req.Workers; w != nil {
		if w.Min == nil || w.Max == nil {
			return invalidf("workers needs both min and max")
		}
		pool = allocator.WorkerRange{Min: *w.Min, Max: *w.Max}
	}
	switch {
	case pool.Min < 0 || pool.Max > l.MaxWorker() || pool.Min > pool.Max:
		return invalidf("workers %d-%d outside the layout: want 0 <= min <= max <= %d", pool.Min, pool.Max, l.MaxWorker())
	case pool.Max-pool.Min >= allocator.MaxPoolSize:
		return invalidf("workers %d-%d: %d worker IDs, want at most %d", pool.Min, pool.Max, pool.Max-pool.Min+1, allocator.MaxPoolSize)
	}
	ttl, aerr := s.ttlOf(req.TTLMS)
	if aerr != nil {
		return aerr
	}
	ceiling, offset, aerr := s.ceilingOf(req.CeilingMS)
	if aerr != nil {
		return aerr
	}
	if req.MaxPrevCeilingMS < 0 {
		return invalidf("max_prev_ceiling_ms %d is negative", req.MaxPrevCeilingMS)
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	res, err := s.leases.Store.Claim(ctx, allocator.ClaimRequest{
		DatacenterID: req.Datacenter, MinWorkerID: pool.Min, MaxWorkerID: pool.Max,
		Holder: lc.holder, TTL: ttl, CeilingMS: ceiling, MaxClockOffset: offset,
		MaxPrevCeilingMS: req.MaxPrevCeilingMS, Owner: lc.owner, RequestID: lc.requestID,
	})
	if err != nil {
		if errors.Is(err, allocator.ErrNoWorkerAvailable) {
			return &apiError{code: codeNoWorker, retryAfter: noWorkerRetryAfter, err: err,
				detail: fmt.Sprintf("every worker ID of datacenter %d, %d-%d, is held (or its previous ceiling lies above max_prev_ceiling_ms); one frees when its lease expires or is released",
					req.Datacenter, pool.Min, pool.Max)}
		}
		return storeError(err)
	}
	lease := res.Lease
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "lease granted through the lease API",
		slog.String("holder", lc.holder), slog.Int64("datacenter", lease.DatacenterID), slog.Int64("worker", lease.WorkerID),
		slog.Int64("fencing_version", lease.FencingVersion), slog.Int64("ceiling_ms", lease.CeilingMS),
		slog.String("previous_holder", res.PrevHolder))
	out := acquireResponse{
		Datacenter:        lease.DatacenterID,
		Worker:            lease.WorkerID,
		FencingVersion:    lease.FencingVersion,
		Holder:            lease.Holder,
		FloorMS:           res.PrevCeilingMS + 1,
		CeilingMS:         lease.CeilingMS,
		TTLMS:             ttl.Milliseconds(),
		HeartbeatMS:       (ttl / 3).Milliseconds(),
		MarginMS:          (ttl / 10).Milliseconds(),
		MaxClockOffsetMS:  s.leases.MaxClockOffset.Milliseconds(),
		MaxBackwardWaitMS: s.leases.MaxBackwardWait.Milliseconds(),
		ExpiresAtMS:       lease.ExpiresAt.UnixMilli(),
		DBTimeMS:          res.DBNow.UnixMilli(),
		Layout:            s.layoutJSON(),
	}
	if res.PrevHolder != "" {
		prev := res.PrevHolder
		out.PreviousHolder = &prev
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/leases/%d/%d", lease.DatacenterID, lease.WorkerID))
	return s.sendJSON(c, http.StatusCreated, out)
}

// handleLeaseHeartbeat serves POST /v1/leases/{dc}/{worker}/heartbeat:
// the lease extended, fenced on the qualified holder and the version. A
// heartbeat that matches no row is a lost lease: the broker records the
// lost event, as a node's keeper does, and answers lease_lost.
func (s *Server) handleLeaseHeartbeat(c echo.Context) error {
	lc, err := s.beginLease(c)
	if err != nil {
		return err
	}
	key, aerr := s.leaseKeyParams(c)
	if aerr != nil {
		return aerr
	}
	var req heartbeatRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := lc.qualify(req.Holder); err != nil {
		return err
	}
	if req.FencingVersion < 1 {
		return invalidf("fencing_version must be the positive version the acquire returned")
	}
	ttl, aerr := s.ttlOf(req.TTLMS)
	if aerr != nil {
		return aerr
	}
	ceiling, offset, aerr := s.ceilingOf(req.CeilingMS)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	lease, dbNow, err := s.leases.Store.Heartbeat(ctx, allocator.HeartbeatRequest{
		Key: key, Holder: lc.holder, FencingVersion: req.FencingVersion, TTL: ttl,
		CeilingMS: ceiling, MaxClockOffset: offset, Owner: lc.owner, RequestID: lc.requestID,
	})
	if errors.Is(err, allocator.ErrLeaseLost) {
		s.recordLost(c, key, lc, req.FencingVersion)
		return lostError(key, lc, req.FencingVersion, err)
	}
	if err != nil {
		return storeError(err)
	}
	return s.sendJSON(c, http.StatusOK, heartbeatResponse{
		FencingVersion: lease.FencingVersion,
		CeilingMS:      lease.CeilingMS,
		ExpiresAtMS:    lease.ExpiresAt.UnixMilli(),
		DBTimeMS:       dbNow.UnixMilli(),
	})
}

// recordLost records the lost event of a heartbeat that matched no row,
// with the caller and the request ID; a failure to record it is logged.
func (s *Server) recordLost(c echo.Context, key allocator.LeaseKey, lc leaseCall, version int64) {
	// Recorded even if the caller goes away meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), storeTimeout)
	defer cancel()
	attrs := []slog.Attr{slog.String("holder", lc.holder), slog.Int64("datacenter", key.DatacenterID), slog.Int64("worker", key.WorkerID), slog.Int64("fencing_version", version)}
	err := s.leases.Store.RecordLeaseEvent(ctx, allocator.LeaseEvent{
		LeaseKey: key, Holder: lc.holder, FencingVersion: version, Kind: allocator.EventLost,
		Detail: "heartbeat through the lease API matched no row", Owner: lc.owner, RequestID: lc.requestID,
	})
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "could not record a lost lease", append(attrs, slog.Any("err", err))...)
		return
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "lease lost: a heartbeat through the lease API matched no row", attrs...)
}

// lostError is the lease_lost answer: the detail names the lease the
// caller thought it held, and nothing of whoever holds it now.
func lostError(key allocator.LeaseKey, lc leaseCall, version int64, err error) *apiError {
	return &apiError{code: codeLeaseLost, err: err, detail: fmt.Sprintf(
		"worker %d/%d is not held by %s at fencing version %d (taken over, evicted, released or expired): stop issuing and acquire afresh",
		key.DatacenterID, key.WorkerID, lc.holder, version)}
}

// handleLeaseRelease serves POST /v1/leases/{dc}/{worker}/release: the
// lease given back, its ceiling lowered to the last timestamp used (see
// allocator.ReleaseCeiling); a last timestamp outside the lease's floor and
// ceiling is refused with invalid_release and changes nothing.
func (s *Server) handleLeaseRelease(c echo.Context) error {
	lc, err := s.beginLease(c)
	if err != nil {
		return err
	}
	key, aerr := s.leaseKeyParams(c)
	if aerr != nil {
		return aerr
	}
	var req releaseRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := lc.qualify(req.Holder); err != nil {
		return err
	}
	switch {
	case req.FencingVersion < 1:
		return invalidf("fencing_version must be the positive version the acquire returned")
	case req.LastTimestampMS < 0:
		return invalidf("last_timestamp_ms %d is negative; 0 means no ID was issued", req.LastTimestampMS)
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	ceiling, err := s.leases.Store.Release(ctx, allocator.ReleaseRequest{
		Key: key, Holder: lc.holder, FencingVersion: req.FencingVersion, LastTimestampMS: req.LastTimestampMS,
		Owner: lc.owner, RequestID: lc.requestID,
	})
	switch {
	case errors.Is(err, allocator.ErrLeaseLost):
		return lostError(key, lc, req.FencingVersion, err)
	case errors.Is(err, allocator.ErrInvalidRelease):
		// The refusal and its figures, without the store's prefix.
		detail := err.Error()
		if i := strings.Index(detail, allocator.ErrInvalidRelease.Error()); i >= 0 {
			detail = detail[i:]
		}
		return &apiError{code: codeInvalidRelease, err: err, detail: detail + "; the lease is unchanged"}
	case err != nil:
		return storeError(err)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "lease released through the lease API",
		slog.String("holder", lc.holder), slog.Int64("datacenter", key.DatacenterID), slog.Int64("worker", key.WorkerID),
		slog.Int64("fencing_version", req.FencingVersion), slog.Int64("ceiling_ms", ceiling))
	return s.sendJSON(c, http.StatusOK, releaseResponse{CeilingMS: ceiling})
}
