package rpcapi

import (
	"context"

	"connectrpc.com/grpchealth"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// healthChecker answers the standard health service: IdService (and the
// server as a whole, service "") serves while the node can prove its lease,
// as /readyz says; LeaseService serves while the lease API is on. Every
// service is NOT_SERVING once Drain was called.
type healthChecker struct{ s *Server }

func (h healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	s := h.s
	serving := !s.draining()
	switch req.Service {
	case "", idgenv1connect.IdServiceName:
		serving = serving && (s.ready == nil || s.ready.Ready() == nil)
	case idgenv1connect.LeaseServiceName:
		serving = serving && s.leaseAPIOn()
	default:
		return nil, connectError(idgen.Errorf(idgen.NotFound, "unknown service %q", req.Service))
	}
	if serving {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
}

// leaseAPIOn reports whether LeaseService has a broker and a token of the
// leases scope exists.
func (s *Server) leaseAPIOn() bool {
	return s.leases != nil && s.auth.On(idgen.ScopeLeases)
}
