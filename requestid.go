package idgen

import "math/rand/v2"

// Request IDs.
//
// Every call has an ID: the caller's X-Request-ID when it sends a valid one
// (ValidRequestID), else one the node makes up (NewRequestID). Every
// transport echoes it in its answer, puts it on every log line of the call
// and records it with what the call changes (the lease events, the audit
// lines of the admin API), so that an answer, a log line and a row of
// lease_events can be matched.

// MaxRequestIDLen is the longest request ID kept, in bytes.
const MaxRequestIDLen = 128

// RequestIDLen is the length of the IDs NewRequestID makes.
const RequestIDLen = 32

// ValidRequestID reports whether id is a request ID a node keeps: 1 to
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

// NewRequestID writes a new request ID into b: 32 hex digits of 128 bits
// from the runtime's random source (math/rand/v2: seeded at random per
// process, no lock). They identify calls, they protect nothing: 128 bits
// make two alike, here or on another node, as good as impossible.
func NewRequestID(b *[RequestIDLen]byte) {
	const digits = "0123456789abcdef"
	r0, r1 := rand.Uint64(), rand.Uint64()
	for i := range 16 { // constant indexes: no bounds checks
		b[i], b[16+i] = digits[r0&0xf], digits[r1&0xf]
		r0, r1 = r0>>4, r1>>4
	}
}

// RequestID returns the request ID of a call whose X-Request-ID values
// are given: the caller's, when it sent exactly one valid ID, else a new
// one.
func RequestID(given []string) string {
	if len(given) == 1 && ValidRequestID(given[0]) {
		return given[0]
	}
	var b [RequestIDLen]byte
	NewRequestID(&b)
	return string(b[:])
}

// Names every transport gives the request ID and the caller.
const (
	// HeaderRequestID is the request ID's header (HTTP) and metadata key
	// (gRPC), in the canonical form net/http gives header names
	// (X-Request-ID on the wire, in any case).
	HeaderRequestID = "X-Request-Id"
	// TraceAttrRequestID and TraceAttrCaller are the span attributes that
	// hold the request ID and the caller's token name.
	TraceAttrRequestID = "idgen.request_id"
	TraceAttrCaller    = "idgen.caller"
)
