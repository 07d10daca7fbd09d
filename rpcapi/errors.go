package rpcapi

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idgen-project/idgen"
)

// connectError returns e's gRPC error: its code's status and ErrorInfo
// reason, plus RetryInfo and Retry-After for retry-later codes.
func connectError(e *idgen.Error) *connect.Error {
	info := idgen.Info(e.Code)
	cerr := connect.NewError(info.GRPC, errors.New(e.Detail))
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason(info.Code), Domain: idgen.ErrorDomain}); err == nil {
		cerr.AddDetail(d)
	}
	if info.RetryLater {
		if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(e.Retry())}); err == nil {
			cerr.AddDetail(d)
		}
		cerr.Meta().Set("Retry-After", idgen.RetryAfterSeconds(e.Retry()))
	}
	return cerr
}

// reason is code's ErrorInfo reason, in UPPER_SNAKE_CASE.
func reason(code idgen.Code) string { return strings.ToUpper(string(code)) }

// errorOf answers a failed call on ns: CANCELED or DEADLINE_EXCEEDED when
// the caller's context ended, else idgen.ErrorOf, its cause logged.
func (s *Server) errorOf(ctx context.Context, err error, ns string) *connect.Error {
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	e := idgen.ErrorOf(err, ns)
	switch {
	case e.Code == idgen.Internal:
		s.log.ErrorContext(ctx, "grpc call failed", "request_id", callInfoOf(ctx).caller.RequestID, "err", err)
	case e.Err != nil:
		s.log.DebugContext(ctx, "grpc call refused", "code", string(e.Code), "request_id", callInfoOf(ctx).caller.RequestID, "err", e.Err)
	}
	return connectError(e)
}

// errShuttingDown ends the calls and streams Drain refuses or ends.
func errShuttingDown() *connect.Error {
	return connectError(&idgen.Error{Code: idgen.Unavailable, Detail: "the node is shutting down: call another node"})
}
