package app

import (
	"context"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/tracing"
)

// TracingConfig configures OpenTelemetry tracing: off unless Enabled or
// OTEL_TRACES_EXPORTER=otlp. When on, every store call and a sample of the
// requests get spans.
type TracingConfig struct {
	// Enabled turns tracing on without OTEL_TRACES_EXPORTER=otlp.
	Enabled bool
	// SampleRatio is the share of untraced requests sampled without
	// OTEL_TRACES_SAMPLER, 0 to 1 (0: tracing.DefaultRequestSampleRatio).
	SampleRatio float64
	// Provider, when set, is used instead of one built from the
	// environment, whatever Enabled says; its owner shuts it down.
	Provider trace.TracerProvider
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

func (t TracingConfig) settings(c Config) tracing.Settings {
	return tracing.Settings{
		Enabled:            t.Enabled,
		RequestSampleRatio: t.SampleRatio,
		ServiceVersion:     c.Version,
		InstanceID:         c.Keeper.Holder,
		Getenv:             t.Getenv,
	}
}

func (t TracingConfig) validate() error {
	if r := t.SampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("invalid TracingConfig.SampleRatio %v: want 0 to 1", r)
	}
	return nil
}

// openTracing sets up tracing and returns the store the parts use (traced
// or not) and the HTTP server's tracing settings.
func (a *App) openTracing(ctx context.Context, c Config) (allocator.Store, httpapi.Tracing, error) {
	tp := c.Tracing.Provider
	if tp == nil {
		p, err := tracing.Open(ctx, c.Tracing.settings(c))
		if err != nil {
			return nil, httpapi.Tracing{}, fmt.Errorf("tracing: %w", err)
		}
		if p == nil {
			return a.store, httpapi.Tracing{}, nil
		}
		a.tracer = p
		tp = p
		a.log.Info("tracing on: exporting spans over OTLP", "protocol", p.Protocol)
	}
	store := tracing.WrapStore(a.store, tp, dbSystem(c.DSN))
	return store, httpapi.Tracing{Tracer: tp.Tracer(tracing.InstrumentationName + "/httpapi")}, nil
}

// dbSystem names dsn's database as OpenTelemetry's db.system.name does.
func dbSystem(dsn string) string {
	switch d := stores.Dialect(dsn); d {
	case "postgres":
		return "postgresql"
	default:
		return d
	}
}
