package rpcapi

import (
	"context"

	"connectrpc.com/grpchealth"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// healthChecker answers the health service: IdService (and "") while the
// lease is provable, as /readyz; LeaseService while the lease API is on;
// everything NOT_SERVING after Drain.
type healthChecker struct{ s *Server }

func (h healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	serving, err := h.serving(req.Service)
	if err != nil {
		return nil, err
	}
	if !serving {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// serving is service's status; unknown services are NOT_FOUND.
func (h healthChecker) serving(service string) (bool, error) {
	s := h.s
	serving := !s.draining()
	switch service {
	case "", idgenv1connect.IdServiceName:
		return serving && (s.ready == nil || s.ready.Ready() == nil), nil
	case idgenv1connect.LeaseServiceName:
		return serving && s.leaseAPIOn(), nil
	}
	return false, connectError(idgen.Errorf(idgen.NotFound, "unknown service %q", service))
}

// leaseAPIOn reports whether LeaseService has a broker and a token of the
// leases scope exists.
func (s *Server) leaseAPIOn() bool {
	return s.leases != nil && s.auth.On(idgen.ScopeLeases)
}
