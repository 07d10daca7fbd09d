package rpcapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// leaseService implements idgenv1connect.LeaseServiceHandler over the
// broker, as the HTTP lease API does.
type leaseService struct{ s *Server }

// caller returns the caller of a call, or NOT_FOUND when the lease API is
// off.
func (l leaseService) caller(ctx context.Context) (idgen.Caller, error) {
	if l.s.leases == nil {
		return idgen.Caller{}, connectError(&idgen.Error{Code: idgen.NotFound, Detail: "the lease API is off on this node"})
	}
	return callInfoOf(ctx).caller, nil
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
	ar := idgen.AcquireRequest{
		Holder: m.GetHolder(), Datacenter: int64(m.GetDatacenter()), TTLMS: m.GetTtlMs(),
		CeilingMS: m.GetCeilingMs(), MaxPrevCeilingMS: m.GetMaxPrevCeilingMs(),
	}
	if w := m.GetWorkers(); w != nil {
		ar.Workers = &allocator.WorkerRange{Min: int64(w.GetMin()), Max: int64(w.GetMax())}
	}
	g, err := l.s.leases.Acquire(ctx, caller, ar)
	if err != nil {
		return nil, l.s.errorOf(ctx, err, "")
	}
	lease := g.Lease
	return connect.NewResponse(&idgenv1.AcquireLeaseResponse{
		Datacenter:        int32(lease.DatacenterID),
		Worker:            int32(lease.WorkerID),
		FencingVersion:    lease.FencingVersion,
		Holder:            lease.Holder,
		LeaseSecret:       g.Secret,
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

// leaseCall starts a heartbeat or release: its caller and the lease's key.
func (l leaseService) leaseCall(ctx context.Context, datacenter, worker int32) (idgen.Caller, allocator.LeaseKey, error) {
	caller, err := l.caller(ctx)
	if err != nil {
		return caller, allocator.LeaseKey{}, err
	}
	key, err := l.s.leases.Key(int64(datacenter), int64(worker))
	if err != nil {
		return caller, key, l.s.errorOf(ctx, err, "")
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
	ext, err := l.s.leases.Heartbeat(ctx, caller, idgen.HeartbeatRequest{
		Key: key, Holder: m.GetHolder(), FencingVersion: m.GetFencingVersion(), Secret: m.GetLeaseSecret(),
		TTLMS: m.GetTtlMs(), CeilingMS: m.GetCeilingMs(), Issued: issuedOf(m.GetIssued()),
	})
	if err != nil {
		return nil, l.s.errorOf(ctx, err, "")
	}
	return connect.NewResponse(&idgenv1.HeartbeatLeaseResponse{
		FencingVersion: ext.Lease.FencingVersion,
		CeilingMs:      ext.Lease.CeilingMS,
		ExpiresAtMs:    ext.Lease.ExpiresAt.UnixMilli(),
		DbTimeMs:       ext.DBTime.UnixMilli(),
		TtlMs:          ext.TTL.Milliseconds(),
	}), nil
}

// ReleaseLease serves LeaseService.ReleaseLease.
func (l leaseService) ReleaseLease(ctx context.Context, req *connect.Request[idgenv1.ReleaseLeaseRequest]) (*connect.Response[idgenv1.ReleaseLeaseResponse], error) {
	m := req.Msg
	caller, key, err := l.leaseCall(ctx, m.GetDatacenter(), m.GetWorker())
	if err != nil {
		return nil, err
	}
	ceiling, err := l.s.leases.Release(ctx, caller, idgen.ReleaseRequest{
		Key: key, Holder: m.GetHolder(), FencingVersion: m.GetFencingVersion(), Secret: m.GetLeaseSecret(),
		LastTimestampMS: m.GetLastTimestampMs(), NoneIssued: m.GetNoneIssued(), Issued: issuedOf(m.GetIssued()),
	})
	if err != nil {
		return nil, l.s.errorOf(ctx, err, "")
	}
	return connect.NewResponse(&idgenv1.ReleaseLeaseResponse{CeilingMs: ceiling}), nil
}

// issuedOf returns the block a holder reported, the zero one when none.
func issuedOf(b *idgenv1.IssuedBlock) allocator.Block {
	return allocator.Block{Count: b.GetCount(), FromMS: b.GetFromMs(), ToMS: b.GetToMs()}
}
