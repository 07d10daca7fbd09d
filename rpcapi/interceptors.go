package rpcapi

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// callInfo is what the gate puts in an idgen call's context.
type callInfo struct {
	caller idgen.Caller
	call   *call
}

type callInfoKey struct{}

func callInfoOf(ctx context.Context) callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	return ci
}

// scopeOf returns a procedure's scope; false outside idgen's services
// (health, reflection: open).
func scopeOf(procedure string) (idgen.Scopes, bool) {
	switch {
	case strings.HasPrefix(procedure, "/"+idgenv1connect.IdServiceName+"/"):
		return idgen.ScopeIDs, true
	case strings.HasPrefix(procedure, "/"+idgenv1connect.LeaseServiceName+"/"):
		return idgen.ScopeLeases, true
	case strings.HasPrefix(procedure, "/"+idgenv1connect.SequenceServiceName+"/"):
		return sequenceScope(procedure), true
	}
	return 0, false
}

// lifecycle counts idgen's calls under way for Wait and refuses new ones
// after Drain.
func (s *Server) lifecycle() connect.Interceptor { return lifecycle{s: s} }

type lifecycle struct {
	serverOnly
	s *Server
}

// serverOnly is the WrapStreamingClient of a server's interceptor.
type serverOnly struct{}

func (serverOnly) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l lifecycle) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !l.s.begin() {
			return nil, errShuttingDown()
		}
		defer l.s.end()
		return next(ctx, req)
	}
}

func (l lifecycle) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !l.s.begin() {
			return errShuttingDown()
		}
		defer l.s.end()
		return next(ctx, conn)
	}
}
