package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/internal/tracing"
)

// TestOpen checks when Open turns tracing on, and what it refuses, for the
// settings and the OTEL_* environment.
func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings tracing.Settings
		env      map[string]string
		wantOn   bool
		protocol string
		wantErr  string
	}{
		{name: "off by default"},
		{name: "OTEL_TRACES_EXPORTER=none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "an endpoint alone does not turn it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "OTEL_TRACES_EXPORTER=otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, wantOn: true, protocol: "http/protobuf"},
		{name: "the setting", settings: tracing.Settings{Enabled: true}, wantOn: true, protocol: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantOn: true, protocol: "grpc"},
		{name: "the traces protocol wins", env: map[string]string{
			"OTEL_TRACES_EXPORTER": " otlp ", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
		}, wantOn: true, protocol: "http/protobuf"},
		{name: "OTEL_SDK_DISABLED wins", settings: tracing.Settings{Enabled: true},
			env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			wantErr: `unsupported OTEL_TRACES_EXPORTER: idgen exports traces with otlp (or none): got "zipkin"`},
		{name: "unsupported protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `unsupported OTLP protocol: want http/protobuf or grpc: got "http/json"`},
		{name: "enabled against none", settings: tracing.Settings{Enabled: true}, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"},
			wantErr: "tracing is enabled but OTEL_TRACES_EXPORTER is none"},
		{name: "ratio above 1", settings: tracing.Settings{RequestSampleRatio: 1.5},
			wantErr: "invalid Settings.RequestSampleRatio 1.5: want 0 to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.settings.Getenv = func(k string) string { return tc.env[k] }
			p, err := tracing.Open(context.Background(), tc.settings)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Open: got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: got %v, want nil", err)
			}
			if got := p != nil; got != tc.wantOn {
				t.Fatalf("tracing on: got %v, want %v", got, tc.wantOn)
			}
			if p == nil {
				return
			}
			if p.Protocol != tc.protocol {
				t.Errorf("protocol: got %q, want %q", p.Protocol, tc.protocol)
			}
			// Nothing was traced: shutting down sends nothing anywhere.
			if err := p.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	if !errors.Is(func() error {
		_, err := tracing.Open(context.Background(), tracing.Settings{Getenv: func(k string) string {
			if k == "OTEL_TRACES_EXPORTER" {
				return "jaeger"
			}
			return ""
		}})
		return err
	}(), tracing.ErrUnsupportedExporter) {
		t.Error("an unsupported exporter: want an error wrapping ErrUnsupportedExporter")
	}
}

// TestSampler checks idgen's default sampler: requests that start a trace
// at the ratio, every other root span, and children as their parent.
func TestSampler(t *testing.T) {
	s := tracing.Sampler(1e-9) // as good as no request
	sampled := func(kind trace.SpanKind, parent trace.SpanContext, id byte) bool {
		ctx := context.Background()
		if parent.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, parent)
		}
		var tid trace.TraceID
		for i := range tid {
			tid[i] = 0xff - id
		}
		r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: "x", Kind: kind})
		return r.Decision == sdktrace.RecordAndSample
	}
	parent := func(flags trace.TraceFlags) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true,
		})
	}
	for _, tc := range []struct {
		name   string
		kind   trace.SpanKind
		parent trace.SpanContext
		want   bool
	}{
		{"a request that starts a trace", trace.SpanKindServer, trace.SpanContext{}, false},
		{"a background store call", trace.SpanKindClient, trace.SpanContext{}, true},
		{"a request in a sampled trace of its caller", trace.SpanKindServer, parent(trace.FlagsSampled), true},
		{"a request in an unsampled trace", trace.SpanKindServer, parent(0), false},
		{"a store call of an unsampled request", trace.SpanKindClient, parent(0), false},
	} {
		if got := sampled(tc.kind, tc.parent, 1); got != tc.want {
			t.Errorf("%s: sampled got %v, want %v", tc.name, got, tc.want)
		}
	}
	if d := tracing.Sampler(0).Description(); !strings.Contains(d, "TraceIDRatioBased{0.01}") {
		t.Errorf("default ratio: got sampler %s, want TraceIDRatioBased{0.01} for requests", d)
	}
}
