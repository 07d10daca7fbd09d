package allocator

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Block says how many IDs a holder issued under one lease since it last
// reported, and the span of timestamps (Unix ms) those IDs lie in: every
// one of them has FromMS <= timestamp <= ToMS. Keepers report it with
// their heartbeats, their release and the lost event for the audit trail
// (package audit); the stores ignore it. The zero Block reports nothing.
type Block struct {
	Count  int64
	FromMS int64
	ToMS   int64
}

// ClaimFloor returns the first timestamp (Unix ms) the holder of a claim
// may use, read from the detail of the claim's event (ClaimEvent): one
// above the previous ceiling it names. ok is false for a detail that names
// none (an event of another kind, or one written by hand).
func ClaimFloor(detail string) (floorMS int64, ok bool) {
	const marker = "previous ceiling "
	i := strings.LastIndex(detail, marker)
	if i < 0 {
		return 0, false
	}
	rest := detail[i+len(marker):]
	if j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		rest = rest[:j]
	}
	prev, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return 0, false
	}
	return prev + 1, true
}

// Validate reports a block no holder of a layout issuing perMS IDs per
// millisecond can have issued: a negative count, a span that is empty or
// starts at or before 0, or more IDs than the span's milliseconds hold.
// The zero Block is valid.
func (b Block) Validate(perMS int64) error {
	switch {
	case b == Block{}:
		return nil
	case b.Count < 0:
		return fmt.Errorf("issued count %d is negative", b.Count)
	case b.Count == 0:
		return fmt.Errorf("issued count 0 with a span %d-%d: leave the block out to report nothing", b.FromMS, b.ToMS)
	case b.FromMS <= 0 || b.ToMS < b.FromMS:
		return fmt.Errorf("issued span %d-%d: want 0 < from_ms <= to_ms (Unix milliseconds)", b.FromMS, b.ToMS)
	case perMS > 0 && (b.ToMS-b.FromMS+1) <= math.MaxInt64/perMS && b.Count > (b.ToMS-b.FromMS+1)*perMS:
		return fmt.Errorf("issued count %d exceeds the %d IDs per millisecond a worker ID can issue over %d-%d", b.Count, perMS, b.FromMS, b.ToMS)
	}
	return nil
}
