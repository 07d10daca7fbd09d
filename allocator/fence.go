package allocator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Restore fencing.
//
// Restoring a backup, or failing over to a replica that missed commits,
// takes back acknowledged commits: ceilings, fencing versions and counters
// go back. A restore fence (RestoreFencer.FenceRestore, `idgen
// restore-fence`) moves the store forward again in one transaction before
// any node starts: every lease is taken and its ceiling raised to
// FenceRequest.Ceiling, every counter (deleted ones too) moves up by the
// gap (FenceCounter), and the generation goes up, with later worker rows
// starting at the fence's ceiling.
//
// An unfenced restore is detected by comparing a node's local record
// (NodeMark, internal/nodestate) with the store's (StoreMark); see
// NodeMark.Check.

// ErrStoreBehind: the store is behind what a node saw it commit (restored
// or failed over without a sufficient fence).
var ErrStoreBehind = errors.New("the store is behind what this node saw it commit (restored or failed over without idgen restore-fence?)")

// EventFence is the lease event a restore fence records for every row.
const EventFence EventKind = "fence"

// Defaults of a restore fence.
const (
	// DefaultFenceGap is how far a fence moves every counter by default:
	// 2^32. State the gap when you know the rate and the time lost.
	DefaultFenceGap int64 = 1 << 32
	// DefaultFenceMaxTTL is the longest lease ttl a fence assumes by
	// default: the lease API's longest lease (five minutes).
	DefaultFenceMaxTTL = 5 * time.Minute
)

// RestoreFencer is implemented by stores that can be fenced after a
// restore (etcd key by key, not in one transaction); checked by
// allocator/storetest (RunRestoreFence).
type RestoreFencer interface {
	// FenceRestore fences the store in one transaction: every lease row
	// gets fencing_version + 1, holder, owner and secret NULL, expires_at =
	// store time, ts_ceiling_ms = max(itself, req.Ceiling(store time)) and
	// an EventFence; every segments row the FenceCounter values; the
	// generation + 1 and the fence ceiling req.Ceiling(store time). A
	// request its Validate refuses changes nothing.
	FenceRestore(ctx context.Context, req FenceRequest) (FenceResult, error)

	// StoreMark returns what a node compares its NodeMark with at start.
	StoreMark(ctx context.Context) (StoreMark, error)
}

// FenceRequest asks a RestoreFencer to fence a restored store.
type FenceRequest struct {
	// UpTo, when not zero, is the operator's word that no ID was issued
	// after it. When zero, the ceiling is store time + MaxTTL +
	// MaxClockOffset, beyond any ceiling a lost holder could commit.
	UpTo time.Time
	// MaxTTL is the longest lease ttl any holder had (node or lease API),
	// MaxClockOffset the largest clock offset allowed (--max-clock-offset).
	MaxTTL         time.Duration
	MaxClockOffset time.Duration
	// Gap is how far every counter moves: at least the IDs lost.
	Gap int64
	// Owner (the operator), RequestID and Reason go into every event.
	Owner     string
	RequestID string
	Reason    string
}

// Validate reports a fence no store could carry out. Stores call it first.
func (r FenceRequest) Validate() error {
	return invalidRequest("restore fence",
		problemIf(r.Gap < 1, "gap %d is below 1", r.Gap),
		problemIf(r.MaxTTL < 0 || r.MaxClockOffset < 0, "negative ttl %s or clock offset %s", r.MaxTTL, r.MaxClockOffset),
		problemIf(!r.UpTo.IsZero() && r.UpTo.UnixMilli() < 0, "up-to time %s is before 1970", r.UpTo.Format(time.RFC3339)),
		callerProblem(r.Owner, r.RequestID),
		textProblem("reason", r.Reason, MaxEvictReasonLen))
}

// Ceiling returns the least ceiling a fence at store time now gives:
// UpTo when set, else now + MaxTTL + MaxClockOffset.
func (r FenceRequest) Ceiling(now time.Time) int64 {
	if !r.UpTo.IsZero() {
		return r.UpTo.UnixMilli()
	}
	return now.Add(r.MaxTTL + r.MaxClockOffset).UnixMilli()
}

// FenceCounter returns the max_id and version a fence with gap leaves:
// max_id up by gap but never past limit (0: none; reaching it exhausts
// the namespace, which is safe), the version (a strict revision) up by
// gap too so old revisions are not seen again. Neither overflows.
func FenceCounter(maxID, limit, version, gap int64) (newMaxID, newVersion int64) {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	newMaxID = limit
	if maxID <= limit-gap {
		newMaxID = max(maxID+gap, maxID)
	}
	newVersion = math.MaxInt64
	if version <= math.MaxInt64-gap {
		newVersion = version + gap
	}
	return newMaxID, newVersion
}

