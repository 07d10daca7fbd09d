package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/internal/problem"
	"github.com/idgen-project/idgen/internal/problem/problemjson"
)

// Problem codes: the "code" member of every application/problem+json body,
// and the last segment of its "type" URI. problemStatus is the one table
// that maps them to HTTP statuses.
const (
	codeInvalid          = "invalid"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeExhausted        = "namespace_exhausted"
	codeNoWorker         = "no_worker_available"
	codeLeaseLost        = "lease_lost"
	codeLeaseNotHeld     = "lease_not_held"
	codeInvalidRelease   = "invalid_release"
	codeTooLarge         = "too_large"
	codeTooMany          = "too_many"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// problemTypeBase prefixes the code to form a problem's "type" URI.
const problemTypeBase = "https://idgen.dev/problems/"

// problemStatus is the table of problem codes: the HTTP status and title
// of each. An unknown code is an internal error.
func problemStatus(code string) (status int, title string) {
	switch code {
	case codeInvalid:
		return http.StatusBadRequest, "Invalid request"
	case codeUnauthorized:
		return http.StatusUnauthorized, "Authentication required"
	case codeForbidden:
		return http.StatusForbidden, "Forbidden"
	case codeNotFound:
		return http.StatusNotFound, "Not found"
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed, "Method not allowed"
	case codeConflict:
		return http.StatusConflict, "Conflict"
	case codeExhausted:
		// 409: the request conflicts with the namespace's state, which no
		// retry, here or on another node, changes (503 would invite both),
		// and the namespace itself still exists (so not 404 or 410).
		return http.StatusConflict, "Namespace exhausted"
	case codeNoWorker:
		// 409 with Retry-After: every worker ID of the pool is held; one
		// frees when its lease expires or is released.
		return http.StatusConflict, "No worker ID available"
	case codeLeaseLost:
		// 409: the lease is no longer the caller's at that fencing
		// version; retrying the same call cannot succeed.
		return http.StatusConflict, "Lease lost"
	case codeLeaseNotHeld:
		// 409: nobody holds the lease, so there is nothing to evict.
		return http.StatusConflict, "Lease not held"
	case codeInvalidRelease:
		// 422: the body is well-formed, but its last timestamp is one the
		// holder cannot have used.
		return http.StatusUnprocessableEntity, "Invalid release"
	case codeTooLarge:
		return http.StatusRequestEntityTooLarge, "Request body too large"
	case codeTooMany:
		return http.StatusTooManyRequests, "Too many requests"
	case codeUnavailable:
		return http.StatusServiceUnavailable, "Service unavailable"
	default:
		return http.StatusInternalServerError, "Internal error"
	}
}

// codeForStatus is the reverse of problemStatus, for errors that carry only
// a status (echo's own: unknown route, method not allowed).
func codeForStatus(status int) string {
	for _, code := range [...]string{codeInvalid, codeUnauthorized, codeForbidden, codeNotFound,
		codeMethodNotAllowed, codeConflict, codeTooLarge, codeTooMany, codeUnavailable} {
		if s, _ := problemStatus(code); s == status {
			return code
		}
	}
	return codeInternal
}

// apiError is an error a handler returns to have it answered as a problem.
// detail is shown to the client and must never hold a secret; err, when
// set, is the cause and is logged for internal errors only.
type apiError struct {
	code       string
	detail     string
	retryAfter time.Duration // for codeUnavailable; at least one second is sent
	err        error
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.code + ": " + e.detail + ": " + e.err.Error()
	}
	return e.code + ": " + e.detail
}

func (e *apiError) Unwrap() error { return e.err }

// invalidf returns a 400 problem.
func invalidf(format string, args ...any) *apiError {
	return &apiError{code: codeInvalid, detail: fmt.Sprintf(format, args...)}
}

// fromDomain turns an error of the allocator or snowflake packages into a
// problem, by problem.FromDomain (the gRPC API maps them through it too).
// Errors it does not know become internal errors whose text is logged, not
// shown.
func fromDomain(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	code, retry := problem.FromDomain(err)
	if code == problem.Internal {
		return &apiError{code: codeInternal, detail: "internal error; see the server log", err: err}
	}
	return &apiError{code: string(code), detail: err.Error(), retryAfter: retry, err: err}
}

// retryAfterSeconds renders d for the Retry-After header: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// writeProblem answers the request with e as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, e *apiError) {
	status, title := problemStatus(e.code)
	code := e.code
	if status == http.StatusInternalServerError {
		code = codeInternal
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || code == codeNoWorker {
		h.Set("Retry-After", retryAfterSeconds(e.retryAfter))
	}
	if status == http.StatusUnauthorized {
		if h.Get("WWW-Authenticate") == "" {
			h.Set("WWW-Authenticate", bearerChallenge)
		}
	}
	body, _ := json.Marshal(problemjson.Body{
		Type:   problemTypeBase + code,
		Title:  title,
		Status: status,
		Detail: e.detail,
		Code:   code,
	})
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(body, '\n'))
	}
}

// handleError is the echo HTTPErrorHandler: every error a handler or echo
// itself returns leaves as application/problem+json.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *apiError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		ae = &apiError{code: codeForStatus(he.Code), err: err}
		switch he.Code {
		case http.StatusNotFound:
			ae.detail = "no such route"
		case http.StatusMethodNotAllowed:
			ae.detail = "method " + c.Request().Method + " not allowed here"
		default:
			if m, ok := he.Message.(string); ok {
				ae.detail = m
			}
		}
	default:
		ae = fromDomain(err)
	}
	if st, _ := problemStatus(ae.code); st == http.StatusInternalServerError {
		s.log.LogAttrs(s.logContext(c), slog.LevelError, "request failed",
			slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Any("err", err))
	}
	writeProblem(c.Response(), c.Request(), ae)
}
