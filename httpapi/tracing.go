package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Request tracing.
//
// With a Tracer, every request gets a server span named after its method
// and route template ("GET /ids"), a child of the caller's trace when the
// request carries a W3C traceparent header. The span records the route,
// the status, the request ID (idgen.request_id) and the caller (once its
// token was checked on the admin API); the request's context carries it, so
// the spans of the store calls the request causes (internal/tracing) are
// its children. Whether a span is recorded and exported is the tracer
// provider's sampler's decision (idgen's samples a fraction of requests).
// Without a Tracer the server starts no span: the only cost is one
// comparison per request.

// TraceAttrRequestID is the span attribute that holds the request ID.
const TraceAttrRequestID = "idgen.request_id"

// Tracing configures request tracing. The zero value traces nothing.
type Tracing struct {
	// Tracer starts the requests' spans; nil turns tracing off.
	Tracer trace.Tracer
	// Propagator reads the caller's trace context from the request's
	// headers; nil means W3C Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

// resolve returns t with its defaults.
func (t Tracing) resolve() Tracing {
	if t.Tracer != nil && t.Propagator == nil {
		t.Propagator = propagation.TraceContext{}
	}
	return t
}

// nameSpans fills s.spanNames: the span name of each route, made once.
func (s *Server) nameSpans() {
	s.spanNames = make(map[Route]string, len(s.routes))
	for _, r := range s.routes {
		s.spanNames[r] = r.Method + " " + r.Path
	}
}

// startSpan starts the server span of the request c serves and puts it in
// the request's context. Only observe calls it, and only with a tracer.
func (s *Server) startSpan(c echo.Context) trace.Span {
	req := c.Request()
	ctx := s.tracing.Propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	route := c.Path()
	if !s.metrics.routes[route] {
		route = routeUnmatched
	}
	method := methodLabel(req.Method)
	name, ok := s.spanNames[Route{Method: method, Path: route}]
	if !ok {
		name = method + " " + route
	}
	ctx, span := s.tracing.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	// Most requests are not sampled: their spans record nothing, and get
	// no attributes to build.
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.String(TraceAttrRequestID, requestIDOf(c)),
		)
	}
	c.SetRequest(req.WithContext(ctx))
	return span
}

// endSpan records the outcome of the request on its span and ends it.
func endSpan(c echo.Context, span trace.Span) {
	if !span.IsRecording() {
		span.End()
		return
	}
	status := c.Response().Status
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if caller, ok := callerOf(c); ok {
		span.SetAttributes(attribute.String("idgen.caller", caller.Name))
	}
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
