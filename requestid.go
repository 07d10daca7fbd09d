package idgen

import "math/rand/v2"

// Request IDs. Every call has one: the caller's valid X-Request-ID, else a
// new one. Transports echo it, log it and record it with what the call
// changes, so answers, log lines and lease events can be matched.

// MaxRequestIDLen is the longest request ID kept, in bytes.
const MaxRequestIDLen = 128

// RequestIDLen is the length of the IDs NewRequestID makes.
const RequestIDLen = 32

// ValidRequestID reports whether id is 1 to MaxRequestIDLen bytes of
// printable ASCII without space, safe in headers, logs and columns.
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

// NewRequestID writes 32 hex digits (128 random bits, math/rand/v2: no
// lock) into b. They identify calls and protect nothing.
func NewRequestID(b *[RequestIDLen]byte) {
	const digits = "0123456789abcdef"
	r0, r1 := rand.Uint64(), rand.Uint64()
	for i := range 16 { // constant indexes: no bounds checks
		b[i], b[16+i] = digits[r0&0xf], digits[r1&0xf]
		r0, r1 = r0>>4, r1>>4
	}
}

// RequestID returns the caller's ID if it sent exactly one valid one, else
// a new one.
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
	// HeaderRequestID is the request ID's header and gRPC metadata key, in
	// net/http's canonical form.
	HeaderRequestID = "X-Request-Id"
	// TraceAttrRequestID and TraceAttrCaller are span attributes.
	TraceAttrRequestID = "idgen.request_id"
	TraceAttrCaller    = "idgen.caller"
)
