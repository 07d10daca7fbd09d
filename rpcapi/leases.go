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

// GetLayout serves LeaseService.GetLayout over connect.
func (l leaseService) GetLayout(ctx context.Context, req *connect.Request[idgenv1.GetLayoutRequest]) (*connect.Response[idgenv1.GetLayoutResponse], error) {
	return response(l.getLayout(ctx, req.Msg))
}

// getLayout is LeaseService.GetLayout, for connect and grpc-go alike.
func (l leaseService) getLayout(ctx context.Context, _ *idgenv1.GetLayoutRequest) (*idgenv1.GetLayoutResponse, error) {
	if _, err := l.caller(ctx); err != nil {
		return nil, err
	}
	return &idgenv1.GetLayoutResponse{Layout: l.layout()}, nil
}

// AcquireLease serves LeaseService.AcquireLease over connect.
func (l leaseService) AcquireLease(ctx context.Context, req *connect.Request[idgenv1.AcquireLeaseRequest]) (*connect.Response[idgenv1.AcquireLeaseResponse], error) {
	return response(l.acquireLease(ctx, req.Msg))
}

// acquireLease is LeaseService.AcquireLease, for connect and grpc-go alike.
func (l leaseService) acquireLease(ctx context.Context, m *idgenv1.AcquireLeaseRequest) (*idgenv1.AcquireLeaseResponse, error) {
	caller, err := l.caller(ctx)
	if err != nil {
		return nil, err
	}
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
	return &idgenv1.AcquireLeaseResponse{
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
	}, nil
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

// HeartbeatLease serves LeaseService.HeartbeatLease over connect.
func (l leaseService) HeartbeatLease(ctx context.Context, req *connect.Request[idgenv1.HeartbeatLeaseRequest]) (*connect.Response[idgenv1.HeartbeatLeaseResponse], error) {
	return response(l.heartbeatLease(ctx, req.Msg))
}

// heartbeatLease is LeaseService.HeartbeatLease, for connect and grpc-go alike.
func (l leaseService) heartbeatLease(ctx context.Context, m *idgenv1.HeartbeatLeaseRequest) (*idgenv1.HeartbeatLeaseResponse, error) {
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
	return &idgenv1.HeartbeatLeaseResponse{
		FencingVersion: ext.Lease.FencingVersion,
		CeilingMs:      ext.Lease.CeilingMS,
		ExpiresAtMs:    ext.Lease.ExpiresAt.UnixMilli(),
		DbTimeMs:       ext.DBTime.UnixMilli(),
		TtlMs:          ext.TTL.Milliseconds(),
	}, nil
}

// ReleaseLease serves LeaseService.ReleaseLease over connect.
func (l leaseService) ReleaseLease(ctx context.Context, req *connect.Request[idgenv1.ReleaseLeaseRequest]) (*connect.Response[idgenv1.ReleaseLeaseResponse], error) {
	return response(l.releaseLease(ctx, req.Msg))
}

// releaseLease is LeaseService.ReleaseLease, for connect and grpc-go alike.
func (l leaseService) releaseLease(ctx context.Context, m *idgenv1.ReleaseLeaseRequest) (*idgenv1.ReleaseLeaseResponse, error) {
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
	return &idgenv1.ReleaseLeaseResponse{CeilingMs: ceiling}, nil
}

// issuedOf returns the block a holder reported, the zero one when none.
func issuedOf(b *idgenv1.IssuedBlock) allocator.Block {
	return allocator.Block{Count: b.GetCount(), FromMS: b.GetFromMs(), ToMS: b.GetToMs()}
}
