package rpcapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/problem"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// callInfo is what the auth interceptor puts in a call's context: the
// caller (its name empty on an open service) and the request ID, which
// the lease table's audit trail records.
type callInfo struct {
	caller    httpapi.Caller
	requestID string
}

type callInfoKey struct{}

// callInfoOf returns the call's callInfo.
func callInfoOf(ctx context.Context) callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	return ci
}

// scopeOf returns the scope a procedure needs, and false for procedures
// outside idgen's services (health, reflection: open, as /healthz is).
func scopeOf(procedure string) (httpapi.Scopes, bool) {
	switch {
	case strings.HasPrefix(procedure, "/"+idgenv1connect.IdServiceName+"/"):
		return httpapi.ScopeIDs, true
	case strings.HasPrefix(procedure, "/"+idgenv1connect.LeaseServiceName+"/"):
		return httpapi.ScopeLeases, true
	}
	return 0, false
}

// authInterceptor checks each call's token for the scope of its service
// and puts the caller and a request ID in its context.
type authInterceptor struct{ s *Server }

// authorize runs the check for one call and returns the context the call
// continues with.
func (a authInterceptor) authorize(ctx context.Context, procedure, peerAddr string, reqHeader, respHeader http.Header) (context.Context, error) {
	scope, ok := scopeOf(procedure)
	if !ok {
		return ctx, nil
	}
	id := requestID(reqHeader)
	respHeader.Set(httpapi.HeaderRequestID, id)
	var caller httpapi.Caller
	switch {
	case a.s.auth != nil:
		c, err := a.s.auth.Authorize(reqHeader.Values("Authorization"), scope)
		if err != nil {
			var ae *httpapi.AuthError
			if errors.As(err, &ae) {
				return ctx, problem.ConnectError(ae.Code, ae.Detail, 0)
			}
			return ctx, a.s.internal(ctx, "authorize", err)
		}
		caller = c
		// The caller's rate limit, as on the HTTP routes.
		if err := a.s.auth.Admit(c, scope, peerAddr); err != nil {
			var ae *httpapi.AuthError
			if errors.As(err, &ae) {
				return ctx, problem.ConnectError(ae.Code, ae.Detail, ae.RetryAfter)
			}
			return ctx, a.s.internal(ctx, "admit", err)
		}
	case scope == httpapi.ScopeLeases:
		return ctx, problem.ConnectError(problem.NotFound, "the lease API is off: no token has the leases scope", 0)
	}
	return context.WithValue(ctx, callInfoKey{}, callInfo{caller: caller, requestID: id}), nil
}

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := a.authorize(ctx, req.Spec().Procedure, req.Peer().Addr, req.Header(), http.Header{})
		if err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		if ci := callInfoOf(ctx); ci.requestID != "" {
			if resp != nil {
				resp.Header().Set(httpapi.HeaderRequestID, ci.requestID)
			} else if cerr := new(connect.Error); errors.As(err, &cerr) {
				cerr.Meta().Set(httpapi.HeaderRequestID, ci.requestID)
			}
		}
		return resp, err
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := a.authorize(ctx, conn.Spec().Procedure, conn.Peer().Addr, conn.RequestHeader(), conn.ResponseHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// requestID returns the caller's X-Request-Id when it sent a valid one,
// else a new random one.
func requestID(h http.Header) string {
	if v := h.Values(httpapi.HeaderRequestID); len(v) == 1 && httpapi.ValidRequestID(v[0]) {
		return v[0]
	}
	const digits = "0123456789abcdef"
	var b [32]byte
	for half := range 2 {
		r := rand.Uint64()
		for i := range 16 {
			b[half*16+i] = digits[r&0xf]
			r >>= 4
		}
	}
	return string(b[:])
}

// lifecycle returns the interceptor that counts the calls under way of
// idgen's services, for Wait, and refuses new ones after Drain.
func (s *Server) lifecycle() connect.Interceptor { return lifecycle{s} }

type lifecycle struct{ s *Server }

func (l lifecycle) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !l.s.begin() {
			return nil, errShuttingDown()
		}
		defer l.s.end()
		return next(ctx, req)
	}
}

func (l lifecycle) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
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

// errShuttingDown is the answer to a call during shutdown, and the end of
// the streams Drain ends: the caller should go to another node.
func errShuttingDown() *connect.Error {
	return problem.ConnectError(problem.Unavailable, "the node is shutting down: call another node", 0)
}

// internal logs an unexpected error and returns the INTERNAL answer,
// which shows nothing of it.
func (s *Server) internal(ctx context.Context, what string, err error) *connect.Error {
	s.log.ErrorContext(ctx, "grpc call failed", "what", what, "request_id", callInfoOf(ctx).requestID, "err", err)
	return problem.ConnectError(problem.Internal, "internal error; see the server log", 0)
}

// domainError turns an error of the allocator or snowflake packages into
// the call's answer: its problem code, its text as the message (it names
// no secret), and for codes to retry later the delay. Unknown errors are
// INTERNAL and logged.
func (s *Server) domainError(ctx context.Context, err error) *connect.Error {
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	code, retry := problem.FromDomain(err)
	if code == problem.Internal {
		return s.internal(ctx, "domain", err)
	}
	return problem.ConnectError(code, err.Error(), retry)
}
