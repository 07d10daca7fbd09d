package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/leaseapi"
	"github.com/idgen-project/idgen/internal/leaseapi/leasejson"
)

// The lease API under /v1/leases lets any process hold a worker-ID lease
// and make Snowflake IDs in its own memory (docs/leases.md). Its rules —
// the holder qualified with the caller's name, the ttl within the
// configured bounds, the pool within the layout, every ceiling within store
// time + ttl + the broker's own allowed clock offset — live in
// internal/leaseapi, which the gRPC LeaseService calls too; the handlers
// here decode JSON, call the broker and encode its answer.

// MaxLeaseHolderLen is the longest holder name a lease API caller may
// give, in bytes: the broker stores "<token name>/<holder>", and token
// names have at most 64 bytes, so that every qualified holder fits
// allocator.MaxHolderLen.
const MaxLeaseHolderLen = leaseapi.MaxHolderLen

// LeaseBroker is what the lease API calls: the lease table's protocol, the
// calls a node's keeper makes. Every allocator.Store is one.
type LeaseBroker = leaseapi.Store

// LeaseAPIConfig configures the lease API. With a nil Store the routes
// answer 404: the lease API is off. See leaseapi.Config for its fields.
type LeaseAPIConfig = leaseapi.Config

// addLeaseRoutes registers the lease API, behind the leases scope.
func (s *Server) addLeaseRoutes(e *echo.Echo) {
	g := e.Group("/v1/leases", s.requireScope(ScopeLeases))
	s.add(g.GET, "/layout", s.handleLeaseLayout)
	s.add(g.POST, "", s.handleLeaseAcquire)
	s.add(g.POST, "/:datacenter/:worker/heartbeat", s.handleLeaseHeartbeat)
	s.add(g.POST, "/:datacenter/:worker/release", s.handleLeaseRelease)
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

// heartbeatRequest is the body of POST /v1/leases/{dc}/{worker}/heartbeat.
type heartbeatRequest struct {
	Holder         string `json:"holder"`
	FencingVersion int64  `json:"fencing_version"`
	TTLMS          int64  `json:"ttl_ms"`
	CeilingMS      int64  `json:"ceiling_ms"`
}

// releaseRequest is the body of POST /v1/leases/{dc}/{worker}/release.
type releaseRequest struct {
	Holder          string `json:"holder"`
	FencingVersion  int64  `json:"fencing_version"`
	LastTimestampMS int64  `json:"last_timestamp_ms"`
}

// leaseCaller returns the caller of a lease API request, as the broker
// records it.
func leaseCaller(c echo.Context) leaseapi.Caller {
	caller, _ := callerOf(c)
	return leaseapi.Caller{Name: caller.Name, RequestID: requestIDOf(c)}
}

// leaseError turns a refusal of the broker into the request's problem.
func leaseError(err error) error {
	var le *leaseapi.Error
	if errors.As(err, &le) {
		return &apiError{code: string(le.Code), detail: le.Detail, retryAfter: le.RetryAfter, err: le.Err}
	}
	return fromDomain(err)
}

// handleLeaseLayout serves GET /v1/leases/layout: the Snowflake layout
// of the cluster, which the node checked against the one its database
// records when it started.
func (s *Server) handleLeaseLayout(c echo.Context) error {
	if err := s.broker.Begin(leaseCaller(c)); err != nil {
		return leaseError(err)
	}
	return s.sendJSON(c, http.StatusOK, leasejson.LayoutOf(s.layout))
}

// handleLeaseAcquire serves POST /v1/leases: a claim of one worker ID of
// the pool for "<caller>/<holder>".
func (s *Server) handleLeaseAcquire(c echo.Context) error {
	caller := leaseCaller(c)
	if err := s.broker.Begin(caller); err != nil {
		return leaseError(err)
	}
	var req acquireRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ar := leaseapi.AcquireRequest{Holder: req.Holder, Datacenter: req.Datacenter, TTLMS: req.TTLMS,
		CeilingMS: req.CeilingMS, MaxPrevCeilingMS: req.MaxPrevCeilingMS}
	if w := req.Workers; w != nil {
		if w.Min == nil || w.Max == nil {
			return invalidf("workers needs both min and max")
		}
		ar.Workers = &leaseapi.Pool{Min: *w.Min, Max: *w.Max}
	}
	g, err := s.broker.Acquire(c.Request().Context(), caller, ar)
	if err != nil {
		return leaseError(err)
	}
	lease := g.Lease
	out := leasejson.Grant{
		Datacenter:        lease.DatacenterID,
		Worker:            lease.WorkerID,
		FencingVersion:    lease.FencingVersion,
		Holder:            lease.Holder,
		FloorMS:           g.FloorMS,
		CeilingMS:         lease.CeilingMS,
		TTLMS:             g.TTL.Milliseconds(),
		HeartbeatMS:       g.Heartbeat.Milliseconds(),
		MarginMS:          g.Margin.Milliseconds(),
		MaxClockOffsetMS:  g.MaxClockOffset.Milliseconds(),
		MaxBackwardWaitMS: g.MaxBackwardWait.Milliseconds(),
		ExpiresAtMS:       lease.ExpiresAt.UnixMilli(),
		DBTimeMS:          g.DBTime.UnixMilli(),
		Layout:            leasejson.LayoutOf(s.layout),
	}
	if g.PrevHolder != "" {
		prev := g.PrevHolder
		out.PreviousHolder = &prev
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/leases/%d/%d", lease.DatacenterID, lease.WorkerID))
	return s.sendJSON(c, http.StatusCreated, out)
}

// beginLeaseCall starts a request on one lease, heartbeat or release: it
// checks the caller (Broker.Begin), then the lease's :datacenter and
// :worker path parameters, and decodes the body into req. It returns the
// caller and the lease's key, or the request's problem.
func (s *Server) beginLeaseCall(c echo.Context, req any) (leaseapi.Caller, allocator.LeaseKey, error) {
	caller := leaseCaller(c)
	if err := s.broker.Begin(caller); err != nil {
		return caller, allocator.LeaseKey{}, leaseError(err)
	}
	key, err := s.leaseKeyParams(c)
	if err != nil {
		return caller, key, err
	}
	if err := decodeBody(c, req); err != nil {
		return caller, key, err
	}
	return caller, key, nil
}

// handleLeaseHeartbeat serves POST /v1/leases/{dc}/{worker}/heartbeat:
// the lease extended, fenced on the qualified holder and the version (see
// leaseapi.Broker.Heartbeat).
func (s *Server) handleLeaseHeartbeat(c echo.Context) error {
	var req heartbeatRequest
	caller, key, err := s.beginLeaseCall(c, &req)
	if err != nil {
		return err
	}
	ext, err := s.broker.Heartbeat(c.Request().Context(), caller, leaseapi.HeartbeatRequest{
		Key: key, Holder: req.Holder, FencingVersion: req.FencingVersion, TTLMS: req.TTLMS, CeilingMS: req.CeilingMS,
	})
	if err != nil {
		return leaseError(err)
	}
	return s.sendJSON(c, http.StatusOK, leasejson.Extension{
		FencingVersion: ext.Lease.FencingVersion,
		CeilingMS:      ext.Lease.CeilingMS,
		ExpiresAtMS:    ext.Lease.ExpiresAt.UnixMilli(),
		DBTimeMS:       ext.DBTime.UnixMilli(),
	})
}

// handleLeaseRelease serves POST /v1/leases/{dc}/{worker}/release: the
// lease given back, its ceiling lowered to the last timestamp used (see
// leaseapi.Broker.Release).
func (s *Server) handleLeaseRelease(c echo.Context) error {
	var req releaseRequest
	caller, key, err := s.beginLeaseCall(c, &req)
	if err != nil {
		return err
	}
	ceiling, err := s.broker.Release(c.Request().Context(), caller, leaseapi.ReleaseRequest{
		Key: key, Holder: req.Holder, FencingVersion: req.FencingVersion, LastTimestampMS: req.LastTimestampMS,
	})
	if err != nil {
		return leaseError(err)
	}
	return s.sendJSON(c, http.StatusOK, leasejson.Released{CeilingMS: ceiling})
}
