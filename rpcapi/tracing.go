package rpcapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/httpapi"
)

// Call tracing.
//
// With Config.Tracer, every call of idgen's services that passed the auth
// interceptor gets a server span named after its procedure
// ("idgen.v1.IdService/NextIds"), a child of the caller's trace when the
// call carries a W3C traceparent, with the request ID and the caller on it
// and, for a failed call, its gRPC status code; the store calls the call
// causes are its children. Whether it is recorded is the tracer
// provider's sampler's decision, as for the HTTP routes. Without a Tracer
// the interceptor is not installed.

// tracingInterceptor starts the server span of each call.
type tracingInterceptor struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// start starts the span of a call to procedure whose request headers are
// h, in the context ctx that the auth interceptor made.
func (ti tracingInterceptor) start(ctx context.Context, procedure string, h http.Header) (context.Context, trace.Span) {
	ctx = ti.prop.Extract(ctx, propagation.HeaderCarrier(h))
	ctx, span := ti.tracer.Start(ctx, strings.TrimPrefix(procedure, "/"), trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		ci := callInfoOf(ctx)
		span.SetAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.method", procedure),
			attribute.String(httpapi.TraceAttrRequestID, ci.requestID),
		)
		if ci.caller.Name != "" {
			span.SetAttributes(attribute.String("idgen.caller", ci.caller.Name))
		}
	}
	return ctx, span
}

// end records the call's outcome on its span and ends it: the gRPC status
// code of a failure, and an error status for the codes that mean the
// server failed.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		code := connect.CodeOf(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		switch code {
		case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeUnimplemented,
			connect.CodeInternal, connect.CodeUnavailable, connect.CodeDataLoss:
			span.SetStatus(codes.Error, code.String())
		}
		var cerr *connect.Error
		if errors.As(err, &cerr) {
			span.SetAttributes(attribute.String("rpc.grpc.status_message", cerr.Message()))
		}
	}
	span.End()
}

func (ti tracingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, span := ti.start(ctx, req.Spec().Procedure, req.Header())
		resp, err := next(ctx, req)
		end(span, err)
		return resp, err
	}
}

func (ti tracingInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (ti tracingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, span := ti.start(ctx, conn.Spec().Procedure, conn.RequestHeader())
		err := next(ctx, conn)
		end(span, err)
		return err
	}
}
