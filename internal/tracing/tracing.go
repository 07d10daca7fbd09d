// Package tracing is idgen's OpenTelemetry tracing: an OTLP tracer provider
// configured by the standard OTEL_* environment, and a store decorator
// giving each database call a span.
//
// Off unless Settings.Enabled or OTEL_TRACES_EXPORTER=otlp (and never with
// OTEL_SDK_DISABLED=true); off, Open returns nil and nothing is wrapped.
// The protocol is "http/protobuf" (default) or "grpc"; the service name
// defaults to "idgen". Without OTEL_TRACES_SAMPLER, idgen samples
// RequestSampleRatio of untraced requests and every background call.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultRequestSampleRatio is the default Settings.RequestSampleRatio.
const DefaultRequestSampleRatio = 0.01

// InstrumentationName names idgen's tracers.
const InstrumentationName = "github.com/idgen-project/idgen"

// Errors of Open.
var (
	ErrUnsupportedExporter = errors.New("unsupported OTEL_TRACES_EXPORTER: idgen exports traces with otlp (or none)")
	ErrUnsupportedProtocol = errors.New("unsupported OTLP protocol: want http/protobuf or grpc")
)

// Settings configure Open.
type Settings struct {
	// Enabled turns tracing on even without OTEL_TRACES_EXPORTER=otlp.
	Enabled bool
	// RequestSampleRatio is the share of requests traced, 0 to 1, without
	// OTEL_TRACES_SAMPLER; 0 means DefaultRequestSampleRatio.
	RequestSampleRatio float64
	ServiceVersion     string              // the resource's service.version
	InstanceID         string              // the resource's service.instance.id
	Getenv             func(string) string // nil means os.Getenv
}

// Validate reports settings Open would refuse whatever the environment.
func (s Settings) Validate() error {
	if r := s.RequestSampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("invalid Settings.RequestSampleRatio %v: want 0 to 1", r)
	}
	return nil
}

// Provider is a running tracer provider; Shutdown flushes it.
type Provider struct {
	*sdktrace.TracerProvider
	// Protocol is the OTLP protocol it exports with.
	Protocol string
}

// enabled reports whether s and the environment turn tracing on.
func (s Settings) enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := s.Enabled
	for _, name := range strings.Split(getenv("OTEL_TRACES_EXPORTER"), ",") {
		switch name = strings.TrimSpace(name); name {
		case "":
		case "otlp":
			on = true
		case "none":
			if s.Enabled {
				return false, errors.New("tracing is enabled but OTEL_TRACES_EXPORTER is none")
			}
		default:
			return false, fmt.Errorf("%w: got %q", ErrUnsupportedExporter, name)
		}
	}
	return on, nil
}

// Open returns an OTLP tracer provider when tracing is on, else nil, nil.
// It connects lazily, dropping unsendable spans; its owner calls Shutdown.
func Open(ctx context.Context, s Settings) (*Provider, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	on, err := s.enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		protocol = "http/protobuf"
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: got %q", ErrUnsupportedProtocol, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := serviceResource(ctx, s)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(Sampler(s.RequestSampleRatio)))
	}
	return &Provider{TracerProvider: sdktrace.NewTracerProvider(opts...), Protocol: protocol}, nil
}

// serviceResource describes the node; the environment wins.
func serviceResource(ctx context.Context, s Settings) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", "idgen")}
	if s.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", s.ServiceVersion))
	}
	if s.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", s.InstanceID))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return res, nil
}

// Sampler is idgen's default sampler: spans follow their parent; root
// server spans are sampled at ratio, background calls always.
func Sampler(ratio float64) sdktrace.Sampler {
	if ratio == 0 {
		ratio = DefaultRequestSampleRatio
	}
	return sdktrace.ParentBased(rootSampler{requests: sdktrace.TraceIDRatioBased(ratio)})
}

type rootSampler struct{ requests sdktrace.Sampler }

func (r rootSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Kind == trace.SpanKindServer {
		return r.requests.ShouldSample(p)
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (r rootSampler) Description() string {
	return "IdgenRoot{requests:" + r.requests.Description() + ",other:AlwaysOnSampler}"
}
