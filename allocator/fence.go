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
// Both protocols trust that a commit the store acknowledged stays written.
// Restoring a backup, or failing over to a replica that missed commits,
// breaks that for every row at once: ceilings, fencing versions and
// namespace counters all go back, and nodes started on such a store would
// hand out IDs they already gave. A restore fence (RestoreFencer.
// FenceRestore, `idgen restore-fence`) moves the whole store forward again
// in one transaction, before any node starts on it:
//
//   - every worker lease is taken from its holder (fencing_version + 1) and
//     its ceiling raised to FenceRequest.Ceiling: above any timestamp a
//     holder of the lost history can have used, so the next holder starts
//     above them;
//   - every namespace counter, deleted ones included, moves up by the gap
//     the operator states (FenceCounter);
//   - the store's generation goes up by one, and worker rows created later
//     start at the fence's ceiling (a pool widened after the backup was
//     taken has no rows in it).
//
// Detecting a restore that was not fenced needs a memory the restore cannot
// take back: a node's own record of what it saw (NodeMark, kept in a local
// file by internal/nodestate), compared at start with the store's
// (StoreMark). See NodeMark.Check for what it catches and what it cannot.

// ErrStoreBehind is returned by NodeMark.Check, and by a node refusing to
// start, when the store is behind what the node saw it commit: it was
// restored from a backup or failed over to a replica that missed commits,
// and was not fenced (or was fenced with a gap or ceiling too small).
var ErrStoreBehind = errors.New("the store is behind what this node saw it commit (restored or failed over without idgen restore-fence?)")

// EventFence is the kind of the lease event a restore fence records for
// every worker row.
const EventFence EventKind = "fence"

// Defaults of a restore fence.
const (
	// DefaultFenceGap is how far a fence moves every namespace counter
	// unless told otherwise: 2^32. It covers a namespace that handed out
	// fewer IDs than that between the backup and the restore; state the
	// gap (FenceRequest.Gap) when you know the rate and the time lost.
	DefaultFenceGap int64 = 1 << 32
	// DefaultFenceMaxTTL is the longest lease ttl a fence assumes a holder
	// had unless told otherwise: the lease API's default longest lease
	// (five minutes), which is longer than a node's default ttl.
	DefaultFenceMaxTTL = 5 * time.Minute
)

// RestoreFencer is implemented by the stores that can be fenced after a
// restore: PostgreSQL, MySQL, SQLite and etcd (which fences key by key, not
// in one transaction: see allocator/etcd). allocator/storetest
// (RunRestoreFence) holds them to it.
type RestoreFencer interface {
	// FenceRestore fences the store in one transaction, at the store's
	// isolation (see Store): every row of worker_leases gets
	// fencing_version + 1, holder, owner and secret NULL, expires_at =
	// store time, and ts_ceiling_ms = max(ts_ceiling_ms,
	// req.Ceiling(store time)), with an EventFence naming the previous
	// holder, req.Owner and req.RequestID; every row of segments, deleted
	// or not, gets the max_id and version FenceCounter returns for
	// req.Gap; the store's generation goes up by one and its fence
	// ceiling becomes req.Ceiling(store time), the ceiling of worker rows
	// created later. A request its Validate method refuses changes
	// nothing.
	FenceRestore(ctx context.Context, req FenceRequest) (FenceResult, error)

	// StoreMark returns what a node compares its NodeMark with at start:
	// the store's identity and generation, every worker row's ceiling and
	// every namespace's counter, deleted ones included.
	StoreMark(ctx context.Context) (StoreMark, error)
}

// FenceRequest asks a RestoreFencer to fence a restored store.
type FenceRequest struct {
	// UpTo, when not zero, is the operator's word that no Snowflake ID was
	// issued with a timestamp after it: the ceiling every row gets at
	// least. When zero, the ceiling is store time + MaxTTL +
	// MaxClockOffset: a holder's ceiling is never committed further ahead
	// of store time than its ttl and the clock offset allowed, and no
	// holder of the lost history committed after now.
	UpTo time.Time
	// MaxTTL is the longest lease ttl any holder had (node or lease API),
	// MaxClockOffset the largest clock offset allowed (--max-clock-offset).
	MaxTTL         time.Duration
	MaxClockOffset time.Duration
	// Gap is how far every namespace counter moves: at least the IDs any
	// namespace handed out that the restored store does not know of.
	Gap int64
	// Owner (the operator), RequestID and Reason go into every event.
	Owner     string
	RequestID string
	Reason    string
}

