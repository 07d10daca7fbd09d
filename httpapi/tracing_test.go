package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/tracing"
)

// tracedServer builds a second server on e's parts whose requests are
// traced by tp.
func (e *env) tracedServer(tp trace.TracerProvider) http.Handler {
	e.tb.Helper()
	cfg := e.config()
	cfg.Tracing = httpapi.Tracing{Tracer: tp.Tracer("httpapi-test")}
	return e.handler(cfg)
}

// TestRequestSpans checks the server span of a request: named by method
// and route, with the request ID and status, a child of the caller's
// trace when it sends a traceparent, and an error on a 5xx.
func TestRequestSpans(t *testing.T) {
	e := newEnv(t, envOptions{})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	h := e.tracedServer(tp)

	const parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		target, requestID, traceparent string
		wantName                       string
		wantStatus                     int
	}{
		{"/ids?count=2", "span-req-1", "", "GET /ids", 200},
		{"/ids/12345", "span-req-2", "00-" + parentTrace + "-00f067aa0ba902b7-01", "GET /ids/:id", 200},
		{"/ids?count=0", "span-req-3", "", "GET /ids", 400},
		{"/no/such/route", "span-req-4", "", "GET unmatched", 404},
	} {
		exp.Reset()
		req := httptest.NewRequest("GET", tc.target, nil)
		req.Header.Set("X-Request-ID", tc.requestID)
		if tc.traceparent != "" {
			req.Header.Set("traceparent", tc.traceparent)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.wantStatus {
			t.Fatalf("GET %s: got %d, want %d", tc.target, rec.Code, tc.wantStatus)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("GET %s: got %d spans, want 1", tc.target, len(spans))
		}
		s := spans[0]
		got := map[string]any{}
		for _, kv := range s.Attributes {
			got[string(kv.Key)] = kv.Value.AsInterface()
		}
		if s.Name != tc.wantName || s.SpanKind != trace.SpanKindServer ||
			got[idgen.TraceAttrRequestID] != tc.requestID || got["http.response.status_code"] != int64(tc.wantStatus) {
			t.Errorf("GET %s: got span %q kind %v attributes %v; want %q, server, request ID %s, status %d",
				tc.target, s.Name, s.SpanKind, got, tc.wantName, tc.requestID, tc.wantStatus)
		}
		if tc.traceparent != "" && s.SpanContext.TraceID().String() != parentTrace {
			t.Errorf("GET %s: trace ID got %s, want the caller's %s", tc.target, s.SpanContext.TraceID(), parentTrace)
		}
	}
}

// BenchmarkIDsCount1Tracing is BenchmarkIDsCount1 with tracing on and
// idgen's default sampler: 1% of the requests are recorded (and dropped
// here: the provider has no exporter).
func BenchmarkIDsCount1Tracing(b *testing.B) {
	e := newEnv(b, envOptions{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tracing.Sampler(0)))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	benchHandler(b, e.tracedServer(tp), "/ids")
}
