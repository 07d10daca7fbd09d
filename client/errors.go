package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// codeErrors maps the codes of idgen.Codes to the sentinel errors.
var codeErrors = map[string]error{}

func codeSentinel(code idgen.Code, text string) error {
	err := errors.New(text)
	codeErrors[string(code)] = err
	return err
}

// Sentinel errors. The first group stands for idgen.Codes; an *Error of
// that code matches with errors.Is.
var (
	ErrInvalid            = codeSentinel(idgen.Invalid, "idgen: invalid request")
	ErrUnauthorized       = codeSentinel(idgen.Unauthorized, "idgen: unauthorized")
	ErrForbidden          = codeSentinel(idgen.Forbidden, "idgen: forbidden")
	ErrNotFound           = codeSentinel(idgen.NotFound, "idgen: not found") // an unknown namespace, or an API that is off
	ErrMethodNotAllowed   = codeSentinel(idgen.MethodNotAllowed, "idgen: method not allowed")
	ErrConflict           = codeSentinel(idgen.Conflict, "idgen: conflict")
	ErrNamespaceExhausted = codeSentinel(idgen.NamespaceExhausted, "idgen: namespace exhausted")
	ErrNoWorkerAvailable  = codeSentinel(idgen.NoWorkerAvailable, "idgen: no worker ID available")
	ErrLeaseLost          = codeSentinel(idgen.LeaseLost, "idgen: lease lost")
	ErrLeaseNotHeld       = codeSentinel(idgen.LeaseNotHeld, "idgen: lease not held")
	ErrTooLarge           = codeSentinel(idgen.TooLarge, "idgen: request too large")
	ErrInvalidRelease     = codeSentinel(idgen.InvalidRelease, "idgen: invalid release")
	ErrTooMany            = codeSentinel(idgen.TooMany, "idgen: too many requests")
	ErrUnavailable        = codeSentinel(idgen.Unavailable, "idgen: unavailable")
	ErrStorageFull        = codeSentinel(idgen.StorageFull, "idgen: database out of space") // etcd's NOSPACE alarm: every node refuses until an operator frees space
	ErrInternal           = codeSentinel(idgen.Internal, "idgen: internal server error")

	// Why a Generator issued nothing; its errors match ErrUnavailable and
	// one of these (or a fence refusal).
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

// StaleRevisionError is returned for a strict namespace's answer whose
// revision is not above Previous: a database gone back in time or a
// replayed answer. Its IDs are not returned. Test with errors.As.
type StaleRevisionError struct {
	Namespace string
	Got       int64 // the answer's revision
	Previous  int64 // the highest revision seen before the request
}

func (e *StaleRevisionError) Error() string {
	return fmt.Sprintf("idgen client: namespace %q: stale answer: revision %d is not above %d, seen before", e.Namespace, e.Got, e.Previous)
}

func codeInfo(code string) (idgen.CodeInfo, bool) {
	row := idgen.Info(idgen.Code(code))
	return row, string(row.Code) == code
}

// codeOfStatus is the first code with status; unavailable for 502 or 504.
func codeOfStatus(status int) string {
	if status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
		return string(idgen.Unavailable)
	}
	code, _ := idgen.CodeOfStatus(status)
	return string(code)
}

// Error is an error answer of the idgen service: its problem+json fields
// and Retry-After (for the lease API, from idgen.Codes, without a Type).
type Error struct {
	Status int    // HTTP status code
	Type   string // problem type URI, e.g. https://idgen.dev/problems/unavailable
	Title  string // short summary of the problem type
	Detail string // what went wrong with this request
	Code   string // idgen's code: invalid, not_found, unavailable, … (idgen.Codes)
	// RetryAfter is the server's advised wait (Retry-After or RetryInfo).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := "idgen: " + strconv.Itoa(e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	switch {
	case e.Detail != "":
		s += ": " + e.Detail
	case e.Title != "":
		s += ": " + e.Title
	}
	return s
}

// Is matches the sentinel of e's problem code.
func (e *Error) Is(target error) bool {
	s, ok := codeErrors[e.Code]
	return ok && s == target
}

// Temporary reports whether idgen.Codes says to retry e's code later.
func (e *Error) Temporary() bool {
	row, ok := codeInfo(e.Code)
	if !ok {
		row, ok = codeInfo(codeOfStatus(e.Status))
	}
	return ok && row.RetryLater
}

// newError builds a non-2xx answer's *Error.
func newError(status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Status: status, RetryAfter: parseRetryAfter(h.Get("Retry-After"), now)}
	var p struct{ Type, Title, Detail, Code string }
	if json.Unmarshal(body, &p) == nil {
		e.Type, e.Title, e.Detail, e.Code = p.Type, p.Title, p.Detail, p.Code
	}
	if e.Code == "" {
		e.Code = codeOfStatus(status)
	}
	if e.Title == "" {
		e.Title = http.StatusText(status)
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 for none.
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

// netError marks an attempt that got no answer; it is retried.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.Temporary()
}

// failure reports whether the breaker counts err: network errors, 5xx, 429.
func failure(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && (e.Status >= 500 || e.Status == http.StatusTooManyRequests)
}
