package tracing_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idgen-project/idgen/internal/tracing"
)

// Tracing is off unless the settings or OTEL_TRACES_EXPORTER ask for it:
// Open then returns nil, and the node wraps nothing.
func ExampleOpen() {
	env := map[string]string{} // as os.Getenv would read it
	p, err := tracing.Open(context.Background(), tracing.Settings{Getenv: func(k string) string { return env[k] }})
	fmt.Println(p == nil, err)

	env["OTEL_TRACES_EXPORTER"] = "otlp"
	env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	p, err = tracing.Open(context.Background(), tracing.Settings{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	fmt.Println(p.Protocol)
	// Output:
	// true <nil>
	// grpc
}
