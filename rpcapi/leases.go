package rpcapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/leaseapi"
	"github.com/idgen-project/idgen/internal/problem"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// leaseService implements idgenv1connect.LeaseServiceHandler over the
// lease API's broker: the same checks, bounds and store calls as the HTTP
// lease API, with the caller's token name as the owner.
type leaseService struct{ s *Server }

// caller returns the broker's caller of a call, or the NOT_FOUND of a
// lease API that is off.
func (l leaseService) caller(ctx context.Context) (leaseapi.Caller, error) {
	if l.s.leases == nil || !l.s.leases.On() {
		return leaseapi.Caller{}, problem.ConnectError(problem.NotFound, "the lease API is off on this node", 0)
	}
	ci := callInfoOf(ctx)
	return leaseapi.Caller{Name: ci.caller.Name, RequestID: ci.requestID}, nil
}

// leaseError turns a refusal of the broker into the call's error.
func (s *Server) leaseError(ctx context.Context, err error) error {
	var le *leaseapi.Error
	if errors.As(err, &le) {
		if le.Code == problem.Internal {
			return s.internal(ctx, "lease", err)
		}
		return problem.ConnectError(le.Code, le.Detail, le.RetryAfter)
	}
	return s.domainError(ctx, err)
}

func (l leaseService) layout() *idgenv1.Layout {
	lay := l.s.layout
	return &idgenv1.Layout{
		TimeBits:       int32(lay.TimeBits),
		DatacenterBits: int32(lay.DatacenterBits),
		WorkerBits:     int32(lay.WorkerBits),
		SequenceBits:   int32(lay.SequenceBits),
		EpochMs:        lay.EpochMillis(),
	}
}

// GetLayout serves LeaseService.GetLayout.
func (l leaseService) GetLayout(ctx context.Context, _ *connect.Request[idgenv1.GetLayoutRequest]) (*connect.Response[idgenv1.GetLayoutResponse], error) {
	if _, err := l.caller(ctx); err != nil {
		return nil, err
	}
	return connect.NewResponse(&idgenv1.GetLayoutResponse{Layout: l.layout()}), nil
}

// AcquireLease serves LeaseService.AcquireLease.
func (l leaseService) AcquireLease(ctx context.Context, req *connect.Request[idgenv1.AcquireLeaseRequest]) (*connect.Response[idgenv1.AcquireLeaseResponse], error) {
	caller, err := l.caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	ar := leaseapi.AcquireRequest{
		Holder: m.GetHolder(), Datacenter: int64(m.GetDatacenter()), TTLMS: m.GetTtlMs(),
		CeilingMS: m.GetCeilingMs(), MaxPrevCeilingMS: m.GetMaxPrevCeilingMs(),
	}
	if w := m.GetWorkers(); w != nil {
		ar.Workers = &leaseapi.Pool{Min: int64(w.GetMin()), Max: int64(w.GetMax())}
	}
	g, err := l.s.leases.Acquire(ctx, caller, ar)
	if err != nil {
		return nil, l.s.leaseError(ctx, err)
	}
	lease := g.Lease
	return connect.NewResponse(&idgenv1.AcquireLeaseResponse{
		Datacenter:        int32(lease.DatacenterID),
		Worker:            int32(lease.WorkerID),
		FencingVersion:    lease.FencingVersion,
		Holder:            lease.Holder,
		FloorMs:           g.FloorMS,
		CeilingMs:         lease.CeilingMS,
		PreviousHolder:    g.PrevHolder,
		TtlMs:             g.TTL.Milliseconds(),
		HeartbeatMs:       g.Heartbeat.Milliseconds(),
		MarginMs:          g.Margin.Milliseconds(),
		MaxClockOffsetMs:  g.MaxClockOffset.Milliseconds(),
		MaxBackwardWaitMs: g.MaxBackwardWait.Milliseconds(),
		ExpiresAtMs:       lease.ExpiresAt.UnixMilli(),
		DbTimeMs:          g.DBTime.UnixMilli(),
		Layout:            l.layout(),
	}), nil
}

// leaseCall starts a call on one lease, heartbeat or release: its caller
// (see caller) and the lease's key, checked against the layout.
func (l leaseService) leaseCall(ctx context.Context, datacenter, worker int32) (leaseapi.Caller, allocator.LeaseKey, error) {
	caller, err := l.caller(ctx)
	if err != nil {
		return caller, allocator.LeaseKey{}, err
	}
	key, err := l.s.leases.Key(int64(datacenter), int64(worker))
	if err != nil {
		return caller, key, l.s.leaseError(ctx, err)
	}
	return caller, key, nil
}

// HeartbeatLease serves LeaseService.HeartbeatLease.
func (l leaseService) HeartbeatLease(ctx context.Context, req *connect.Request[idgenv1.HeartbeatLeaseRequest]) (*connect.Response[idgenv1.HeartbeatLeaseResponse], error) {
	m := req.Msg
	caller, key, err := l.leaseCall(ctx, m.GetDatacenter(), m.GetWorker())
	if err != nil {
		return nil, err
	}
	ext, err := l.s.leases.Heartbeat(ctx, caller, leaseapi.HeartbeatRequest{
		Key: key, Holder: m.GetHolder(), FencingVersion: m.GetFencingVersion(), TTLMS: m.GetTtlMs(), CeilingMS: m.GetCeilingMs(),
	})
	if err != nil {
		return nil, l.s.leaseError(ctx, err)
	}
	return connect.NewResponse(&idgenv1.HeartbeatLeaseResponse{
		FencingVersion: ext.Lease.FencingVersion,
		CeilingMs:      ext.Lease.CeilingMS,
		ExpiresAtMs:    ext.Lease.ExpiresAt.UnixMilli(),
		DbTimeMs:       ext.DBTime.UnixMilli(),
	}), nil
}

// ReleaseLease serves LeaseService.ReleaseLease.
func (l leaseService) ReleaseLease(ctx context.Context, req *connect.Request[idgenv1.ReleaseLeaseRequest]) (*connect.Response[idgenv1.ReleaseLeaseResponse], error) {
	m := req.Msg
	caller, key, err := l.leaseCall(ctx, m.GetDatacenter(), m.GetWorker())
	if err != nil {
		return nil, err
	}
	ceiling, err := l.s.leases.Release(ctx, caller, leaseapi.ReleaseRequest{
		Key: key, Holder: m.GetHolder(), FencingVersion: m.GetFencingVersion(), LastTimestampMS: m.GetLastTimestampMs(),
	})
	if err != nil {
		return nil, l.s.leaseError(ctx, err)
	}
	return connect.NewResponse(&idgenv1.ReleaseLeaseResponse{CeilingMs: ceiling}), nil
}
