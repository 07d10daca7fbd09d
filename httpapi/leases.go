package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
)

// addLeaseRoutes registers the lease API (docs/leases.md, the leases
// scope) over the core's idgen.Broker.
func (s *Server) addLeaseRoutes(e *echo.Echo) {
	g := e.Group("/v1/leases", s.requireScope(idgen.ScopeLeases))
	s.add(g.GET, "/layout", s.handleLeaseLayout)
	s.add(g.POST, "", s.handleLeaseAcquire)
	s.add(g.POST, "/:datacenter/:worker/heartbeat", s.handleLeaseHeartbeat)
	s.add(g.POST, "/:datacenter/:worker/release", s.handleLeaseRelease)
}

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
	LeaseSecret    string `json:"lease_secret"`
	TTLMS          int64  `json:"ttl_ms"`
	CeilingMS      int64  `json:"ceiling_ms"`
	Issued         issued `json:"issued"`
}

// issued is the block of IDs a holder may report with a heartbeat or a
// release (allocator.Block), for the audit trail.
type issued struct {
	Count  int64 `json:"count"`
	FromMS int64 `json:"from_ms"`
	ToMS   int64 `json:"to_ms"`
}

func (b issued) block() allocator.Block {
	return allocator.Block{Count: b.Count, FromMS: b.FromMS, ToMS: b.ToMS}
}

// releaseRequest is the body of POST /v1/leases/{dc}/{worker}/release.
type releaseRequest struct {
	Holder          string `json:"holder"`
	FencingVersion  int64  `json:"fencing_version"`
	LeaseSecret     string `json:"lease_secret"`
	LastTimestampMS int64  `json:"last_timestamp_ms"`
	NoneIssued      bool   `json:"none_issued"`
	Issued          issued `json:"issued"`
}

// leaseCall returns the caller requireScope checked; 404 when the lease API
// is off.
func (s *Server) leaseCall(c echo.Context) (idgen.Caller, error) {
	if s.leases == nil {
		return idgen.Caller{}, &idgen.Error{Code: idgen.NotFound, Detail: "the lease API is off on this node"}
	}
	return callerOf(c), nil
}

// handleLeaseLayout serves GET /v1/leases/layout.
func (s *Server) handleLeaseLayout(c echo.Context) error {
	if _, err := s.leaseCall(c); err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, leaseLayoutOf(s.layout))
}

// handleLeaseAcquire serves POST /v1/leases: a claim for "<caller>/<holder>".
func (s *Server) handleLeaseAcquire(c echo.Context) error {
	caller, err := s.leaseCall(c)
	if err != nil {
		return err
	}
	var req acquireRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ar := idgen.AcquireRequest{Holder: req.Holder, Datacenter: req.Datacenter, TTLMS: req.TTLMS,
		CeilingMS: req.CeilingMS, MaxPrevCeilingMS: req.MaxPrevCeilingMS}
	if w := req.Workers; w != nil {
		if w.Min == nil || w.Max == nil {
			return invalidf("workers needs both min and max")
		}
		ar.Workers = &allocator.WorkerRange{Min: *w.Min, Max: *w.Max}
	}
	g, err := s.leases.Acquire(c.Request().Context(), caller, ar)
	if err != nil {
		return err
	}
	lease := g.Lease
	out := LeaseGrant{Datacenter: lease.DatacenterID, Worker: lease.WorkerID, FencingVersion: lease.FencingVersion,
		Holder: lease.Holder, LeaseSecret: g.Secret, FloorMS: g.FloorMS, CeilingMS: lease.CeilingMS,
		TTLMS: g.TTL.Milliseconds(), HeartbeatMS: g.Heartbeat.Milliseconds(), MarginMS: g.Margin.Milliseconds(),
		MaxClockOffsetMS: g.MaxClockOffset.Milliseconds(), MaxBackwardWaitMS: g.MaxBackwardWait.Milliseconds(),
		ExpiresAtMS: lease.ExpiresAt.UnixMilli(), DBTimeMS: g.DBTime.UnixMilli(), Layout: leaseLayoutOf(s.layout),
		PreviousHolder: stringPtr(g.PrevHolder)}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/leases/%d/%d", lease.DatacenterID, lease.WorkerID))
	return s.sendJSON(c, http.StatusCreated, out)
}

// beginLeaseCall starts a heartbeat or release: the caller, the lease's
// key from the path, and the body decoded into req.
func (s *Server) beginLeaseCall(c echo.Context, req any) (idgen.Caller, allocator.LeaseKey, error) {
	caller, err := s.leaseCall(c)
	if err != nil {
		return caller, allocator.LeaseKey{}, err
	}
	key, err := s.leaseKeyParams(c)
	if err != nil {
		return caller, key, err
	}
	return caller, key, decodeBody(c, req)
}

// handleLeaseHeartbeat serves POST /v1/leases/{dc}/{worker}/heartbeat
// (idgen.Broker.Heartbeat).
func (s *Server) handleLeaseHeartbeat(c echo.Context) error {
	var req heartbeatRequest
	caller, key, err := s.beginLeaseCall(c, &req)
	if err != nil {
		return err
	}
	ext, err := s.leases.Heartbeat(c.Request().Context(), caller, idgen.HeartbeatRequest{
		Key: key, Holder: req.Holder, FencingVersion: req.FencingVersion, Secret: req.LeaseSecret, TTLMS: req.TTLMS, CeilingMS: req.CeilingMS,
		Issued: req.Issued.block(),
	})
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, LeaseExtension{FencingVersion: ext.Lease.FencingVersion, CeilingMS: ext.Lease.CeilingMS,
		TTLMS: ext.TTL.Milliseconds(), ExpiresAtMS: ext.Lease.ExpiresAt.UnixMilli(), DBTimeMS: ext.DBTime.UnixMilli()})
}

// handleLeaseRelease serves POST /v1/leases/{dc}/{worker}/release
// (idgen.Broker.Release).
func (s *Server) handleLeaseRelease(c echo.Context) error {
	var req releaseRequest
	caller, key, err := s.beginLeaseCall(c, &req)
	if err != nil {
		return err
	}
	ceiling, err := s.leases.Release(c.Request().Context(), caller, idgen.ReleaseRequest{
		Key: key, Holder: req.Holder, FencingVersion: req.FencingVersion, Secret: req.LeaseSecret,
		LastTimestampMS: req.LastTimestampMS, NoneIssued: req.NoneIssued, Issued: req.Issued.block(),
	})
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, LeaseReleased{CeilingMS: ceiling})
}
