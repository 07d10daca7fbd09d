package httpapi

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"unsafe"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
)

// Request IDs.
//
// Every request has an ID: the caller's X-Request-ID when it sends a valid
// one (ValidRequestID), else one the server makes up. The server echoes it
// in the X-Request-ID header of every answer, problems included, puts it
// on every log line of the request, and records it with what the request
// changes (the RequestID of the lease store's calls, the audit lines of the
// admin API), so that an answer, a log line and a row of lease_events can
// be matched.

// HeaderRequestID is the request ID's header, in the canonical form
// net/http gives header names (X-Request-ID on the wire, in any case).
const HeaderRequestID = "X-Request-Id"

// MaxRequestIDLen is the longest request ID kept, in bytes.
const MaxRequestIDLen = 128

// ValidRequestID reports whether id is a request ID the server keeps: 1 to
// MaxRequestIDLen bytes of printable ASCII other than space (0x21 to 0x7e),
// safe in a header, a log line and a database column.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// assignRequestID gives the request its ID and sets it on the answer. The
// outermost middleware (observe) calls it first, before anything can
// answer. A kept ID reuses the request's header value and costs no
// allocation; a new one costs one.
func assignRequestID(c echo.Context) {
	h := c.Response().Header()
	if v := c.Request().Header[HeaderRequestID]; len(v) == 1 && ValidRequestID(v[0]) {
		h[HeaderRequestID] = v
	} else {
		h[HeaderRequestID] = newRequestID()
	}
}

// requestIDLen is the length of the IDs newRequestID makes: 128 random
// bits in hex.
const requestIDLen = 32

// generatedID is a new request ID and the header value that holds it, in
// one allocation.
type generatedID struct {
	value [1]string
	text  [requestIDLen]byte
}

// newRequestID returns the header value of a new request ID: 32 hex digits
// of 128 bits from the runtime's random source (math/rand/v2: seeded at
// random per process, no lock). They identify requests, they protect
// nothing: 128 bits make two alike, here or on another node, as good as
// impossible.
func newRequestID() []string {
	const digits = "0123456789abcdef"
	g := new(generatedID)
	for half := 0; half < 2; half++ {
		r := rand.Uint64()
		for i := 0; i < 16; i++ {
			g.text[half*16+i] = digits[r&0xf]
			r >>= 4
		}
	}
	// The bytes are never written again: the string may share them.
	g.value[0] = unsafe.String(&g.text[0], len(g.text))
	return g.value[:]
}

// requestIDOf returns the ID of the request c serves (see assignRequestID).
// It reads it back from the answer's header and costs nothing.
func requestIDOf(c echo.Context) string {
	if v := c.Response().Header()[HeaderRequestID]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// logContext returns the context to log a line of the request c serves
// with: the request's own when it carries the request ID already (routes
// behind requireScope), else one that does. Only the second allocates, and
// only lines that are logged call it, so /ids pays for it on errors only.
func (s *Server) logContext(c echo.Context) context.Context {
	ctx := c.Request().Context()
	if _, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ctx
	}
	return context.WithValue(ctx, requestInfoKey{}, &requestInfo{id: requestIDOf(c)})
}

// requestLogHandler adds to every record logged with a request's context
// (see logContext) the request's ID as request_id, once its token was
// checked its caller as caller, and with tracing on its trace as trace_id.
type requestLogHandler struct{ next slog.Handler }

func (h requestLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", ri.id))
		if ri.caller.Name != "" {
			r.AddAttrs(slog.String("caller", ri.caller.Name))
		}
		// With tracing on, the line names the request's trace too.
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
