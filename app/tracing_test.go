package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/internal/tracing"
)

// TestTracing runs a node with a tracer provider that keeps its spans in
// memory and checks the spans of what a node does: the keeper's lease
// claim and heartbeats (roots of their own), an admin call (a server span
// with the request ID, whose store call is its child), and a segment
// fetch; and that the request's log lines carry its request ID and trace.
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(tracing.Sampler(1)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &testserver.LogBuffer{}

	a, err := app.Open(context.Background(), app.Config{
		Store:      testserver.OpenStore(t, "sqlite"),
		Listen:     "127.0.0.1:0",
		AdminToken: "tracing-test-admin-token",
		Keeper:     allocator.KeeperSettings{Holder: "tracing-test", TTL: time.Second},
		Tracing:    app.TracingConfig{Provider: tp},
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	defer func() {
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-serveErr; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	base := "http://" + a.Addr().String()
	waitReady(t, base)

	send := func(method, path, body, requestID string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tracing-test-admin-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", requestID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: status %d", method, path, resp.StatusCode)
		}
	}
	send("POST", "/admin/namespaces", `{"name":"orders","step":100}`, "trace-admin-1")
	send("GET", "/ids?namespace=orders&count=3", "", "trace-ids-1")

	// Heartbeats come every ttl/3: wait (bounded) for one.
	find := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	testkit.WaitFor(t, waitBound, "a heartbeat span", func() bool { return len(find(tracing.SpanHeartbeat)) > 0 })

	for _, name := range []string{tracing.SpanClaim, tracing.SpanHeartbeat} {
		s := find(name)[0]
		if s.Parent.IsValid() || s.SpanKind != trace.SpanKindClient || s.Status.Code != 0 {
			t.Errorf("%s: got parent %v, kind %v, status %v; want a root client span without error", name, s.Parent, s.SpanKind, s.Status)
		}
	}

	server := find("POST /admin/namespaces")
	if len(server) != 1 {
		t.Fatalf("POST /admin/namespaces spans: got %d, want 1", len(server))
	}
	sa := attrs(server[0])
	if sa[idgen.TraceAttrRequestID].AsString() != "trace-admin-1" || sa["http.response.status_code"].AsInt64() != 201 ||
		sa["idgen.caller"].AsString() != idgen.AdminTokenName || server[0].SpanKind != trace.SpanKindServer {
		t.Errorf("admin request span: got kind %v, attributes %v; want a server span with request ID trace-admin-1, status 201, caller %s",
			server[0].SpanKind, server[0].Attributes, idgen.AdminTokenName)
	}
	create := find(tracing.SpanCreateNamespace)
	if len(create) != 1 || create[0].Parent.SpanID() != server[0].SpanContext.SpanID() {
		t.Fatalf("create namespace span: got %d, want 1 whose parent is the request's span", len(create))
	}

	fetch := find(tracing.SpanFetchSegment)
	if len(fetch) == 0 {
		t.Fatalf("no segment fetch span among %d spans", len(exp.GetSpans()))
	}
	if got := attrs(fetch[0])[tracing.AttrNamespace].AsString(); got != "orders" {
		t.Errorf("fetch span namespace: got %q, want orders", got)
	}
	if ids := find("GET /ids"); len(ids) != 1 || attrs(ids[0])[idgen.TraceAttrRequestID].AsString() != "trace-ids-1" {
		t.Errorf("GET /ids spans: got %d, want 1 with request ID trace-ids-1", len(ids))
	}

	// The admin call's log line names its request and its trace.
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="namespace created"`) {
			line = l
		}
	}
	if want := "request_id=trace-admin-1"; !strings.Contains(line, want) ||
		!strings.Contains(line, "trace_id="+server[0].SpanContext.TraceID().String()) {
		t.Errorf("log line %q: want %s and the request's trace_id", line, want)
	}
}

// TestTracingOff checks that a node without tracing settings and without
// OTEL_TRACES_EXPORTER traces nothing, and that a bad OTEL_* setting stops
// Open with a clear error.
func TestTracingOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unsupported exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "tracing: unsupported OTEL_TRACES_EXPORTER"},
		{"unsupported protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "tracing: unsupported OTLP protocol"},
	} {
		_, err := app.Open(context.Background(), app.Config{
			Store:   testserver.OpenStore(t, "sqlite"),
			Listen:  "127.0.0.1:0",
			Tracing: app.TracingConfig{Getenv: func(k string) string { return tc.env[k] }},
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := (app.Config{DSN: "sqlite:x.db", Tracing: app.TracingConfig{SampleRatio: 2}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "invalid TracingConfig.SampleRatio 2: want 0 to 1") {
		t.Errorf("Validate with ratio 2: got %v, want the ratio refused", err)
	}
	if err := (app.Config{DSN: "sqlite:x.db", RateLimit: idgen.RateLimit{Rate: -3}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "invalid RateLimit.Rate -3") {
		t.Errorf("Validate with rate -3: got %v, want the rate refused", err)
	}
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}
