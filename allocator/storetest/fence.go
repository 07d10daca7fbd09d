package storetest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// FencedStore is a store that can be fenced after a restore.
type FencedStore interface {
	allocator.Store
	allocator.RestoreFencer
}

// RunRestoreFence runs the restore-fence suite (allocator.RestoreFencer),
// each store on its own empty, migrated database.
func RunRestoreFence(t *testing.T, open func(t *testing.T) FencedStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s FencedStore)
	}{
		{"FreshStoreMark", testFreshStoreMark},
		{"FenceLeases", testFenceLeases},
		{"FenceCounters", testFenceCounters},
		{"FenceUpTo", testFenceUpTo},
		{"FenceNewRows", testFenceNewRows},
		{"FenceInvalid", testFenceInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

func mustMark(t *testing.T, s FencedStore) allocator.StoreMark {
	t.Helper()
	m, err := s.StoreMark(t.Context())
	if err != nil {
		t.Fatalf("StoreMark: %v", err)
	}
	return m
}

func mustFence(t *testing.T, s FencedStore, req allocator.FenceRequest) allocator.FenceResult {
	t.Helper()
	res, err := s.FenceRestore(t.Context(), req)
	if err != nil {
		t.Fatalf("FenceRestore(%+v): %v", req, err)
	}
	return res
}

// testFreshStoreMark: a new store has an identity, generation 0, no fence.
func testFreshStoreMark(t *testing.T, s FencedStore) {
	m := mustMark(t, s)
	if m.StoreID == "" || m.Generation != 0 || m.CeilingMS != 0 || len(m.Ceilings) != 0 || len(m.Counters) != 0 {
		t.Fatalf("fresh store: got mark %+v, want an ID, generation 0, no ceiling and no rows", m)
	}
	res := claim(t, s, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 1, Holder: "h", TTL: longTTL,
		CeilingMS: math.MaxInt64 / 2, MaxClockOffset: time.Second})
	mustCreate(t, s, sampleNamespace("orders"))
	seg := mustFetch(t, s, "orders", 7)
	m2 := mustMark(t, s)
	if m2.StoreID != m.StoreID {
		t.Errorf("store ID: got %q, want %q unchanged", m2.StoreID, m.StoreID)
	}
	if got, want := m2.Ceilings[res.Lease.LeaseKey], res.Lease.CeilingMS; got != want {
		t.Errorf("ceiling of %v: got %d, want %d", res.Lease.LeaseKey, got, want)
	}
	if got, want := len(m2.Ceilings), 2; got != want {
		t.Errorf("rows marked: got %d, want %d (the pool)", got, want)
	}
	if got, want := m2.Counters["orders"], seg.Namespace.MaxID; got != want {
		t.Errorf("counter of orders: got %d, want %d", got, want)
	}
}

// testFenceLeases: a fence takes every lease, raises every ceiling to store
// time + ttl + offset, records an event per row and bumps the generation.
func testFenceLeases(t *testing.T, s FencedStore) {
	ctx := t.Context()
	held := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 2, Holder: "node-a", TTL: longTTL,
		CeilingMS: math.MaxInt64 / 2, MaxClockOffset: time.Second})
	freed := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 2, Holder: "node-b", TTL: longTTL,
		CeilingMS: 1})
	release(t, s, freed.Lease, 0)
	before := listLeases(t, s)
	events := len(AllLeaseEvents(t, s))

	const ttl, offset = 3 * time.Second, 2 * time.Second
	res := mustFence(t, s, allocator.FenceRequest{MaxTTL: ttl, MaxClockOffset: offset, Gap: 10,
		Owner: "cli:ops", RequestID: "r-fence", Reason: "restored from last night's dump"})
	if got, want := res.Generation, int64(1); got != want {
		t.Errorf("generation: got %d, want %d", got, want)
	}
	if !plausible(res.At) {
		t.Errorf("fence time %v is not store time", res.At)
	}
	if got, want := res.CeilingMS, res.At.Add(ttl+offset).UnixMilli(); got != want {
		t.Errorf("fence ceiling: got %d, want store time + ttl + offset = %d", got, want)
	}
	after := listLeases(t, s)
	if len(after) != len(before) || len(res.Leases) != len(before) {
		t.Fatalf("rows: got %d after, %d fenced, want %d", len(after), len(res.Leases), len(before))
	}
	for i, b := range before {
		a := after[i]
		wantCeiling := max(b.CeilingMS, res.CeilingMS)
		if a.LeaseKey != b.LeaseKey || a.FencingVersion != b.FencingVersion+1 || a.Holder != "" || a.Owner != "" || a.CeilingMS != wantCeiling {
			t.Errorf("row %v after the fence: got version %d, holder %q, owner %q, ceiling %d; want version %d, free, ceiling %d",
				b.LeaseKey, a.FencingVersion, a.Holder, a.Owner, a.CeilingMS, b.FencingVersion+1, wantCeiling)
		}
		if f := res.Leases[i]; f.Lease.LeaseKey != b.LeaseKey || f.PrevHolder != b.Holder || f.PrevCeilingMS != b.CeilingMS || f.Lease.CeilingMS != wantCeiling {
			t.Errorf("result of row %v: got %+v, want previous holder %q and ceiling %d -> %d", b.LeaseKey, f, b.Holder, b.CeilingMS, wantCeiling)
		}
	}
	evs := AllLeaseEvents(t, s)[events:]
	if len(evs) != len(before) {
		t.Fatalf("events recorded: got %d, want one per row (%d)", len(evs), len(before))
	}
	for i, ev := range evs {
		b := before[i]
		if ev.Kind != allocator.EventFence || ev.LeaseKey != b.LeaseKey || ev.Holder != b.Holder || ev.FencingVersion != b.FencingVersion+1 ||
			ev.Owner != "cli:ops" || ev.RequestID != "r-fence" || !strings.Contains(ev.Detail, "restored from last night's dump") {
			t.Errorf("event %d: got %+v, want a fence of %v by cli:ops naming the reason", i, ev, b.LeaseKey)
		}
	}

	_, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: held.Lease.LeaseKey, Holder: "node-a",
		FencingVersion: held.Lease.FencingVersion, TTL: longTTL, CeilingMS: 1})
	if !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat of a holder from before the fence: got %v, want ErrLeaseLost", err)
	}
	next := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 2, Holder: "node-c", TTL: longTTL,
		CeilingMS: 1})
	if next.PrevCeilingMS < res.CeilingMS || next.Lease.FloorMS <= res.CeilingMS {
		t.Errorf("claim after the fence: got previous ceiling %d, floor %d; want above the fence's ceiling %d",
			next.PrevCeilingMS, next.Lease.FloorMS, res.CeilingMS)
	}
	m := mustMark(t, s)
	if m.Generation != 1 || m.CeilingMS != res.CeilingMS {
		t.Errorf("mark after the fence: got generation %d, ceiling %d; want 1, %d", m.Generation, m.CeilingMS, res.CeilingMS)
	}
	res2 := mustFence(t, s, allocator.FenceRequest{MaxTTL: ttl, MaxClockOffset: offset, Gap: 10})
	if res2.Generation != 2 {
		t.Errorf("second fence: got generation %d, want 2", res2.Generation)
	}
}

