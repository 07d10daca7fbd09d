package idgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Code names what went wrong, whatever the transport: the HTTP problem's
// "code" (and last segment of "type"), upper-cased the gRPC ErrorInfo reason.
type Code string

// The codes, each a row of the table (Codes).
const (
	// Invalid is bad input.
	Invalid Code = "invalid"
	// Unauthorized is a missing, malformed or unknown token.
	Unauthorized Code = "unauthorized"
	// Forbidden is a known token without the scope the call needs.
	Forbidden Code = "forbidden"
	// NotFound is an unknown namespace, route or lease, or an API that is off.
	NotFound Code = "not_found"
	// MethodNotAllowed is an HTTP method a route does not serve.
	MethodNotAllowed Code = "method_not_allowed"
	// Conflict is a request conflicting with what exists (a namespace).
	Conflict Code = "conflict"
	// NamespaceExhausted is a namespace with fewer IDs left below its limit
	// than asked for; no retry, on any node, helps.
	NamespaceExhausted Code = "namespace_exhausted"
	// NoWorkerAvailable: every worker ID of the pool is held until a lease
	// expires or is released.
	NoWorkerAvailable Code = "no_worker_available"
	// LeaseLost: the lease is no longer the caller's at that version; the
	// holder must stop issuing and acquire afresh.
	LeaseLost Code = "lease_lost"
	// LeaseNotHeld is an eviction of a lease that nobody holds.
	LeaseNotHeld Code = "lease_not_held"
	// TooLarge is a request body or message above the limit.
	TooLarge Code = "too_large"
	// InvalidRelease is a release whose last timestamp lies outside the
	// lease's floor and ceiling; the lease is unchanged.
	InvalidRelease Code = "invalid_release"
	// TooMany is a caller over its rate, or over its share of leases.
	TooMany Code = "too_many"
	// Unavailable: the node cannot prove its lease or reach its database.
	Unavailable Code = "unavailable"
	// StorageFull: the database is out of space and refuses writes on every
	// node until an operator frees space; nodes recover by themselves.
	StorageFull Code = "storage_full"
	// Internal is an unexpected failure; the cause is only in the log.
	Internal Code = "internal"
)

// CodeInfo is one row of the code table.
type CodeInfo struct {
	Code Code
	// HTTPStatus is the status of the code's problem answers.
	HTTPStatus int
	// GRPC is the gRPC status code of the code's gRPC errors.
	GRPC connect.Code
	// RetryLater: the condition passes by itself; answers carry a delay.
	RetryLater bool
	// Title is the problem answer's title.
	Title string
}

// codes is the code table, in constant order; a function so nothing can
// change it. docs/architecture.md explains each choice.
func codes() [16]CodeInfo {
	return [...]CodeInfo{
		{Invalid, http.StatusBadRequest, connect.CodeInvalidArgument, false, "Invalid request"},
		{Unauthorized, http.StatusUnauthorized, connect.CodeUnauthenticated, false, "Authentication required"},
		{Forbidden, http.StatusForbidden, connect.CodePermissionDenied, false, "Forbidden"},
		{NotFound, http.StatusNotFound, connect.CodeNotFound, false, "Not found"},
		{MethodNotAllowed, http.StatusMethodNotAllowed, connect.CodeUnimplemented, false, "Method not allowed"},
		{Conflict, http.StatusConflict, connect.CodeAlreadyExists, false, "Conflict"},
		// 409: no retry anywhere helps (not 503); the namespace exists (not 404).
		{NamespaceExhausted, http.StatusConflict, connect.CodeFailedPrecondition, false, "Namespace exhausted"},
		{NoWorkerAvailable, http.StatusConflict, connect.CodeResourceExhausted, true, "No worker ID available"},
		// 409: the same call can never succeed; the holder acquires afresh.
		{LeaseLost, http.StatusConflict, connect.CodeAborted, false, "Lease lost"},
		{LeaseNotHeld, http.StatusConflict, connect.CodeFailedPrecondition, false, "Lease not held"},
		{TooLarge, http.StatusRequestEntityTooLarge, connect.CodeResourceExhausted, false, "Request body too large"},
		// 422: well-formed, but a timestamp the holder cannot have used.
		{InvalidRelease, http.StatusUnprocessableEntity, connect.CodeFailedPrecondition, false, "Invalid release"},
		{TooMany, http.StatusTooManyRequests, connect.CodeResourceExhausted, true, "Too many requests"},
		{Unavailable, http.StatusServiceUnavailable, connect.CodeUnavailable, true, "Service unavailable"},
		// 507: no other node can serve either (shared database), so not 503,
		// which sends callers elsewhere; passes once space is freed.
		{StorageFull, http.StatusInsufficientStorage, connect.CodeResourceExhausted, true, "Database out of space"},
		{Internal, http.StatusInternalServerError, connect.CodeInternal, false, "Internal error"},
	}
}

// Codes returns the table of codes.
func Codes() []CodeInfo {
	t := codes()
	return t[:]
}

// CodeOfStatus returns the first code with this HTTP status (for an
// answer without a body), false for none.
func CodeOfStatus(status int) (Code, bool) {
	for _, e := range codes() {
		if e.HTTPStatus == status {
			return e.Code, true
		}
	}
	return "", false
}

