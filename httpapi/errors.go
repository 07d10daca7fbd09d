package httpapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
)

// ProblemTypeBase prefixes the code to form a problem's "type" URI.
const ProblemTypeBase = "https://idgen.dev/problems/"

// Problem is every error answer's body: RFC 9457 problem+json with idgen's
// code, whose row gives status, title and Retry-After.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

func invalidf(format string, args ...any) *idgen.Error {
	return idgen.Errorf(idgen.Invalid, format, args...)
}

// problemHeaders sets the Retry-After and WWW-Authenticate headers e's
// code asks for, and returns its row.
func problemHeaders(h http.Header, e *idgen.Error) idgen.CodeInfo {
	info := idgen.Info(e.Code)
	if info.RetryLater {
		h.Set("Retry-After", idgen.RetryAfterSeconds(e.Retry()))
	}
	if info.Code == idgen.Unauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", bearerChallenge)
	}
	return info
}

func writeProblem(w http.ResponseWriter, r *http.Request, e *idgen.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	info := problemHeaders(h, e)
	body, _ := json.Marshal(Problem{Type: ProblemTypeBase + string(info.Code), Title: info.Title,
		Status: info.HTTPStatus, Detail: e.Detail, Code: string(info.Code)})
	w.WriteHeader(info.HTTPStatus)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(body, '\n'))
	}
}

// handleError is echo's error handler: every error leaves as a problem.
// Internal causes are logged; refusals' hidden causes at debug level.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var e *idgen.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &he):
		code, _ := idgen.CodeOfStatus(he.Code) // echo's own: no route, method not allowed
		e = &idgen.Error{Code: cmp.Or(code, idgen.Internal), Err: err}
		switch he.Code {
		case http.StatusNotFound:
			e.Detail = "no such route"
		case http.StatusMethodNotAllowed:
			e.Detail = "method " + c.Request().Method + " not allowed here"
		default:
			if m, ok := he.Message.(string); ok {
				e.Detail = m
			}
		}
	default:
		e = idgen.ErrorOf(err, "")
	}
	switch {
	case e.Code == idgen.Internal:
		s.log.LogAttrs(s.logContext(c), slog.LevelError, "request failed",
			slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Any("err", err))
	case e.Err != nil:
		s.log.LogAttrs(s.logContext(c), slog.LevelDebug, "request refused",
			slog.String("code", string(e.Code)), slog.String("route", c.Path()), slog.Any("err", e.Err))
	}
	writeProblem(c.Response(), c.Request(), e)
}