// testFenceCounters: every counter moves by the gap, up to its limit.
func testFenceCounters(t *testing.T, s FencedStore) {
	ctx := t.Context()
	plain := sampleNamespace("orders")
	plain.MaxIDLimit, plain.Fallback, plain.Mode = 0, allocator.FallbackNone, allocator.ModeBuffered
	mustCreate(t, s, plain)
	mustFetch(t, s, "orders", 100)
	near := sampleNamespace("invoices")
	near.MaxIDLimit = 1000
	mustCreate(t, s, near)
	mustFetch(t, s, "invoices", 9)
	gone := sampleNamespace("old")
	gone.MaxIDLimit, gone.Fallback = 0, allocator.FallbackNone
	mustCreate(t, s, gone)
	deleted, err := s.DeleteNamespace(ctx, "old")
	if err != nil {
		t.Fatalf("DeleteNamespace: %v", err)
	}
	o, inv := mustGet(t, s, "orders"), mustGet(t, s, "invoices")

	const gap = 1000
	res := mustFence(t, s, allocator.FenceRequest{MaxTTL: time.Second, Gap: gap})
	want := []allocator.FencedNamespace{
		{Name: "invoices", PrevMaxID: inv.MaxID, MaxID: 1000, PrevVersion: inv.Version, Version: inv.Version + gap, MaxIDLimit: 1000},
		{Name: "old", PrevMaxID: deleted.MaxID, MaxID: deleted.MaxID + gap, PrevVersion: deleted.Version, Version: deleted.Version + gap, Deleted: true},
		{Name: "orders", PrevMaxID: o.MaxID, MaxID: o.MaxID + gap, PrevVersion: o.Version, Version: o.Version + gap},
	}
	if len(res.Namespaces) != len(want) {
		t.Fatalf("namespaces fenced: got %+v, want %+v", res.Namespaces, want)
	}
	for i := range want {
		if res.Namespaces[i] != want[i] {
			t.Errorf("namespace %d: got %+v, want %+v", i, res.Namespaces[i], want[i])
		}
	}
	if !res.Namespaces[0].Exhausted() {
		t.Errorf("invoices at its limit: got not exhausted, want exhausted")
	}
	if got := mustGet(t, s, "orders"); got.MaxID != o.MaxID+gap || got.Version != o.Version+gap {
		t.Errorf("orders after the fence: got max_id %d version %d, want %d, %d", got.MaxID, got.Version, o.MaxID+gap, o.Version+gap)
	}
	if seg := mustFetch(t, s, "orders", 5); seg.Namespace.MaxID != o.MaxID+gap+5 {
		t.Errorf("first fetch after the fence: got max_id %d, want %d", seg.Namespace.MaxID, o.MaxID+gap+5)
	}
	if _, err := s.FetchSegment(ctx, "invoices", 1); !errors.Is(err, allocator.ErrNamespaceExhausted) {
		t.Errorf("fetch of invoices at its limit: got %v, want ErrNamespaceExhausted", err)
	}
	revived := sampleNamespace("old")
	revived.MaxIDLimit, revived.Fallback, revived.MaxID = 0, allocator.FallbackNone, deleted.MaxID+1
	if _, err := s.CreateNamespace(ctx, revived); !errors.Is(err, allocator.ErrInvalidNamespace) {
		t.Errorf("reviving old below its fenced counter: got %v, want ErrInvalidNamespace", err)
	}
	if m := mustMark(t, s); m.Counters["old"] != deleted.MaxID+gap || m.Counters["invoices"] != 1000 {
		t.Errorf("mark after the fence: got counters %v, want old %d and invoices 1000", m.Counters, deleted.MaxID+gap)
	}
}

