package sqlstore

import (
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// FenceRowQuery reads store_fence's row; lock-capable dialects add a clause.
const FenceRowQuery = `SELECT store_id, generation, ceiling_ms FROM store_fence WHERE id = 1`

// CountersQuery reads every namespace counter (deleted too) in name order;
// dialects with row locks add theirs.
const CountersQuery = `SELECT namespace, max_id, max_id_limit, version, deleted_at IS NOT NULL FROM segments ORDER BY namespace`

// ScanCounter reads a CountersQuery row into a FencedNamespace.
func ScanCounter(row Scanner) (allocator.FencedNamespace, error) {
	var (
		n     allocator.FencedNamespace
		limit *int64
	)
	if err := row.Scan(&n.Name, &n.PrevMaxID, &limit, &n.PrevVersion, &n.Deleted); err != nil {
		return allocator.FencedNamespace{}, err
	}
	if limit != nil {
		n.MaxIDLimit = *limit
	}
	n.MaxID, n.Version = n.PrevMaxID, n.PrevVersion
	return n, nil
}

// FenceSteps are a dialect's restore-fence statements.
type FenceSteps struct {
	// Now returns the store's time.
	Now func() (time.Time, error)
	// Row reads store_fence's row, locked where possible.
	Row func() Scanner
	// Leases reads every row of worker_leases in key order, locked.
	Leases func() ([]allocator.Lease, error)
	// FenceLease fences row prev where its version is unchanged: version
	// + 1, no holder, owner or secret, expiry now, ceiling set; it returns
	// the row after.
	FenceLease func(prev allocator.Lease, ceiling int64) (allocator.Lease, error)
	// Record inserts a lease event at store time.
	Record func(allocator.LeaseEvent) error
	// Counters reads every namespace counter (CountersQuery), locked.
	Counters func() ([]allocator.FencedNamespace, error)
	// FenceCounter sets a namespace's max_id and version.
	FenceCounter func(name string, maxID, version int64) error
	// Bump writes store_fence's generation, ceiling, fenced_at and detail.
	Bump func(generation, ceiling int64, detail string) error
}

// Fence runs allocator.RestoreFencer.FenceRestore's steps in the caller's
// transaction: it frees every worker row with an EventFence, moves every
// counter by req.Gap and bumps the generation.
func (d Dialect) Fence(req allocator.FenceRequest, st FenceSteps) (allocator.FenceResult, error) {
	now, err := st.Now()
	if err != nil {
		return allocator.FenceResult{}, fmt.Errorf("%s: restore fence: read the clock: %w", d.Name, err)
	}
	var (
		storeID          string
		gen, prevCeiling int64
	)
	if err := st.Row().Scan(&storeID, &gen, &prevCeiling); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("%s: restore fence: read store_fence: %w", d.Name, err)
	}
	gen++
	ceiling := req.Ceiling(now)
	res := allocator.FenceResult{Generation: gen, At: now, CeilingMS: ceiling}
	leases, err := st.Leases()
	if err != nil {
		return allocator.FenceResult{}, fmt.Errorf("%s: restore fence: read worker leases: %w", d.Name, err)
	}
	for _, prev := range leases {
		c := max(prev.CeilingMS, ceiling)
		after, err := st.FenceLease(prev, c)
		if err != nil {
			return allocator.FenceResult{}, d.WorkerError("restore fence of", prev.LeaseKey, err)
		}
		err = st.Record(allocator.LeaseEvent{LeaseKey: prev.LeaseKey, Holder: prev.Holder, FencingVersion: after.FencingVersion,
			Kind: allocator.EventFence, Detail: allocator.FenceDetail(gen, prev.FencingVersion, prev.CeilingMS, c, req.Reason),
			Owner: req.Owner, RequestID: req.RequestID})
		if err != nil {
			return allocator.FenceResult{}, err
		}
		res.Leases = append(res.Leases, allocator.FencedLease{Lease: after, PrevHolder: prev.Holder, PrevCeilingMS: prev.CeilingMS})
	}
	counters, err := st.Counters()
	if err != nil {
		return allocator.FenceResult{}, fmt.Errorf("%s: restore fence: read namespace counters: %w", d.Name, err)
	}
	for _, n := range counters {
		n.MaxID, n.Version = allocator.FenceCounter(n.PrevMaxID, n.MaxIDLimit, n.PrevVersion, req.Gap)
		if err := st.FenceCounter(n.Name, n.MaxID, n.Version); err != nil {
			return allocator.FenceResult{}, fmt.Errorf("%s: restore fence of namespace %s: %w", d.Name, n.Name, err)
		}
		res.Namespaces = append(res.Namespaces, n)
	}
	detail := fmt.Sprintf("generation %d: %d worker rows to ceiling %d, %d namespaces by %d", gen, len(leases), ceiling, len(counters), req.Gap)
	if req.Owner != "" {
		detail += ", by " + req.Owner
	}
	if req.Reason != "" {
		detail += ": " + req.Reason
	}
	if err := st.Bump(gen, max(ceiling, prevCeiling), detail); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("%s: restore fence: write store_fence: %w", d.Name, err)
	}
	return res, nil
}

// StoreMark builds an allocator.StoreMark.
func (d Dialect) StoreMark(row Scanner, leases []allocator.Lease, counters []allocator.FencedNamespace) (allocator.StoreMark, error) {
	m := allocator.StoreMark{Ceilings: make(map[allocator.LeaseKey]int64, len(leases)), Counters: make(map[string]int64, len(counters))}
	if err := row.Scan(&m.StoreID, &m.Generation, &m.CeilingMS); err != nil {
		return allocator.StoreMark{}, fmt.Errorf("%s: read store_fence: %w", d.Name, err)
	}
	for _, l := range leases {
		m.Ceilings[l.LeaseKey] = l.CeilingMS
	}
	for _, n := range counters {
		m.Counters[n.Name] = n.PrevMaxID
	}
	return m, nil
}
