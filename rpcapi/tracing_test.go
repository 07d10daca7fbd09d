package rpcapi_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/internal/tracing"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// TestTracing checks the server span of a gRPC call on a node with
// tracing: named after the procedure, in the caller's trace, with the
// request ID and caller; a refused call records its status code; and the
// store calls a strict draw makes are children of the call's span.
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(), Tracing: app.TracingConfig{Provider: tp}})
	strict := allocator.ModeStrict
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "invoices", Mode: &strict})
	conn := dial(t, srv.Addr().String())

	const parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(withToken(t.Context(), secretIDs),
		"x-request-id", "grpc-trace-1", "traceparent", "00-"+parentTrace+"-00f067aa0ba902b7-01")
	exp.Reset()
	var resp idgenv1.NextIdsResponse
	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Namespace: "invoices", Count: 2}, &resp); err != nil {
		t.Fatalf("NextIds: %v", err)
	}
	// A refused call: count 0.
	_ = conn.Invoke(withToken(t.Context(), secretIDs), procNextIds, &idgenv1.NextIdsRequest{Count: 0}, &resp)

	var calls, fetches []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "idgen.v1.IdService/NextIds":
			calls = append(calls, s)
		case tracing.SpanFetchSegment:
			fetches = append(fetches, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("NextIds spans: got %d, want 2", len(calls))
	}
	call := calls[0]
	a := map[attribute.Key]attribute.Value{}
	for _, kv := range call.Attributes {
		a[kv.Key] = kv.Value
	}
	if call.SpanKind != trace.SpanKindServer || call.SpanContext.TraceID().String() != parentTrace ||
		a[idgen.TraceAttrRequestID].AsString() != "grpc-trace-1" || a["idgen.caller"].AsString() != "ids-caller" {
		t.Errorf("NextIds span: got kind %v, trace %s, attributes %v; want a server span in trace %s with request ID grpc-trace-1 and caller ids-caller",
			call.SpanKind, call.SpanContext.TraceID(), call.Attributes, parentTrace)
	}
	if len(fetches) != 1 || fetches[0].Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("strict draw: got %d fetch spans, want 1, a child of the call's span", len(fetches))
	}
	refused := calls[1]
	var code int64 = -1
	for _, kv := range refused.Attributes {
		if kv.Key == "rpc.grpc.status_code" {
			code = kv.Value.AsInt64()
		}
	}
	if code != 3 || refused.Status.Code != 0 {
		t.Errorf("refused NextIds span: got status code %d, span status %v; want 3 (INVALID_ARGUMENT) and no error status (the caller's fault)", code, refused.Status)
	}
}
