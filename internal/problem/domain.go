package problem

import (
	"errors"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// FromDomain returns the code of an error of the allocator or snowflake
// packages, and for codes to retry later the delay to ask for: the
// generator's own estimate when it refused with one longer than a second,
// else one second. An error it does not know is Internal: its text belongs
// in the server's log, not in the answer. Both the HTTP API and the gRPC
// API map domain errors through it.
func FromDomain(err error) (Code, time.Duration) {
	switch {
	case errors.Is(err, allocator.ErrUnavailable):
		return Unavailable, retryAfter(err)
	case errors.Is(err, allocator.ErrNamespaceNotFound):
		return NotFound, 0
	case errors.Is(err, allocator.ErrNamespaceExists):
		return Conflict, 0
	case errors.Is(err, allocator.ErrNamespaceExhausted):
		return NamespaceExhausted, 0
	case errors.Is(err, allocator.ErrNoWorkerAvailable):
		return NoWorkerAvailable, time.Second
	case errors.Is(err, allocator.ErrLeaseNotHeld):
		return LeaseNotHeld, 0
	case errors.Is(err, allocator.ErrLeaseLost):
		return LeaseLost, 0
	case errors.Is(err, allocator.ErrInvalidRelease):
		return InvalidRelease, 0
	case errors.Is(err, allocator.ErrInvalidNamespace),
		errors.Is(err, allocator.ErrInvalidCount),
		errors.Is(err, snowflake.ErrInvalidID):
		return Invalid, 0
	}
	return Internal, 0
}

// retryAfter is how long a client should wait after err: the refusal's own
// estimate when the generator gave one, else one second.
func retryAfter(err error) time.Duration {
	var re *snowflake.RefusalError
	if errors.As(err, &re) {
		if d := re.RetryAfter(); d > time.Second {
			return d
		}
	}
	return time.Second
}
