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

// Code names what went wrong, whatever the transport: the "code" member
// of an HTTP problem answer (and the last segment of its "type"), and, in
// upper case, the reason of the google.rpc.ErrorInfo of a gRPC error.
type Code string

// The codes, each a row of the one table (Codes).
const (
	// Invalid is bad input: a malformed or out-of-range parameter or body.
	Invalid Code = "invalid"
	// Unauthorized is a missing, malformed or unknown token.
	Unauthorized Code = "unauthorized"
	// Forbidden is a known token without the scope the call needs.
	Forbidden Code = "forbidden"
	// NotFound is an unknown namespace, route or lease, or an API that is
	// off (the admin API without an admin credential, the lease API
	// without a token of the leases scope or without worker IDs).
	NotFound Code = "not_found"
	// MethodNotAllowed is an HTTP method a route does not serve.
	MethodNotAllowed Code = "method_not_allowed"
	// Conflict is a request that conflicts with what exists: creating a
	// namespace that exists.
	Conflict Code = "conflict"
	// NamespaceExhausted is a namespace whose counter has fewer IDs left
	// below its limit than were asked for; no retry, here or on another
	// node, changes that.
	NamespaceExhausted Code = "namespace_exhausted"
	// NoWorkerAvailable is a lease acquisition that found every worker ID
	// of the pool held; one frees when its lease expires or is released.
	NoWorkerAvailable Code = "no_worker_available"
	// LeaseLost is a heartbeat or release of a lease that is not the
	// caller's at that fencing version (expired, taken over, evicted or
	// released): the holder must stop issuing and acquire afresh.
	LeaseLost Code = "lease_lost"
	// LeaseNotHeld is an eviction of a lease that nobody holds.
	LeaseNotHeld Code = "lease_not_held"
	// TooLarge is a request body or message above the limit.
	TooLarge Code = "too_large"
	// InvalidRelease is a release whose last timestamp lies above the
	// lease's committed ceiling or below its floor; the lease is unchanged.
	InvalidRelease Code = "invalid_release"
	// TooMany is a caller over its rate, or over its share of leases.
	TooMany Code = "too_many"
	// Unavailable is a node that cannot serve now: it cannot prove its
	// worker lease, or the database it needs is unreachable.
	Unavailable Code = "unavailable"
	// StorageFull is a node whose database is out of space and refuses
	// every write (etcd's NOSPACE alarm): no lease can be renewed and no
	// range fetched, on any node of the cluster, until an operator frees
	// space; the nodes serve again by themselves once it has.
	StorageFull Code = "storage_full"
	// Internal is an unexpected failure, whose cause is in the server's
	// log and never in the answer.
	Internal Code = "internal"
)

// CodeInfo is one row of the table of codes: what every transport makes
// of the code.
type CodeInfo struct {
	Code Code
	// HTTPStatus is the status of the code's problem answers.
	HTTPStatus int
	// GRPC is the gRPC status code of the code's gRPC errors.
	GRPC connect.Code
	// RetryLater says that the condition passes by itself: the answers
	// carry the delay to wait (Retry-After, google.rpc.RetryInfo).
	RetryLater bool
	// Title is the problem answer's title.
	Title string
}

// codes is the one table of codes, in the order of the constants. It is a
// function returning an array, not a variable, so that nothing can change
// it. docs/architecture.md explains each choice.
func codes() [16]CodeInfo {
	return [...]CodeInfo{
		{Invalid, http.StatusBadRequest, connect.CodeInvalidArgument, false, "Invalid request"},
		{Unauthorized, http.StatusUnauthorized, connect.CodeUnauthenticated, false, "Authentication required"},
		{Forbidden, http.StatusForbidden, connect.CodePermissionDenied, false, "Forbidden"},
		{NotFound, http.StatusNotFound, connect.CodeNotFound, false, "Not found"},
		{MethodNotAllowed, http.StatusMethodNotAllowed, connect.CodeUnimplemented, false, "Method not allowed"},
		{Conflict, http.StatusConflict, connect.CodeAlreadyExists, false, "Conflict"},
		// 409: the namespace's state refuses it, and no retry, here or on
		// another node, changes that (so not 503); the namespace exists
		// (so not 404).
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
		// 507: no other node can serve either (the database is shared), so
		// not 503, which sends callers and balancers to another node; it
		// passes once an operator has freed space, without a restart.
		{StorageFull, http.StatusInsufficientStorage, connect.CodeResourceExhausted, true, "Database out of space"},
		{Internal, http.StatusInternalServerError, connect.CodeInternal, false, "Internal error"},
	}
}

// Codes returns the table of codes.
func Codes() []CodeInfo {
	t := codes()
	return t[:]
}

// CodeOfStatus returns the first code of the table whose answers have the
// HTTP status given, false for none: the code of an answer without a body.
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

// storageFullRetry is the delay a StorageFull answer asks for: freeing
// space takes an operator minutes, not seconds.
const storageFullRetry = 30 * time.Second

// DefaultRetryAfter is the delay an answer of a code to retry later asks
// for when the error names none.
const DefaultRetryAfter = time.Second

// Error is a refusal, as every transport answers it: its code, a detail
// for the caller, the delay to ask for when the code is one to retry later,
// and the cause. Detail never holds a secret nor anything of the store: the
// cause, when set, is for the server's log alone.
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

// Retry returns the delay an answer to e asks for: its RetryAfter, at
// least DefaultRetryAfter, for a code to retry later; else 0.
func (e *Error) Retry() time.Duration {
	if !Info(e.Code).RetryLater {
		return 0
	}
	return max(e.RetryAfter, DefaultRetryAfter)
}

// ErrorDomain is the domain of the google.rpc.ErrorInfo that carries the
// code of every gRPC error of idgen's (its reason is the code in upper
// case).
const ErrorDomain = "idgen.dev"

// RetryAfterSeconds renders d as the value of a Retry-After header, which
// both transports send: whole seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(int64(math.Ceil(d.Seconds())), 1), 10)
}

// Errorf returns an *Error of code whose detail format describes.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorOf returns what a transport answers for err, from a call on
// namespace ("" for none): err itself when it is an *Error; for an error
// of the allocator and snowflake packages, the code of its sentinel with a
// detail in idgen's words (the store's own words stay in Err); for
// anything else Internal, whose detail points to the server's log.
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

// StoreError is ErrorOf for a call whose work is a store round trip (the
// admin API, the lease API, sequences): an error of no domain sentinel is
// the store failing, answered Unavailable with a retry a second later,
// unless the caller went away (context.Canceled), which stays Internal.
func StoreError(err error, name string) *Error {
	e := ErrorOf(err, name)
	if e.Code == Internal && !errors.Is(err, context.Canceled) {
		return &Error{Code: Unavailable, Detail: "the database is unavailable: retry later", RetryAfter: time.Second, Err: err}
	}
	return e
}

// refusalDelay is how long a caller should wait after a refusal of the
// keeper or generator: its own estimate when longer than a second, else a
// second.
func refusalDelay(err error) time.Duration {
	var re *snowflake.RefusalError
	if errors.As(err, &re) {
		return max(re.RetryAfter(), DefaultRetryAfter)
	}
	return DefaultRetryAfter
}

// invalidReleaseDetail is the refusal of a release with its figures, from
// allocator.ErrInvalidRelease on, without the store's prefix.
func invalidReleaseDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, allocator.ErrInvalidRelease.Error()); i >= 0 {
		msg = msg[i:]
	}
	return msg + "; the lease is unchanged"
}
