package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
)

// Tracing configures request tracing: a server span per request named
// "GET /ids", a child of the caller's traceparent, with the route, status,
// request ID and caller. The zero value traces nothing.
type Tracing struct {
	// Tracer starts the requests' spans; nil turns tracing off.
	Tracer trace.Tracer
	// Propagator reads the caller's trace context from the request's
	// headers; nil means W3C Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

func (t Tracing) resolve() Tracing {
	if t.Tracer != nil && t.Propagator == nil {
		t.Propagator = propagation.TraceContext{}
	}
	return t
}

func (s *Server) nameSpans() {
	s.spanNames = make(map[Route]string, len(s.routes))
	for _, r := range s.routes {
		s.spanNames[r] = r.Method + " " + r.Path
	}
}

// startSpan starts the request's span and puts it in its context.
func (s *Server) startSpan(c echo.Context) trace.Span {
	req := c.Request()
	ctx := s.tracing.Propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	route, method := s.routeLabel(c), methodLabel(req.Method)
	name, ok := s.spanNames[Route{Method: method, Path: route}]
	if !ok {
		name = method + " " + route
	}
	ctx, span := s.tracing.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() { // most are not sampled: no attributes to build
		span.SetAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.String(idgen.TraceAttrRequestID, requestIDOf(c)),
		)
	}
	c.SetRequest(req.WithContext(ctx))
	return span
}

func endSpan(c echo.Context, span trace.Span) {
	if !span.IsRecording() {
		span.End()
		return
	}
	status := c.Response().Status
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if caller := callerOf(c); caller.Name != "" {
		span.SetAttributes(attribute.String(idgen.TraceAttrCaller, caller.Name))
	}
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
