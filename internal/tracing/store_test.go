package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/internal/tracing"
)

// recorder returns a tracer provider that samples everything and keeps
// the ended spans in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestStoreSpans runs a lease claim, a heartbeat, a segment fetch inside a
// request's span and an admin call through the decorator on a real
// (SQLite) store, and checks the span of each: its name, kind, parent,
// status and the attributes an operator looks for.
func TestStoreSpans(t *testing.T) {
	tp, exp := recorder(t)
	store := tracing.WrapStore(testserver.OpenStore(t, "sqlite"), tp, "sqlite")
	ctx := context.Background()

	claim, err := store.Claim(ctx, allocator.ClaimRequest{
		MinWorkerID: 0, MaxWorkerID: 3, Holder: "node-a", TTL: 10 * time.Second, RequestID: "req-claim-1",
	})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if _, _, err := store.Heartbeat(ctx, allocator.HeartbeatRequest{
		Key: claim.Lease.LeaseKey, Holder: "node-a", FencingVersion: claim.Lease.FencingVersion, TTL: 10 * time.Second,
	}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	// A heartbeat at a stale fencing version: the lease is lost, and the
	// span says so.
	_, _, lostErr := store.Heartbeat(ctx, allocator.HeartbeatRequest{
		Key: claim.Lease.LeaseKey, Holder: "node-a", FencingVersion: claim.Lease.FencingVersion + 7, TTL: 10 * time.Second,
	})
	if !errors.Is(lostErr, allocator.ErrLeaseLost) {
		t.Fatalf("stale heartbeat: got %v, want ErrLeaseLost", lostErr)
	}
	if _, err := store.CreateNamespace(ctx, allocator.Namespace{
		Name: "orders", Step: 100, MinStep: 100, MaxStep: 1000,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone,
	}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	reqCtx, reqSpan := tp.Tracer("test").Start(ctx, "GET /ids", trace.WithSpanKind(trace.SpanKindServer))
	seg, err := store.FetchSegment(reqCtx, "orders", 100)
	reqSpan.End()
	if err != nil {
		t.Fatalf("FetchSegment: %v", err)
	}

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for _, name := range []string{tracing.SpanClaim, tracing.SpanHeartbeat, tracing.SpanCreateNamespace, tracing.SpanFetchSegment, "GET /ids"} {
		if len(byName[name]) == 0 {
			t.Fatalf("no %s span; got %d spans: %v", name, len(spans), names(spans))
		}
	}
	for _, s := range spans {
		if s.Name == "GET /ids" {
			continue
		}
		if s.SpanKind != trace.SpanKindClient {
			t.Errorf("%s: kind got %v, want client", s.Name, s.SpanKind)
		}
		if got := attrs(s)["db.system.name"].AsString(); got != "sqlite" {
			t.Errorf("%s: db.system.name got %q, want sqlite", s.Name, got)
		}
	}

	c := byName[tracing.SpanClaim][0]
	ca := attrs(c)
	for key, want := range map[attribute.Key]int64{
		tracing.AttrWorker:         claim.Lease.WorkerID,
		tracing.AttrFencingVersion: claim.Lease.FencingVersion,
		tracing.AttrWorkerMax:      3,
	} {
		if got := ca[key].AsInt64(); got != want {
			t.Errorf("claim span %s: got %d, want %d", key, got, want)
		}
	}
	if got := ca[tracing.AttrRequestID].AsString(); got != "req-claim-1" {
		t.Errorf("claim span request ID: got %q, want req-claim-1", got)
	}
	if c.Status.Code != codes.Unset || c.Parent.IsValid() {
		t.Errorf("claim span: got status %v, parent %v; want no error and no parent (a root)", c.Status, c.Parent)
	}

	hbs := byName[tracing.SpanHeartbeat]
	if len(hbs) != 2 {
		t.Fatalf("heartbeat spans: got %d, want 2", len(hbs))
	}
	if hbs[0].Status.Code != codes.Unset || attrs(hbs[0])[tracing.AttrHolder].AsString() != "node-a" {
		t.Errorf("heartbeat span: got status %v, attributes %v; want no error and holder node-a", hbs[0].Status, hbs[0].Attributes)
	}
	if hbs[1].Status.Code != codes.Error || len(hbs[1].Events) == 0 || hbs[1].Events[0].Name != "exception" {
		t.Errorf("lost heartbeat span: got status %v, events %v; want an error with its exception event", hbs[1].Status, hbs[1].Events)
	}

	f := byName[tracing.SpanFetchSegment][0]
	fa := attrs(f)
	if fa[tracing.AttrNamespace].AsString() != "orders" || fa[tracing.AttrCount].AsInt64() != 100 ||
		fa[tracing.AttrFirst].AsInt64() != seg.First || fa[tracing.AttrLast].AsInt64() != seg.Last {
		t.Errorf("fetch span attributes: got %v, want namespace orders, count 100, range %d..%d", f.Attributes, seg.First, seg.Last)
	}
	if f.Parent.SpanID() != reqSpan.SpanContext().SpanID() || f.SpanContext.TraceID() != reqSpan.SpanContext().TraceID() {
		t.Errorf("fetch span: got parent %v, want the request's span %v", f.Parent.SpanID(), reqSpan.SpanContext().SpanID())
	}

	if got := attrs(byName[tracing.SpanCreateNamespace][0])[tracing.AttrNamespace].AsString(); got != "orders" {
		t.Errorf("create namespace span: namespace got %q, want orders", got)
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