// testFenceUpTo: every ceiling is at least the operator's time.
func testFenceUpTo(t *testing.T, s FencedStore) {
	low := claim(t, s, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 0, MaxWorkerID: 1, Holder: "a", TTL: longTTL, CeilingMS: 1})
	high := claim(t, s, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 0, MaxWorkerID: 1, Holder: "b", TTL: longTTL,
		CeilingMS: math.MaxInt64 / 2, MaxClockOffset: time.Hour})
	upTo := time.UnixMilli(high.Lease.CeilingMS - 1000)
	res := mustFence(t, s, allocator.FenceRequest{UpTo: upTo, MaxTTL: time.Hour, Gap: 1})
	if got, want := res.CeilingMS, upTo.UnixMilli(); got != want {
		t.Errorf("fence ceiling: got %d, want the up-to time %d", got, want)
	}
	for _, l := range listLeases(t, s) {
		want := upTo.UnixMilli()
		if l.LeaseKey == high.Lease.LeaseKey {
			want = high.Lease.CeilingMS
		}
		if l.CeilingMS != want {
			t.Errorf("ceiling of %v (low %v): got %d, want %d", l.LeaseKey, low.Lease.LeaseKey, l.CeilingMS, want)
		}
	}
}

// testFenceNewRows: a row created after a fence starts at its ceiling.
func testFenceNewRows(t *testing.T, s FencedStore) {
	res := mustFence(t, s, allocator.FenceRequest{MaxTTL: 2 * time.Second, MaxClockOffset: time.Second, Gap: 1})
	if len(res.Leases) != 0 {
		t.Fatalf("fence of an empty table: got %d rows, want none", len(res.Leases))
	}
	c := claim(t, s, allocator.ClaimRequest{DatacenterID: 4, MinWorkerID: 0, MaxWorkerID: 3, Holder: "a", TTL: longTTL, CeilingMS: 1})
	if c.PrevCeilingMS != res.CeilingMS || c.Lease.FloorMS != res.CeilingMS+1 {
		t.Errorf("claim of a row created after the fence: got previous ceiling %d, floor %d; want %d, %d",
			c.PrevCeilingMS, c.Lease.FloorMS, res.CeilingMS, res.CeilingMS+1)
	}
}

// testFenceInvalid: a request Validate refuses changes nothing.
func testFenceInvalid(t *testing.T, s FencedStore) {
	claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 1})
	mustCreate(t, s, sampleNamespace("orders"))
	before := mustMark(t, s)
	for _, req := range []allocator.FenceRequest{
		{Gap: 0},
		{Gap: -5},
		{Gap: 1, MaxTTL: -time.Second},
		{Gap: 1, Reason: strings.Repeat("x", allocator.MaxEvictReasonLen+1)},
		{Gap: 1, Owner: "bad\x00owner"},
	} {
		if _, err := s.FenceRestore(t.Context(), req); err == nil || errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("FenceRestore(%+v): got %v, want a validation error", req, err)
		}
	}
	after := mustMark(t, s)
	if after.Generation != before.Generation || after.Counters["orders"] != before.Counters["orders"] ||
		after.Ceilings[allocator.LeaseKey{}] != before.Ceilings[allocator.LeaseKey{}] {
		t.Errorf("after refused fences: got mark %+v, want %+v unchanged", after, before)
	}
}