// Info returns the row of code; a code not in the table gets Internal's.
func Info(code Code) CodeInfo {
	t := codes()
	for _, e := range t {
		if e.Code == code {
			return e
		}
	}
	return t[len(t)-1]
}

// storageFullRetry: freeing space takes an operator minutes.
const storageFullRetry = 30 * time.Second

// DefaultRetryAfter is the delay of a retry-later answer naming none.
const DefaultRetryAfter = time.Second

// Error is a refusal as every transport answers it. Detail never holds a
// secret or anything of the store; Err is for the server's log alone.
type Error struct {
	Code       Code
	Detail     string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Detail + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// Retry returns e's delay (at least DefaultRetryAfter) for a retry-later
// code, else 0.
func (e *Error) Retry() time.Duration {
	if !Info(e.Code).RetryLater {
		return 0
	}
	return max(e.RetryAfter, DefaultRetryAfter)
}

// ErrorDomain is the domain of idgen's gRPC ErrorInfo.
const ErrorDomain = "idgen.dev"

// RetryAfterSeconds renders d as a Retry-After value: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(int64(math.Ceil(d.Seconds())), 1), 10)
}

// Errorf returns an *Error of code whose detail format describes.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorOf returns what a transport answers for err on namespace ("" for
// none): an *Error as is; an allocator or snowflake sentinel's code with
// idgen's wording (the store's words stay in Err); else Internal.
func ErrorOf(err error, namespace string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	ns := "the namespace"
	if namespace != "" {
		ns = fmt.Sprintf("namespace %q", namespace)
	}
	out := &Error{Err: err}
	switch {
	case errors.Is(err, allocator.ErrStoreFull):
		out.Code, out.RetryAfter = StorageFull, storageFullRetry
		out.Detail = "the database is out of space and refuses every write (etcd: the NOSPACE alarm is raised), " +
			"so no node can renew its lease or fetch a range; an operator must free space " +
			"(compact, defragment, disarm the alarm: docs/operations.md), then the nodes serve again"
		if namespace != "" {
			out.Detail = ns + " cannot be served: " + out.Detail
		}
	case errors.Is(err, allocator.ErrUnavailable):
		out.Code, out.RetryAfter = Unavailable, refusalDelay(err)
		out.Detail = err.Error() // the keeper's and generator's words
		if namespace != "" {
			out.Detail = ns + " cannot be served now: retry later or call another node"
		}
	case errors.Is(err, allocator.ErrNamespaceNotFound):
		out.Code, out.Detail = NotFound, ns+" does not exist"
	case errors.Is(err, allocator.ErrNamespaceExists):
		out.Code, out.Detail = Conflict, ns+" exists already"
	case errors.Is(err, allocator.ErrNamespaceExhausted):
		out.Code, out.Detail = NamespaceExhausted, ns+" is exhausted: fewer IDs are left below its limit than were asked for"
	case errors.Is(err, allocator.ErrNoWorkerAvailable):
		out.Code, out.Detail = NoWorkerAvailable, "every worker ID of the pool is held"
	case errors.Is(err, allocator.ErrLeaseNotHeld):
		out.Code, out.Detail = LeaseNotHeld, "nobody holds the lease"
	case errors.Is(err, allocator.ErrLeaseLost):
		out.Code, out.Detail = LeaseLost, "the lease is not held at that fencing version"
	case errors.Is(err, allocator.ErrInvalidRelease):
		out.Code, out.Detail = InvalidRelease, invalidReleaseDetail(err)
	case errors.Is(err, allocator.ErrInvalidNamespace),
		errors.Is(err, allocator.ErrInvalidCount),
		errors.Is(err, snowflake.ErrInvalidID),
		errors.Is(err, snowflake.ErrInvalidFormat),
		errors.Is(err, snowflake.ErrOutOfRange):
		out.Code, out.Detail = Invalid, err.Error() // the domain's validation words
	default:
		out.Code, out.Detail = Internal, "internal error; see the server log"
	}
	return out
}

// StoreError is ErrorOf for store round trips: an error of no sentinel is
// the store failing, Unavailable with a one-second retry, unless the
// caller went away (context.Canceled), which stays Internal.
func StoreError(err error, name string) *Error {
	e := ErrorOf(err, name)
	if e.Code == Internal && !errors.Is(err, context.Canceled) {
		return &Error{Code: Unavailable, Detail: "the database is unavailable: retry later", RetryAfter: time.Second, Err: err}
	}
	return e
}

// refusalDelay is the keeper's or generator's estimate, at least a second.
func refusalDelay(err error) time.Duration {
	var re *snowflake.RefusalError
	if errors.As(err, &re) {
		return max(re.RetryAfter(), DefaultRetryAfter)
	}
	return DefaultRetryAfter
}

// invalidReleaseDetail is a release refusal's figures, without the store's
// prefix.
func invalidReleaseDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, allocator.ErrInvalidRelease.Error()); i >= 0 {
		msg = msg[i:]
	}
	return msg + "; the lease is unchanged"
}