// Validate reports a fence no store could carry out: a gap below 1, a
// negative ttl or offset, UpTo before the Unix epoch, or an owner,
// request ID or reason that is too long or not UTF-8. Stores call it
// before touching the database.
func (r FenceRequest) Validate() error {
	return invalidRequest("restore fence",
		problemIf(r.Gap < 1, "gap %d is below 1", r.Gap),
		problemIf(r.MaxTTL < 0 || r.MaxClockOffset < 0, "negative ttl %s or clock offset %s", r.MaxTTL, r.MaxClockOffset),
		problemIf(!r.UpTo.IsZero() && r.UpTo.UnixMilli() < 0, "up-to time %s is before 1970", r.UpTo.Format(time.RFC3339)),
		callerProblem(r.Owner, r.RequestID),
		textProblem("reason", r.Reason, MaxEvictReasonLen))
}

// Ceiling returns the ceiling (Unix ms) a fence at store time now gives
// every worker row at least: UpTo when set, else now + MaxTTL +
// MaxClockOffset.
func (r FenceRequest) Ceiling(now time.Time) int64 {
	if !r.UpTo.IsZero() {
		return r.UpTo.UnixMilli()
	}
	return now.Add(r.MaxTTL + r.MaxClockOffset).UnixMilli()
}

// FenceCounter returns the max_id and version a fence with gap leaves to a
// namespace counter at maxID and version with limit (0 for none): max_id
// moves up by gap, but never past the limit (a namespace that reaches it
// is exhausted, which is safe: it hands out nothing more), and the version,
// a strict namespace's revision, moves up by the gap too, so that callers
// who saw revisions of the lost history do not see them again. Neither
// overflows.
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

// FenceDetail returns the detail of the event a fence of generation
// records for a row whose ceiling went from prev to ceiling.
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
	// At is the store time of the fence, CeilingMS the ceiling every
	// worker row has at least after it.
	At        time.Time
	CeilingMS int64
	// Leases are the worker rows after the fence, with what they held
	// before.
	Leases []FencedLease
	// Namespaces are the namespace counters, in byte order of the name.
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
	// StoreID is a random identity the store got when its schema was
	// created; a restored copy keeps it.
	StoreID string
	// Generation counts the fences of the store; CeilingMS is the ceiling
	// of the last one, which worker rows it did not see start at.
	Generation int64
	CeilingMS  int64
	// Ceilings holds every worker row's ts_ceiling_ms; Counters every
	// namespace's max_id, deleted ones included.
	Ceilings map[LeaseKey]int64
	Counters map[string]int64
}

// NodeMark is what one node saw the store commit: the store's identity and
// generation when it last started, and for every worker row and namespace
// the lowest value the store must still have, since the node saw it
// committed (or, for a release or tail return, wrote it itself). Nothing
// but a restore or a lossy failover moves a store below it: ceilings only
// rise except on a release, which never goes below the last timestamp the
// holder used, and counters only rise except on a tail return, which
// never goes below the last ID handed out.
type NodeMark struct {
	StoreID    string
	Generation int64
	Ceilings   map[LeaseKey]int64
	Counters   map[string]int64
}

// Check compares m, what this node saw, with s, what the store holds now.
// It returns nil when the store is at or past everything m records, and an
// error wrapping ErrStoreBehind naming what went back otherwise: a
// generation below m's (the store is older than a fence this node saw), a
// worker ceiling or namespace counter below m's, or a namespace m knows
// that the store does not have (it was created after the backup). A worker
// row the store does not have counts as s.CeilingMS, the ceiling a new
// row gets. A mark of another store (another StoreID, or none) is no
// evidence either way: Check returns nil and the caller starts a fresh
// mark.
//
// What it cannot see: a store restored and fenced enough passes, as it
// should; a restore behind a node that kept no mark (a new node, a pod
// whose disk went with it) passes; and a node sees only its own leases'
// ceilings and the counters of the namespaces it fetched from, so the
// commits lost of other nodes are caught only by their own checks.
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
