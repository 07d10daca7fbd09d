package allocator

import (
	"fmt"
	"math"
	"time"
)

// Limits every Store enforces on a ClaimRequest.
const (
	// MaxHolderLen is the longest holder name, in bytes.
	MaxHolderLen = 255
	// MaxPoolSize bounds the worker IDs of one claim: Claim creates a row
	// for each of them.
	MaxPoolSize = 1 << 16
)

// Validate reports a claim request no store could carry out: no holder or
// one over MaxHolderLen bytes, a ttl under 1ms, negative or reversed IDs, a
// pool larger than MaxPoolSize, or a negative ceiling. Stores call it before
// touching the database.
func (r ClaimRequest) Validate() error {
	var problem string
	switch {
	case r.Holder == "" || len(r.Holder) > MaxHolderLen:
		problem = fmt.Sprintf("holder must have 1 to %d bytes", MaxHolderLen)
	case r.TTL < time.Millisecond:
		problem = fmt.Sprintf("ttl %s is below 1ms", r.TTL)
	case r.DatacenterID < 0 || r.DatacenterID > math.MaxInt32:
		problem = fmt.Sprintf("datacenter %d out of range", r.DatacenterID)
	case r.MinWorkerID < 0 || r.MaxWorkerID < r.MinWorkerID || r.MaxWorkerID > math.MaxInt32:
		problem = fmt.Sprintf("worker IDs %d..%d are not a range of non-negative IDs", r.MinWorkerID, r.MaxWorkerID)
	case r.MaxWorkerID-r.MinWorkerID >= MaxPoolSize:
		problem = fmt.Sprintf("pool of %d worker IDs is larger than %d", r.MaxWorkerID-r.MinWorkerID+1, MaxPoolSize)
	case r.CeilingMS < 0 || r.MaxPrevCeilingMS < 0:
		problem = "negative ceiling"
	default:
		return nil
	}
	return fmt.Errorf("invalid claim: %s", problem)
}

// ClaimEvent returns the lease event a claim records: a takeover when the
// row had another holder (whose lease had expired), an acquire otherwise.
func ClaimEvent(prevHolder, holder string, prevVersion, prevCeiling int64) (kind, detail string) {
	switch prevHolder {
	case "":
		return EventAcquire, fmt.Sprintf("free row, previous ceiling %d", prevCeiling)
	case holder:
		return EventAcquire, fmt.Sprintf("claimed again from version %d, previous ceiling %d", prevVersion, prevCeiling)
	default:
		return EventTakeover, fmt.Sprintf("taken over from %s at version %d, previous ceiling %d", prevHolder, prevVersion, prevCeiling)
	}
}

// ValidEventKind reports a lease event kind other than the Event constants.
func ValidEventKind(kind string) error {
	switch kind {
	case EventAcquire, EventTakeover, EventRelease, EventLost:
		return nil
	}
	return fmt.Errorf("unknown lease event kind %q", kind)
}
