package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/problem/problemjson"
	"github.com/idgen-project/idgen/snowflake"
)

// Sentinel errors. Those with a code match an *Error of that problem code
// with errors.Is.
var (
	ErrInvalid      = errors.New("idgen: invalid request")       // code "invalid", 400
	ErrUnauthorized = errors.New("idgen: unauthorized")          // code "unauthorized", 401
	ErrForbidden    = errors.New("idgen: forbidden")             // code "forbidden", 403
	ErrNotFound     = errors.New("idgen: not found")             // code "not_found", 404 (e.g. unknown namespace)
	ErrConflict     = errors.New("idgen: conflict")              // code "conflict", 409
	ErrTooLarge     = errors.New("idgen: request too large")     // code "too_large", 413
	ErrTooMany      = errors.New("idgen: too many requests")     // code "too_many", 429
	ErrUnavailable  = errors.New("idgen: unavailable")           // code "unavailable", 503
	ErrInternal     = errors.New("idgen: internal server error") // code "internal", 500

	// The lease API's codes (LeaseStore).
	ErrNoWorkerAvailable = errors.New("idgen: no worker ID available") // code "no_worker_available", 409
	ErrLeaseLost         = errors.New("idgen: lease lost")             // code "lease_lost", 409
	ErrInvalidRelease    = errors.New("idgen: invalid release")        // code "invalid_release", 422

	// Why a Generator issued nothing: Next, NextN and Ready return errors
	// that match ErrUnavailable and one of these (or a refusal of the
	// fence, such as snowflake.ErrBelowFloor or snowflake.ErrAboveCeiling).
	ErrNoLease         = allocator.ErrNoLease       // no lease held: not acquired yet, lost, or the pool is full
	ErrLeaseExpired    = allocator.ErrLeaseExpired  // the local deadline passed without a successful heartbeat
	ErrClockOffset     = allocator.ErrClockOffset   // the clock is too far from the database's
	ErrClockBackward   = snowflake.ErrClockBackward // the clock stepped back further than MaxBackwardWait
	ErrGeneratorClosed = allocator.ErrKeeperClosed  // Close was called

	ErrCircuitOpen  = errors.New("idgen client: circuit breaker open")
	ErrClosed       = errors.New("idgen client: closed")
	ErrBadResponse  = errors.New("idgen client: malformed response")
	ErrInvalidInput = errors.New("idgen client: invalid argument")
)

// StaleRevisionError is returned for an answer of a strict namespace
// whose revision is not above Previous, the highest revision the client
// had seen for the namespace when it sent the request. Every fetch of a
// strict namespace, on any node, gets a greater revision than all before
// it, so such an answer is stale or replayed: from a node whose database
// went back in time (restored from a backup, or an unsafe failover), or a
// proxy or cache that repeated an old answer. Its IDs may have been handed
// out before and are not returned. Test for it with errors.As.
type StaleRevisionError struct {
	Namespace string
	Got       int64 // the answer's revision
	Previous  int64 // the highest revision seen before the request
}

func (e *StaleRevisionError) Error() string {
	return fmt.Sprintf("idgen client: namespace %q: stale answer: revision %d is not above %d, seen before", e.Namespace, e.Got, e.Previous)
}

// codeErrors maps the problem codes of the service to the sentinel errors.
var codeErrors = map[string]error{
	"invalid":      ErrInvalid,
	"unauthorized": ErrUnauthorized,
	"forbidden":    ErrForbidden,
	"not_found":    ErrNotFound,
	"conflict":     ErrConflict,
	"too_large":    ErrTooLarge,
	"too_many":     ErrTooMany,
	"unavailable":  ErrUnavailable,
	"internal":     ErrInternal,

	"no_worker_available": ErrNoWorkerAvailable,
	"lease_lost":          ErrLeaseLost,
	"invalid_release":     ErrInvalidRelease,
}

// statusCodes gives the code of a response that carried no problem body
// (a load balancer's 502, say).
var statusCodes = map[int]string{
	http.StatusBadRequest:            "invalid",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusTooManyRequests:       "too_many",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusBadGateway:            "unavailable",
	http.StatusGatewayTimeout:        "unavailable",
	http.StatusInternalServerError:   "internal",
	http.StatusUnprocessableEntity:   "invalid_release",
}

// Error is an error answer of the idgen service: the fields of its
// application/problem+json body (RFC 9457), the HTTP status and the
// Retry-After the server advised, if any.
type Error struct {
	Status int    // HTTP status code
	Type   string // problem type URI, e.g. https://idgen.dev/problems/unavailable
	Title  string // short summary of the problem type
	Detail string // what went wrong with this request
	Code   string // idgen's problem code: invalid, not_found, unavailable, …
	// RetryAfter is the wait the server advised in a Retry-After header,
	// zero when it sent none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("idgen: ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	switch {
	case e.Detail != "":
		b.WriteString(": ")
		b.WriteString(e.Detail)
	case e.Title != "":
		b.WriteString(": ")
		b.WriteString(e.Title)
	}
	return b.String()
}

// Is reports whether target is the sentinel error of e's problem code, so
// that errors.Is(err, client.ErrNotFound) works on a wrapped *Error.
func (e *Error) Is(target error) bool {
	s, ok := codeErrors[e.Code]
	return ok && s == target
}

// Temporary reports whether a later attempt may succeed: 429, 502, 503, 504.
func (e *Error) Temporary() bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// newError builds the *Error for a non-2xx answer. A body that is not a
// problem (a proxy's HTML page) leaves only the status and a code derived
// from it.
func newError(status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Status: status, RetryAfter: parseRetryAfter(h.Get("Retry-After"), now)}
	var p problemjson.Body
	if json.Unmarshal(body, &p) == nil {
		e.Type, e.Title, e.Detail, e.Code = p.Type, p.Title, p.Detail, p.Code
	}
	if e.Code == "" {
		e.Code = statusCodes[status]
	}
	if e.Title == "" {
		e.Title = http.StatusText(status)
	}
	return e
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date. It returns 0 for an absent or malformed header.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		const maxSecs = int64(24 * time.Hour / time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// netError marks a failure to get an answer at all: the connection was
// refused or dropped, or the attempt timed out. Such attempts are retried.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// retryable reports whether err is worth another attempt.
func retryable(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.Temporary()
}

// failure reports whether err says the service is unhealthy, which the
// circuit breaker counts: network errors, 5xx and 429.
func failure(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && (e.Status >= 500 || e.Status == http.StatusTooManyRequests)
}
