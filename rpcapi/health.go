package rpcapi

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/grpchealth"

	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/problem"
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
		return nil, problem.ConnectError(problem.NotFound, fmt.Sprintf("unknown service %q", req.Service), 0)
	}
	if serving {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
}

// leaseAPIOn reports whether LeaseService would serve a caller with the
// right token: it has a broker, and a token has the leases scope (the
// check of a call without a token then refuses it as unauthorized, not as
// not_found).
func (s *Server) leaseAPIOn() bool {
	if s.leases == nil || !s.leases.On() || s.auth == nil {
		return false
	}
	_, err := s.auth.Authorize(nil, httpapi.ScopeLeases)
	var ae *httpapi.AuthError
	return !errors.As(err, &ae) || ae.Code != problem.NotFound
}
