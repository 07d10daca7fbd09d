package rpcapi

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/idgen-project/idgen"
)

// tracingInterceptor gives each idgen call past the gate a server span
// named after its procedure, child of the caller's traceparent, with the
// request ID, caller and failure code.
type tracingInterceptor struct {
	serverOnly
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// start starts the span of a call in the context the gate made.
func (ti tracingInterceptor) start(ctx context.Context, procedure string, carrier propagation.TextMapCarrier) (context.Context, trace.Span) {
	ctx = ti.prop.Extract(ctx, carrier)
	ctx, span := ti.tracer.Start(ctx, strings.TrimPrefix(procedure, "/"), trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		ci := callInfoOf(ctx)
		span.SetAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.method", procedure),
			attribute.String(idgen.TraceAttrRequestID, ci.caller.RequestID),
		)
		if ci.caller.Name != "" {
			span.SetAttributes(attribute.String(idgen.TraceAttrCaller, ci.caller.Name))
		}
	}
	return ctx, span
}

// end records a failure's code (an error status for server failures) and
// ends span.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		code := codeOf(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		switch code {
		case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeUnimplemented,
			connect.CodeInternal, connect.CodeUnavailable, connect.CodeDataLoss:
			span.SetStatus(codes.Error, code.String())
		}
		var cerr *connect.Error
		if errors.As(err, &cerr) {
			span.SetAttributes(attribute.String("rpc.grpc.status_message", cerr.Message()))
		} else if st, ok := grpcstatus.FromError(err); ok {
			span.SetAttributes(attribute.String("rpc.grpc.status_message", st.Message()))
		}
	}
	span.End()
}

func (ti tracingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, span := ti.start(ctx, req.Spec().Procedure, propagation.HeaderCarrier(req.Header()))
		resp, err := next(ctx, req)
		end(span, err)
		return resp, err
	}
}

func (ti tracingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, span := ti.start(ctx, conn.Spec().Procedure, propagation.HeaderCarrier(conn.RequestHeader()))
		err := next(ctx, conn)
		end(span, err)
		return err
	}
}
