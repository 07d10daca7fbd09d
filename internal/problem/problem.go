// Package problem is idgen's one list of error codes and their gRPC mapping.
//
// A problem code names what went wrong, independently of the transport: it is
// the "code" member of every application/problem+json answer of the HTTP API
// (whose statuses httpapi maps), and, upper-cased, the reason of the
// google.rpc.ErrorInfo that every gRPC error of idgen carries. Table is the
// one table from codes to gRPC status codes:
//
//	code                  gRPC                 retry later
//	invalid               InvalidArgument
//	unauthorized          Unauthenticated
//	forbidden             PermissionDenied
//	not_found             NotFound
//	method_not_allowed    Unimplemented
//	conflict              AlreadyExists
//	namespace_exhausted   FailedPrecondition
//	no_worker_available   ResourceExhausted    yes
//	lease_lost            Aborted
//	lease_not_held        FailedPrecondition
//	too_large             InvalidArgument
//	invalid_release       FailedPrecondition
//	too_many              ResourceExhausted    yes
//	unavailable           Unavailable          yes
//	internal              Internal
//
// Errors whose code says "retry later" carry a google.rpc.RetryInfo with the
// delay the server asks for and a Retry-After header in whole seconds, as the
// HTTP API's 503 and 429 answers do. docs/architecture.md explains each
// choice.
package problem

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Code is a problem code: lower-case words joined by underscores.
type Code string

// The problem codes, with who answers them.
const (
	// Invalid is bad input: a malformed or out-of-range parameter or body.
	Invalid Code = "invalid"
	// Unauthorized is a missing, malformed or unknown token.
	Unauthorized Code = "unauthorized"
	// Forbidden is a known token without the scope the call needs.
	Forbidden Code = "forbidden"
	// NotFound is an unknown namespace, route or lease, or an API that is
	// off (the admin API without a token, the lease API without a token
	// with the leases scope).
	NotFound Code = "not_found"
	// MethodNotAllowed is an HTTP method a route does not serve.
	MethodNotAllowed Code = "method_not_allowed"
	// Conflict is a request that conflicts with what exists: creating a
	// namespace that exists.
	Conflict Code = "conflict"
	// NamespaceExhausted is a namespace whose counter has fewer IDs left
	// below its limit than were asked for; none were taken, and no retry,
	// here or on another node, changes that.
	NamespaceExhausted Code = "namespace_exhausted"
	// NoWorkerAvailable is a lease acquisition that found every worker ID of
	// the pool held; one frees when its lease expires or is released.
	NoWorkerAvailable Code = "no_worker_available"
	// LeaseLost is a heartbeat or release on a lease that is no longer the
	// caller's at that fencing version (taken over, evicted or released):
	// the holder must stop issuing at once and acquire afresh.
	LeaseLost Code = "lease_lost"
	// LeaseNotHeld is an eviction of a lease that nobody holds.
	LeaseNotHeld Code = "lease_not_held"
	// TooLarge is a request body above the server's limit.
	TooLarge Code = "too_large"
	// InvalidRelease is a release whose last timestamp lies above the
	// lease's committed ceiling or below its floor; the lease is unchanged.
	InvalidRelease Code = "invalid_release"
	// TooMany is a caller over its request rate.
	TooMany Code = "too_many"
	// Unavailable is a node that cannot serve now: it cannot prove its
	// worker lease, or the database it needs is unreachable.
	Unavailable Code = "unavailable"
	// Internal is an unexpected failure, whose detail is in the server's
	// log and never in the answer.
	Internal Code = "internal"
)

// Domain is the domain of the google.rpc.ErrorInfo of idgen's gRPC errors.
const Domain = "idgen.dev"

// Entry is one row of Table.
type Entry struct {
	Code Code
	// GRPC is the gRPC status code of the code's errors.
	GRPC connect.Code
	// RetryLater says that the condition passes by itself: errors with the
	// code carry a google.rpc.RetryInfo and a Retry-After header with the
	// delay after which the caller may try again.
	RetryLater bool
}

// table is the one list of codes. It is a function returning an array, not
// a variable, so that nothing can change it.
func table() [15]Entry {
	return [...]Entry{
		{Invalid, connect.CodeInvalidArgument, false},
		{Unauthorized, connect.CodeUnauthenticated, false},
		{Forbidden, connect.CodePermissionDenied, false},
		{NotFound, connect.CodeNotFound, false},
		{MethodNotAllowed, connect.CodeUnimplemented, false},
		{Conflict, connect.CodeAlreadyExists, false},
		{NamespaceExhausted, connect.CodeFailedPrecondition, false},
		{NoWorkerAvailable, connect.CodeResourceExhausted, true},
		{LeaseLost, connect.CodeAborted, false},
		{LeaseNotHeld, connect.CodeFailedPrecondition, false},
		{TooLarge, connect.CodeInvalidArgument, false},
		{InvalidRelease, connect.CodeFailedPrecondition, false},
		{TooMany, connect.CodeResourceExhausted, true},
		{Unavailable, connect.CodeUnavailable, true},
		{Internal, connect.CodeInternal, false},
	}
}

// Table returns every code with its gRPC mapping, in the order of the
// package documentation.
func Table() []Entry {
	t := table()
	return t[:]
}

// Lookup returns the entry of code, and false for a code not in the table.
func Lookup(code Code) (Entry, bool) {
	for _, e := range table() {
		if e.Code == code {
			return e, true
		}
	}
	return Entry{}, false
}

// defaultRetryAfter is the delay sent when a retry-later error names none:
// the HTTP API's smallest Retry-After.
const defaultRetryAfter = time.Second

// ConnectError returns the gRPC error for code: its status code, the
// message detail, a google.rpc.ErrorInfo naming the code, and for codes to
// retry later a google.rpc.RetryInfo of retryAfter (one second when it is
// zero or less) and a Retry-After header of at least one whole second.
//
// detail is sent to the caller: it must never hold a secret, and for
// Internal it should only point to the server's log. A code not in the
// table is answered as Internal.
func ConnectError(code Code, detail string, retryAfter time.Duration) *connect.Error {
	e, ok := Lookup(code)
	if !ok {
		e, _ = Lookup(Internal)
	}
	cerr := connect.NewError(e.GRPC, errors.New(detail))
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{
		Reason: Reason(e.Code),
		Domain: Domain,
	}); err == nil {
		cerr.AddDetail(d)
	}
	if e.RetryLater {
		if retryAfter <= 0 {
			retryAfter = defaultRetryAfter
		}
		if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); err == nil {
			cerr.AddDetail(d)
		}
		cerr.Meta().Set("Retry-After", retryAfterSeconds(retryAfter))
	}
	return cerr
}

// Reason returns the google.rpc.ErrorInfo reason for code: the code in upper
// case, as the ErrorInfo convention has it (UPPER_SNAKE_CASE).
func Reason(code Code) string { return strings.ToUpper(string(code)) }

// CodeOf returns the problem code of an error answered by idgen over gRPC
// (read from its google.rpc.ErrorInfo), and false when err carries none.
func CodeOf(err error) (Code, bool) {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return "", false
	}
	for _, d := range cerr.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return Code(strings.ToLower(info.GetReason())), true
		}
	}
	return "", false
}

// RetryDelay returns the delay of the google.rpc.RetryInfo that err carries,
// and false when it carries none.
func RetryDelay(err error) (time.Duration, bool) {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return 0, false
	}
	for _, d := range cerr.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.RetryInfo); ok && info.GetRetryDelay() != nil {
			return info.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// retryAfterSeconds renders d for a Retry-After header: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(max(s, 1), 10)
}
