package allocator

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Block is how many IDs a holder issued under a lease since its last
// report and their timestamp span [FromMS, ToMS] (Unix ms), for the audit
// trail; stores ignore it. The zero Block reports nothing.
type Block struct {
	Count  int64
	FromMS int64
	ToMS   int64
}

// ClaimFloor returns the first timestamp a claim's holder may use, from
// the claim event's detail (ClaimEvent); false if it names no ceiling.
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

// Validate reports a block no holder issuing perMS IDs per millisecond can
// have issued: negative count, bad span, or too many IDs. Zero is valid.
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