// FenceDetail returns the detail of a fence's event for one row.
func FenceDetail(generation, prevVersion, prevCeiling, ceiling int64, reason string) string {
	d := fmt.Sprintf("restore fence, generation %d: version %d -> %d, ceiling %d -> %d",
		generation, prevVersion, prevVersion+1, prevCeiling, ceiling)
	if reason != "" {
		d += ": " + reason
	}
	return d
}

// FenceResult is what a fence did.
type FenceResult struct {
	// Generation is the store's generation after the fence.
	Generation int64
	// At is the fence's store time, CeilingMS every row's least ceiling.
	At        time.Time
	CeilingMS int64
	// Leases are the worker rows after the fence.
	Leases []FencedLease
	// Namespaces are the counters, by name.
	Namespaces []FencedNamespace
}

// FencedLease is one worker row a fence changed.
type FencedLease struct {
	Lease         Lease // the row after the fence
	PrevHolder    string
	PrevCeilingMS int64
}

// FencedNamespace is one namespace counter a fence moved.
type FencedNamespace struct {
	Name                 string
	PrevMaxID, MaxID     int64
	PrevVersion, Version int64
	MaxIDLimit           int64 // 0 for none
	Deleted              bool
}

// Exhausted reports whether the fence moved the counter to its limit.
func (n FencedNamespace) Exhausted() bool { return n.MaxIDLimit > 0 && n.MaxID >= n.MaxIDLimit }

// StoreMark is the store's side of the restore check (NodeMark.Check).
type StoreMark struct {
	// StoreID is a random identity from schema creation; a restore keeps it.
	StoreID string
	// Generation counts fences; CeilingMS is the last one's ceiling.
	Generation int64
	CeilingMS  int64
	// Ceilings holds every worker row's ceiling; Counters every max_id.
	Ceilings map[LeaseKey]int64
	Counters map[string]int64
}

// NodeMark is what one node saw the store commit: identity, generation,
// and the lowest ceiling and counter the store must still have. Only a
// restore or lossy failover moves a store below them (releases and tail
// returns never go below what was used).
type NodeMark struct {
	StoreID    string
	Generation int64
	Ceilings   map[LeaseKey]int64
	Counters   map[string]int64
}

// Check returns nil when s is at or past everything m records, else an
// error wrapping ErrStoreBehind naming what went back: generation,
// ceiling, counter, or a namespace missing. A missing worker row counts
// as s.CeilingMS. A mark of another store returns nil (start a fresh one).
//
// A restore fenced enough passes, as it should; a restore behind a node
// with no mark, or other nodes' lost commits, go unseen.
func (m NodeMark) Check(s StoreMark) error {
	if m.StoreID == "" || m.StoreID != s.StoreID {
		return nil
	}
	var behind []string
	if m.Generation > s.Generation {
		behind = append(behind, fmt.Sprintf("generation %d, this node saw %d", s.Generation, m.Generation))
	}
	keys := make([]LeaseKey, 0, len(m.Ceilings))
	for k := range m.Ceilings {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b LeaseKey) int {
		return cmp.Or(cmp.Compare(a.DatacenterID, b.DatacenterID), cmp.Compare(a.WorkerID, b.WorkerID))
	})
	for _, k := range keys {
		c, ok := s.Ceilings[k]
		if !ok {
			c = s.CeilingMS
		}
		if c < m.Ceilings[k] {
			behind = append(behind, fmt.Sprintf("worker %d/%d ceiling %d, this node saw %d", k.DatacenterID, k.WorkerID, c, m.Ceilings[k]))
		}
	}
	names := make([]string, 0, len(m.Counters))
	for n := range m.Counters {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c, ok := s.Counters[n]
		switch {
		case !ok:
			behind = append(behind, fmt.Sprintf("namespace %s missing, this node saw max_id %d", n, m.Counters[n]))
		case c < m.Counters[n]:
			behind = append(behind, fmt.Sprintf("namespace %s max_id %d, this node saw %d", n, c, m.Counters[n]))
		}
	}
	if len(behind) == 0 {
		return nil
	}
	const shown = 5
	more := ""
	if len(behind) > shown {
		more = fmt.Sprintf(" and %d more", len(behind)-shown)
		behind = behind[:shown]
	}
	return fmt.Errorf("%w: %s%s", ErrStoreBehind, strings.Join(behind, "; "), more)
}
