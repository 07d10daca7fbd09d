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

// TracingConfig configures OpenTelemetry tracing: off unless Enabled is set
// or the environment says OTEL_TRACES_EXPORTER=otlp (internal/tracing
// describes the OTEL_* variables idgen honours). When on, every store call
// (lease claims, heartbeats and releases, segment fetches and tail
// returns, admin reads and writes) and a sample of the requests get spans.
type TracingConfig struct {
	// Enabled turns tracing on without OTEL_TRACES_EXPORTER=otlp.
	Enabled bool
	// SampleRatio is the share of requests traced that come without a
	// sampled trace of their caller, 0 to 1, when OTEL_TRACES_SAMPLER is
	// not set; 0 means tracing.DefaultRequestSampleRatio (1%). Calls no
	// request made (the keeper's, the segment allocator's) are always
	// traced.
	SampleRatio float64
	// Provider, when not nil, traces with it instead of a provider built
	// from the environment, whatever Enabled says; it stays its owner's,
	// who shuts it down. For programs that embed a node, and tests.
	Provider trace.TracerProvider
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// settings returns the settings of tracing.Open for the node c configures.
func (t TracingConfig) settings(c Config) tracing.Settings {
	return tracing.Settings{
		Enabled:            t.Enabled,
		RequestSampleRatio: t.SampleRatio,
		ServiceVersion:     c.Version,
		InstanceID:         c.Keeper.Holder,
		Getenv:             t.Getenv,
	}
}

// validate reports settings Open would refuse.
func (t TracingConfig) validate() error {
	if r := t.SampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("invalid TracingConfig.SampleRatio %v: want 0 to 1", r)
	}
	return nil
}

// openTracing sets up a's tracing: the tracer provider (built here and
// owned by a, or Config.Tracing.Provider), and returns the store the
// node's parts use (traced or not) and the HTTP server's tracing
// settings. Off, it returns the store itself and no tracer.
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

// dbSystem names the database of dsn as OpenTelemetry's db.system.name
// does; "" when the store came without a DSN.
func dbSystem(dsn string) string {
	switch d := stores.Dialect(dsn); d {
	case "postgres":
		return "postgresql"
	default:
		return d
	}
}
