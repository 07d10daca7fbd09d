package httpapi

import (
	"context"
	"log/slog"
	"unsafe"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen"
)

// assignRequestID sets the request's ID on the answer before anything can
// answer: the caller's valid X-Request-ID, or a new one (one allocation).
func assignRequestID(c echo.Context) {
	h := c.Response().Header()
	if v := c.Request().Header[idgen.HeaderRequestID]; len(v) == 1 && idgen.ValidRequestID(v[0]) {
		h[idgen.HeaderRequestID] = v
	} else {
		h[idgen.HeaderRequestID] = newRequestID()
	}
}

type generatedID struct {
	value [1]string
	text  [idgen.RequestIDLen]byte
}

func newRequestID() []string {
	g := new(generatedID)
	idgen.NewRequestID(&g.text)
	// The bytes are never written again: the string may share them.
	g.value[0] = unsafe.String(&g.text[0], len(g.text))
	return g.value[:]
}

// requestIDOf reads the request's ID back from the answer's header.
func requestIDOf(c echo.Context) string {
	if v := c.Response().Header()[idgen.HeaderRequestID]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// logContext returns the request's context if it carries its caller, else
// one made for the line, with the request ID.
func (s *Server) logContext(c echo.Context) context.Context {
	ctx := c.Request().Context()
	if _, ok := ctx.Value(callerKey{}).(idgen.Caller); ok {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, idgen.Caller{RequestID: requestIDOf(c)})
}

// requestLogHandler adds request_id, caller and trace_id to every record
// logged with a request's context (logContext).
type requestLogHandler struct{ next slog.Handler }

func (h requestLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if caller, ok := ctx.Value(callerKey{}).(idgen.Caller); ok {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", caller.RequestID))
		if caller.Name != "" {
			r.AddAttrs(slog.String("caller", caller.Name))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLogHandler{h.next.WithAttrs(attrs)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.next.WithGroup(name)}
}
