package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// The lease API's groundwork: floors and the release rule, owners and
// request IDs, eviction, and the events reader and pruning.

// testClaimRecordsFloor: a claim's floor is one above the ceiling found.
func testClaimRecordsFloor(t *testing.T, s allocator.Store) {
	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 1000}
	first := claim(t, s, req)
	if first.Lease.FloorMS != 1 {
		t.Errorf("claim of a fresh row: floor %d, want 1 (previous ceiling 0 + 1)", first.Lease.FloorMS)
	}
	// A claim of one's own lease again: the previous ceiling is its own.
	req.CeilingMS = 2000
	again := claim(t, s, req)
	if again.PrevCeilingMS != 1000 || again.Lease.FloorMS != 1001 || again.Lease.CeilingMS != 2000 {
		t.Errorf("claim again: previous ceiling %d floor %d ceiling %d, want 1000 1001 2000",
			again.PrevCeilingMS, again.Lease.FloorMS, again.Lease.CeilingMS)
	}
	if got := listLeases(t, s)[0]; got.FloorMS != 1001 {
		t.Errorf("row holds floor %d, the claim returned %d", got.FloorMS, again.Lease.FloorMS)
	}
	// The floor stays through heartbeats.
	l, _, err := s.Heartbeat(t.Context(), allocator.HeartbeatRequest{Key: again.Lease.LeaseKey, Holder: "a",
		FencingVersion: again.Lease.FencingVersion, TTL: longTTL, CeilingMS: 3000})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if l.FloorMS != 1001 || l.CeilingMS != 3000 {
		t.Errorf("after a heartbeat: floor %d ceiling %d, want 1001 3000", l.FloorMS, l.CeilingMS)
	}
}

// testReleaseLastTimestamp: a release leaves max(last, floor − 1); one
// that issued nothing leaves the previous ceiling.
func testReleaseLastTimestamp(t *testing.T, s allocator.Store) {
	pool := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, TTL: longTTL}
	step := func(holder string, ceiling, last, wantFloor, wantLeft int64) {
		t.Helper()
		req := pool
		req.Holder, req.CeilingMS = holder, ceiling
		l := claim(t, s, req).Lease
		if l.FloorMS != wantFloor {
			t.Errorf("%s: floor %d, want %d", holder, l.FloorMS, wantFloor)
		}
		if got := release(t, s, l, last); got != wantLeft {
			t.Errorf("%s released with last timestamp %d (floor %d, ceiling %d): got ceiling %d, want %d",
				holder, last, l.FloorMS, l.CeilingMS, got, wantLeft)
		}
		if row := listLeases(t, s)[0]; row.CeilingMS != wantLeft || row.Holder != "" || row.Owner != "" {
			t.Errorf("%s: row after release: ceiling %d holder %q owner %q, want %d, free", holder, row.CeilingMS, row.Holder, row.Owner, wantLeft)
		}
	}
	step("a", 5000, 4000, 1, 4000)    // lowered to the last timestamp used
	step("b", 9000, 0, 4001, 4000)    // issued nothing: back to a's ceiling, not 0
	step("c", 9000, 4001, 4001, 4001) // the floor itself
	step("d", 9000, 9000, 4002, 9000) // the ceiling itself
	step("e", 100, 0, 9001, 9000)     // a claim never lowers the ceiling; nothing issued leaves it
	step("f", 20000, 12345, 9001, 12345)
	if events := AllLeaseEvents(t, s); len(events) != 12 || events[1].Kind != allocator.EventRelease || events[1].Detail == "" {
		t.Errorf("got %d events (second %+v), want a claim and a release per holder", len(events), events[1])
	}
}

// testReleaseBelowFloor: an impossible last timestamp is refused with
// ErrInvalidRelease, changing nothing.
func testReleaseBelowFloor(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	pool := allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 2, MaxWorkerID: 2, TTL: longTTL}
	pool.Holder, pool.CeilingMS = "a", 5000
	release(t, s, claim(t, s, pool).Lease, 5000)
	pool.Holder, pool.CeilingMS = "b", 8000
	l := claim(t, s, pool).Lease // floor 5001, ceiling 8000
	before := listLeases(t, s)[0]
	events := len(AllLeaseEvents(t, s))
	for _, last := range []int64{1, 4999, 5000, 8001} {
		c, err := s.Release(ctx, allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "b", FencingVersion: l.FencingVersion,
			LastTimestampMS: last, RequestID: "r"})
		if !errors.Is(err, allocator.ErrInvalidRelease) || errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("release with last timestamp %d (floor 5001, ceiling 8000): got %d, %v; want ErrInvalidRelease", last, c, err)
		}
		if got := listLeases(t, s)[0]; got != before {
			t.Errorf("release with last timestamp %d changed the row: %+v, want %+v", last, got, before)
		}
	}
	if n := len(AllLeaseEvents(t, s)); n != events {
		t.Errorf("refused releases recorded %d events", n-events)
	}
	// The lease is still held: it heartbeats and releases as usual.
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "b", FencingVersion: l.FencingVersion, TTL: longTTL}); err != nil {
		t.Errorf("heartbeat after refused releases: %v", err)
	}
	if got := release(t, s, l, 5001); got != 5001 {
		t.Errorf("release at the floor after refused ones: ceiling %d, want 5001", got)
	}
}

// testOwnerAndRequestID: claims and releases record owner and request ID;
// a node's claim leaves the owner NULL.
func testOwnerAndRequestID(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "orders-api/h1", TTL: longTTL,
		CeilingMS: 1000, Owner: "orders-api", RequestID: "req-1"}
	res := claim(t, s, req)
	if res.Lease.Owner != "orders-api" {
		t.Errorf("claim returned owner %q, want orders-api", res.Lease.Owner)
	}
	if got := listLeases(t, s)[0]; got.Owner != "orders-api" || got.Holder != "orders-api/h1" {
		t.Errorf("row after the claim: holder %q owner %q, want orders-api/h1 and orders-api", got.Holder, got.Owner)
	}
	l, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: req.Holder, FencingVersion: res.Lease.FencingVersion,
		TTL: longTTL, CeilingMS: 1500, Owner: "orders-api", RequestID: "req-2"})
	if err != nil || l.Owner != "orders-api" {
		t.Errorf("heartbeat: owner %q, %v; want orders-api kept", l.Owner, err)
	}
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: l.LeaseKey, Holder: req.Holder, FencingVersion: l.FencingVersion,
		LastTimestampMS: 1200, Owner: "orders-api", RequestID: "req-3"}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := listLeases(t, s)[0]; got.Owner != "" || got.Holder != "" {
		t.Errorf("row after the release: holder %q owner %q, want both NULL", got.Holder, got.Owner)
	}
	// idgen's own node claims the row: no owner.
	node := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "node-1", TTL: longTTL})
	if node.Lease.Owner != "" || listLeases(t, s)[0].Owner != "" {
		t.Errorf("claim without an owner: owner %q, want NULL", node.Lease.Owner)
	}

	type want struct {
		kind             allocator.EventKind
		holder           string
		owner, requestID string
	}
	wants := []want{
		{allocator.EventAcquire, "orders-api/h1", "orders-api", "req-1"},
		{allocator.EventRelease, "orders-api/h1", "orders-api", "req-3"},
		{allocator.EventAcquire, "node-1", "", ""},
	}
	events := AllLeaseEvents(t, s)
	if len(events) != len(wants) {
		t.Fatalf("got %d events, want %d (a heartbeat records none)", len(events), len(wants))
	}
	for i, w := range wants {
		if g := events[i]; g.Kind != w.kind || g.Holder != w.holder || g.Owner != w.owner || g.RequestID != w.requestID {
			t.Errorf("event %d: got %s by %q owner %q request %q, want %s by %q owner %q request %q",
				i, g.Kind, g.Holder, g.Owner, g.RequestID, w.kind, w.holder, w.owner, w.requestID)
		}
	}
	// A takeover of a remote holder's expired lease by a node clears the owner.
	remote := claim(t, s, allocator.ClaimRequest{DatacenterID: 7, MinWorkerID: 0, MaxWorkerID: 0, Holder: "billing/h", TTL: shortTTL,
		Owner: "billing"})
	var taken allocator.ClaimResult
	deadline := time.Now().Add(expiryWait)
	for {
		taken, err = s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 7, MinWorkerID: 0, MaxWorkerID: 0, Holder: "node-2", TTL: longTTL})
		if !errors.Is(err, allocator.ErrNoWorkerAvailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if err != nil {
		t.Fatalf("takeover of %v lease: %v", shortTTL, err)
	}
	if taken.PrevHolder != remote.Lease.Holder || taken.Lease.Owner != "" {
		t.Errorf("takeover by a node: previous holder %q, owner %q; want billing/h and NULL", taken.PrevHolder, taken.Lease.Owner)
	}
}

// testEvict: an eviction bumps the version, frees the row keeping its
// ceiling, fences out the holder and records who and why.
func testEvict(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	res := claim(t, s, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 5, MaxWorkerID: 5, Holder: "orders-api/h1", TTL: longTTL,
		CeilingMS: 1000, Owner: "orders-api"})
	held, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "orders-api/h1",
		FencingVersion: res.Lease.FencingVersion, TTL: longTTL, CeilingMS: 2000, Owner: "orders-api"})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	after, err := s.Evict(ctx, allocator.EvictRequest{Key: held.LeaseKey, Owner: "ops", RequestID: "req-9", Reason: "host retired"})
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if after.FencingVersion != held.FencingVersion+1 || after.Holder != "" || after.Owner != "" ||
		after.CeilingMS != 2000 || after.FloorMS != held.FloorMS || !after.AcquiredAt.Equal(held.AcquiredAt) {
		t.Errorf("Evict returned %+v; want version %d, no holder or owner, ceiling 2000 and floor %d kept", after, held.FencingVersion+1, held.FloorMS)
	}
	if after.ExpiresAt.Before(held.HeartbeatAt) || !after.ExpiresAt.Before(held.ExpiresAt) || !plausible(after.ExpiresAt) {
		t.Errorf("evicted row expires at %v, want store time (after the heartbeat at %v, before the lease's end %v)",
			after.ExpiresAt, held.HeartbeatAt, held.ExpiresAt)
	}
	if got := listLeases(t, s)[0]; got != after {
		t.Errorf("row after Evict: %+v, Evict returned %+v", got, after)
	}

	// The evicted holder is fenced out, and cannot lower the ceiling.
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: held.LeaseKey, Holder: "orders-api/h1",
		FencingVersion: held.FencingVersion, TTL: longTTL, CeilingMS: 3000}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat by the evicted holder: got %v, want ErrLeaseLost", err)
	}
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: held.LeaseKey, Holder: "orders-api/h1",
		FencingVersion: held.FencingVersion, LastTimestampMS: 1500}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("release by the evicted holder: got %v, want ErrLeaseLost", err)
	}
	if got := listLeases(t, s)[0]; got != after {
		t.Errorf("the evicted holder's calls changed the row: %+v, want %+v", got, after)
	}

	events := AllLeaseEvents(t, s)
	if len(events) != 2 {
		t.Fatalf("got %d events, want the claim's and the eviction's", len(events))
	}
	ev := events[1]
	if ev.Kind != allocator.EventEvict || ev.LeaseKey != held.LeaseKey || ev.Holder != "orders-api/h1" ||
		ev.FencingVersion != held.FencingVersion || ev.Owner != "ops" || ev.RequestID != "req-9" ||
		!strings.Contains(ev.Detail, "host retired") || !strings.Contains(ev.Detail, "orders-api") {
		t.Errorf("eviction event %+v; want evict of orders-api/h1 at version %d by ops, request req-9, detail with the reason and the owner",
			ev, held.FencingVersion)
	}

	// The row is free at once; the next holder starts above the ceiling.
	next := claim(t, s, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 5, MaxWorkerID: 5, Holder: "node-1", TTL: longTTL, CeilingMS: 100})
	if next.PrevHolder != "" || next.PrevCeilingMS != 2000 || next.Lease.FloorMS != 2001 || next.Lease.CeilingMS != 2000 ||
		next.Lease.FencingVersion != held.FencingVersion+2 {
		t.Errorf("claim after the eviction: previous %q/%d, floor %d ceiling %d version %d; want none/2000, 2001 2000 %d",
			next.PrevHolder, next.PrevCeilingMS, next.Lease.FloorMS, next.Lease.CeilingMS, next.Lease.FencingVersion, held.FencingVersion+2)
	}
	if ev := AllLeaseEvents(t, s)[2]; ev.Kind != allocator.EventAcquire {
		t.Errorf("claim of an evicted row recorded %s, want acquire", ev.Kind)
	}

	// An eviction fenced on the current version goes ahead.
	if got, err := s.Evict(ctx, allocator.EvictRequest{Key: next.Lease.LeaseKey, FencingVersion: next.Lease.FencingVersion}); err != nil ||
		got.FencingVersion != next.Lease.FencingVersion+1 {
		t.Errorf("Evict at the current version: got version %d, %v; want %d", got.FencingVersion, err, next.Lease.FencingVersion+1)
	}
}

// testEvictRefused: impossible or malformed evictions change nothing.
func testEvictRefused(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	held := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 1, Holder: "a", TTL: longTTL, CeilingMS: 500}).Lease
	free := allocator.LeaseKey{DatacenterID: 0, WorkerID: 1} // created by the claim, never held
	released := claim(t, s, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 0, Holder: "b", TTL: longTTL, CeilingMS: 500}).Lease
	release(t, s, released, 400)
	rows := listLeases(t, s)
	events := AllLeaseEvents(t, s)

	for _, tc := range []struct {
		name string
		req  allocator.EvictRequest
		want error // nil: an invalid request, wrapping neither sentinel
	}{
		{"a free row", allocator.EvictRequest{Key: free, Reason: "x"}, allocator.ErrLeaseNotHeld},
		{"a released row", allocator.EvictRequest{Key: released.LeaseKey}, allocator.ErrLeaseNotHeld},
		{"an unknown worker", allocator.EvictRequest{Key: allocator.LeaseKey{DatacenterID: 9, WorkerID: 9}}, allocator.ErrLeaseNotHeld},
		{"another version", allocator.EvictRequest{Key: held.LeaseKey, FencingVersion: held.FencingVersion + 1}, allocator.ErrLeaseLost},
		{"a negative worker", allocator.EvictRequest{Key: allocator.LeaseKey{WorkerID: -1}}, nil},
		{"a negative version", allocator.EvictRequest{Key: held.LeaseKey, FencingVersion: -1}, nil},
		{"a reason too long", allocator.EvictRequest{Key: held.LeaseKey, Reason: strings.Repeat("r", allocator.MaxEvictReasonLen+1)}, nil},
		{"an owner not UTF-8", allocator.EvictRequest{Key: held.LeaseKey, Owner: "\xfe"}, nil},
	} {
		got, err := s.Evict(ctx, tc.req)
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("Evict of %s: got %+v, %v; want %v", tc.name, got, err, tc.want)
		case tc.want == nil && (err == nil || errors.Is(err, allocator.ErrLeaseNotHeld) || errors.Is(err, allocator.ErrLeaseLost)):
			t.Errorf("Evict with %s: got %v, want an invalid request", tc.name, err)
		}
	}
	if got := listLeases(t, s); !slices.Equal(got, rows) {
		t.Errorf("refused evictions changed worker_leases:\n got %+v\nwant %+v", got, rows)
	}
	if got := AllLeaseEvents(t, s); len(got) != len(events) {
		t.Errorf("refused evictions recorded %d events", len(got)-len(events))
	}
	// The holder still holds its lease.
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: held.LeaseKey, Holder: "a", FencingVersion: held.FencingVersion, TTL: longTTL}); err != nil {
		t.Errorf("heartbeat after refused evictions: %v", err)
	}
}

// testLeaseEventsFilter checks every filter, alone and together, with
// paging, against filtering all events.
func testLeaseEventsFilter(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	kinds := []allocator.EventKind{allocator.EventAcquire, allocator.EventTakeover, allocator.EventRelease, allocator.EventLost, allocator.EventEvict}
	for i := range 20 {
		ev := allocator.LeaseEvent{
			LeaseKey:       allocator.LeaseKey{DatacenterID: int64(i % 2), WorkerID: int64(i % 3)},
			Holder:         fmt.Sprintf("holder-%d", i%4),
			FencingVersion: int64(i),
			Kind:           kinds[i%len(kinds)],
			RequestID:      fmt.Sprintf("req-%d", i),
		}
		if i%3 != 0 {
			ev.Owner = fmt.Sprintf("owner-%d", i%2)
		}
		if err := s.RecordLeaseEvent(ctx, ev); err != nil {
			t.Fatalf("RecordLeaseEvent: %v", err)
		}
		if i%5 == 4 {
			time.Sleep(3 * time.Millisecond) // four distinct times, to the millisecond of any store
		}
	}
	all := AllLeaseEvents(t, s)
	if len(all) != 20 {
		t.Fatalf("got %d events, want 20", len(all))
	}
	since, until := all[5].At, all[15].At
	if !since.After(all[4].At) || !until.After(all[14].At) {
		t.Fatalf("events 4/5 or 14/15 share a time (%v %v, %v %v): the store's clock did not move in 3ms", all[4].At, since, all[14].At, until)
	}
	dc1, w2 := int64(1), int64(2)
	for _, f := range []allocator.LeaseEventFilter{
		{},
		{DatacenterID: &dc1},
		{WorkerID: &w2},
		{DatacenterID: &dc1, WorkerID: &w2},
		{Holder: "holder-3"},
		{Holder: "nobody"},
		{Owner: "owner-1"},
		{Kind: allocator.EventEvict},
		{Kind: allocator.EventTakeover, Owner: "owner-0"},
		{Since: since},
		{Until: until},
		{Since: since, Until: until},
		{Since: since, Until: since},
		{Since: since, Until: until, Holder: "holder-1", DatacenterID: &dc1},
		{AfterID: all[9].ID, Kind: allocator.EventLost},
	} {
		want := filterEvents(all, f)
		for _, limit := range []int{1, 3, 1000} {
			got := readAll(t, s, f, limit)
			if !sameEvents(got, want) {
				t.Errorf("filter %s, pages of %d: got events %v, want %v", describe(f), limit, ids(got), ids(want))
			}
		}
	}
	if n := len(filterEvents(all, allocator.LeaseEventFilter{Since: since, Until: until})); n != 10 {
		t.Errorf("the time range holds %d events, want 10: the test's times are off", n)
	}
	for _, bad := range []allocator.LeaseEventFilter{
		{Limit: 10, Kind: "vanished"},
		{Limit: 10, Since: until, Until: since},
		{Limit: 10, WorkerID: new(int64(-1))},
		{Limit: 10, Owner: strings.Repeat("o", allocator.MaxOwnerLen+1)},
	} {
		if got, err := s.ListLeaseEvents(ctx, bad); err == nil {
			t.Errorf("ListLeaseEvents(%s): got %d events, want an error", describe(bad), len(got))
		}
	}
}

// testPruneLeaseEvents: a prune deletes the older events; IDs stay unique.
func testPruneLeaseEvents(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	for i := range 9 {
		if err := s.RecordLeaseEvent(ctx, allocator.LeaseEvent{Holder: fmt.Sprintf("h%d", i), Kind: allocator.EventLost}); err != nil {
			t.Fatalf("RecordLeaseEvent: %v", err)
		}
		if i%3 == 2 {
			time.Sleep(3 * time.Millisecond)
		}
	}
	all := AllLeaseEvents(t, s)
	if !all[3].At.After(all[2].At) {
		t.Fatalf("events 2 and 3 share a time, %v: the store's clock did not move in 3ms", all[3].At)
	}
	if n, err := s.PruneLeaseEvents(ctx, time.Time{}); n != 0 || err != nil {
		t.Errorf("PruneLeaseEvents(zero time): got %d, %v; want 0, nil", n, err)
	}
	if n, err := s.PruneLeaseEvents(ctx, all[0].At); n != 0 || err != nil {
		t.Errorf("PruneLeaseEvents(first event's time): got %d, %v; want 0, nil", n, err)
	}
	if n, err := s.PruneLeaseEvents(ctx, all[3].At); n != 3 || err != nil {
		t.Errorf("PruneLeaseEvents(fourth event's time): got %d, %v; want 3, nil", n, err)
	}
	if got := AllLeaseEvents(t, s); !sameEvents(got, all[3:]) {
		t.Errorf("after the prune: events %v, want %v", ids(got), ids(all[3:]))
	}
	if n, err := s.PruneLeaseEvents(ctx, all[3].At); n != 0 || err != nil {
		t.Errorf("the same prune again: got %d, %v; want 0, nil", n, err)
	}
	// A new event's ID is above every pruned one.
	if n, err := s.PruneLeaseEvents(ctx, time.Now().Add(time.Hour)); n != 6 || err != nil {
		t.Errorf("PruneLeaseEvents(an hour ahead): got %d, %v; want 6, nil", n, err)
	}
	if got := AllLeaseEvents(t, s); len(got) != 0 {
		t.Errorf("after pruning everything: %d events left", len(got))
	}
	if err := s.RecordLeaseEvent(ctx, allocator.LeaseEvent{Holder: "late", Kind: allocator.EventLost}); err != nil {
		t.Fatalf("RecordLeaseEvent: %v", err)
	}
	if got := AllLeaseEvents(t, s); len(got) != 1 || got[0].ID <= all[len(all)-1].ID {
		t.Errorf("event recorded after the prune: %v, want one with an ID above %d", ids(got), all[len(all)-1].ID)
	}
}

// filterEvents applies f to events as the contract says, without paging.
func filterEvents(events []allocator.LeaseEvent, f allocator.LeaseEventFilter) []allocator.LeaseEvent {
	var out []allocator.LeaseEvent
	for _, ev := range events {
		switch {
		case ev.ID <= f.AfterID,
			f.DatacenterID != nil && ev.DatacenterID != *f.DatacenterID,
			f.WorkerID != nil && ev.WorkerID != *f.WorkerID,
			f.Holder != "" && ev.Holder != f.Holder,
			f.Owner != "" && ev.Owner != f.Owner,
			f.Kind != "" && ev.Kind != f.Kind,
			!f.Since.IsZero() && ev.At.Before(f.Since),
			!f.Until.IsZero() && !ev.At.Before(f.Until):
			continue
		}
		out = append(out, ev)
	}
	return out
}

// readAll reads the events f selects in pages of at most limit.
func readAll(t *testing.T, s allocator.Store, f allocator.LeaseEventFilter, limit int) []allocator.LeaseEvent {
	t.Helper()
	var all []allocator.LeaseEvent
	f.Limit = limit
	for range 100 { // bounded: the tests record far fewer events
		page, err := s.ListLeaseEvents(t.Context(), f)
		if err != nil {
			t.Fatalf("ListLeaseEvents(%s): %v", describe(f), err)
		}
		if len(page) > limit {
			t.Fatalf("ListLeaseEvents(%s): %d events, more than the limit", describe(f), len(page))
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		f.AfterID = page[len(page)-1].ID
	}
	t.Fatalf("ListLeaseEvents(%s) did not end", describe(f))
	return nil
}

// sameEvents reports whether got and want are equal, field by field.
func sameEvents(got, want []allocator.LeaseEvent) bool {
	return slices.EqualFunc(got, want, func(a, b allocator.LeaseEvent) bool {
		return a.ID == b.ID && a.LeaseKey == b.LeaseKey && a.Holder == b.Holder && a.FencingVersion == b.FencingVersion &&
			a.Kind == b.Kind && a.At.Equal(b.At) && a.Detail == b.Detail && a.Owner == b.Owner && a.RequestID == b.RequestID
	})
}

func ids(events []allocator.LeaseEvent) []int64 {
	out := make([]int64, len(events))
	for i, ev := range events {
		out[i] = ev.ID
	}
	return out
}

// describe prints a filter for a failure message.
func describe(f allocator.LeaseEventFilter) string {
	var parts []string
	if f.AfterID != 0 {
		parts = append(parts, fmt.Sprintf("after %d", f.AfterID))
	}
	if f.DatacenterID != nil {
		parts = append(parts, fmt.Sprintf("datacenter %d", *f.DatacenterID))
	}
	if f.WorkerID != nil {
		parts = append(parts, fmt.Sprintf("worker %d", *f.WorkerID))
	}
	if f.Holder != "" {
		parts = append(parts, "holder "+f.Holder)
	}
	if f.Owner != "" {
		parts = append(parts, "owner "+f.Owner)
	}
	if f.Kind != "" {
		parts = append(parts, "kind "+string(f.Kind))
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "until "+f.Until.Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// PruneInBatches checks PruneLeaseEvents goes past its first batch: s must
// be fresh with a prune batch of batch; 2×batch + 1 events are pruned.
func PruneInBatches(t *testing.T, s allocator.Store, batch int) {
	t.Helper()
	ctx := t.Context()
	record := func(holder string) {
		t.Helper()
		if err := s.RecordLeaseEvent(ctx, allocator.LeaseEvent{Holder: holder, Kind: allocator.EventLost}); err != nil {
			t.Fatalf("RecordLeaseEvent: %v", err)
		}
	}
	for i := range 2*batch + 1 {
		record(fmt.Sprintf("h%d", i))
	}
	time.Sleep(3 * time.Millisecond)
	record("last")
	all := AllLeaseEvents(t, s)
	last := all[len(all)-1]
	if !last.At.After(all[len(all)-2].At) {
		t.Fatalf("the last two events share a time, %v: the store's clock did not move in 3ms", last.At)
	}
	n, err := s.PruneLeaseEvents(ctx, last.At)
	if err != nil || n != int64(2*batch+1) {
		t.Errorf("PruneLeaseEvents in batches of %d: got %d, %v; want %d, nil", batch, n, err, 2*batch+1)
	}
	if got := AllLeaseEvents(t, s); len(got) != 1 || got[0].ID != last.ID {
		t.Errorf("after the prune: events %v, want just %d", ids(got), last.ID)
	}
}

// Two lease secrets' hashes, as the lease API makes them.
var (
	secretA = strings.Repeat("a1", allocator.SecretHashLen/2)
	secretB = strings.Repeat("b2", allocator.SecretHashLen/2)
)

// testOwnerAndSecretFence: heartbeats and releases match only the owner
// and secret hash of the claim; a mismatch is a lost lease (also
// ErrLeaseSecret) and changes nothing.
func testOwnerAndSecretFence(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	api := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "api:svc/h1", TTL: longTTL,
		CeilingMS: 1000, Owner: "svc", SecretHash: secretA}).Lease
	node := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 1, MaxWorkerID: 1, Holder: "svc/node1", TTL: longTTL,
		CeilingMS: 1000}).Lease
	type who struct{ owner, secret string }
	for _, tc := range []struct {
		name  string
		lease allocator.Lease
		bad   []who
		good  who
	}{
		{"api holder", api, []who{{"", ""}, {"svc", ""}, {"", secretA}, {"svc", secretB}, {"other", secretA}}, who{"svc", secretA}},
		{"node", node, []who{{"svc", ""}, {"", secretA}, {"svc", secretA}}, who{"", ""}},
	} {
		l := tc.lease
		for _, b := range tc.bad {
			hb := allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion, TTL: longTTL,
				CeilingMS: 5000, Owner: b.owner, SecretHash: b.secret}
			if _, _, err := s.Heartbeat(ctx, hb); !errors.Is(err, allocator.ErrLeaseLost) || !errors.Is(err, allocator.ErrLeaseSecret) {
				t.Errorf("%s: heartbeat with owner %q secret %.4q: got %v, want ErrLeaseLost and ErrLeaseSecret", tc.name, b.owner, b.secret, err)
			}
			rel := allocator.ReleaseRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion, Owner: b.owner, SecretHash: b.secret}
			if _, err := s.Release(ctx, rel); !errors.Is(err, allocator.ErrLeaseLost) || !errors.Is(err, allocator.ErrLeaseSecret) {
				t.Errorf("%s: release with owner %q secret %.4q: got %v, want ErrLeaseLost and ErrLeaseSecret", tc.name, b.owner, b.secret, err)
			}
		}
		// At another version the lease is not the caller's, secret or not.
		other := allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion + 1, TTL: longTTL,
			Owner: tc.good.owner, SecretHash: tc.good.secret}
		if _, _, err := s.Heartbeat(ctx, other); !errors.Is(err, allocator.ErrLeaseLost) || errors.Is(err, allocator.ErrLeaseSecret) {
			t.Errorf("%s: heartbeat at another version: got %v, want ErrLeaseLost alone", tc.name, err)
		}
		for _, got := range listLeases(t, s) {
			if got.LeaseKey == l.LeaseKey && (got.Holder != l.Holder || got.CeilingMS != 1000 || !got.ExpiresAt.Equal(l.ExpiresAt)) {
				t.Errorf("%s: refused calls changed the row: holder %q ceiling %d expires %v, want %q 1000 %v",
					tc.name, got.Holder, got.CeilingMS, got.ExpiresAt, l.Holder, l.ExpiresAt)
			}
		}
		hb := allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion, TTL: longTTL,
			CeilingMS: 1500, Owner: tc.good.owner, SecretHash: tc.good.secret}
		if _, _, err := s.Heartbeat(ctx, hb); err != nil {
			t.Errorf("%s: heartbeat with the claim's owner and secret: %v", tc.name, err)
		}
		rel := allocator.ReleaseRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion, LastTimestampMS: 1200,
			Owner: tc.good.owner, SecretHash: tc.good.secret}
		if c, err := s.Release(ctx, rel); err != nil || c != 1200 {
			t.Errorf("%s: release with the claim's owner and secret: got ceiling %d, %v; want 1200", tc.name, c, err)
		}
	}
	if n := len(AllLeaseEvents(t, s)); n != 4 {
		t.Errorf("got %d events, want 2 claims and 2 releases (refused calls record none)", n)
	}

	// The secret goes with the holder at release and eviction.
	for _, evict := range []bool{false, true} {
		res := claim(t, s, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 0, Holder: "api:svc/h2", TTL: longTTL,
			Owner: "svc", SecretHash: secretB})
		if evict {
			if _, err := s.Evict(ctx, allocator.EvictRequest{Key: res.Lease.LeaseKey, Owner: "operator"}); err != nil {
				t.Fatalf("Evict: %v", err)
			}
		} else if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: res.Lease.Holder,
			FencingVersion: res.Lease.FencingVersion, Owner: "svc", SecretHash: secretB}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		n := claim(t, s, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 0, Holder: "node-2", TTL: longTTL}).Lease
		if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: n.LeaseKey, Holder: n.Holder, FencingVersion: n.FencingVersion, TTL: longTTL}); err != nil {
			t.Errorf("heartbeat of a node's claim after the API holder's lease ended (evicted %v): %v", evict, err)
		}
		release(t, s, n, 0)
	}
}

// testNodeHolderNeverAPIHolder: a lease-API caller named like a node
// cannot reclaim the node's live lease.
func testNodeHolderNeverAPIHolder(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 3, MaxWorkerID: 3, Holder: "svc/node1", TTL: longTTL, CeilingMS: 100}
	node := claim(t, s, req)
	req.Owner, req.SecretHash = "svc", secretA
	if res, err := s.Claim(ctx, req); !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Errorf("claim of a node's live lease under its holder name by an owner: got %+v, %v; want ErrNoWorkerAvailable", res.Lease, err)
	}
	if got := listLeases(t, s)[0]; got.Holder != "svc/node1" || got.Owner != "" || got.FencingVersion != node.Lease.FencingVersion {
		t.Errorf("row after the refused claim: holder %q owner %q version %d, want svc/node1, no owner, %d",
			got.Holder, got.Owner, got.FencingVersion, node.Lease.FencingVersion)
	}
}

// testMaxOwnerLeases: MaxOwnerLeases refuses with ErrTooManyLeases once
// the owner holds that many live leases (reclaims, expired, others' and
// nodes' leases do not count).
func testMaxOwnerLeases(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	capped := func(holder string, dc int64, ttl time.Duration) allocator.ClaimRequest {
		return allocator.ClaimRequest{DatacenterID: dc, MinWorkerID: 0, MaxWorkerID: 7, Holder: holder, TTL: ttl,
			Owner: "svc", SecretHash: secretA, MaxOwnerLeases: 2}
	}
	// An expired lease of svc, a live one of another owner and a node's.
	short := claim(t, s, capped("api:svc/old", 2, shortTTL)).Lease
	claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 7, Holder: "api:other/h", TTL: longTTL, Owner: "other"})
	claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 7, Holder: "node-1", TTL: longTTL})
	deadline := time.Now().Add(expiryWait)
	for claim(t, s, allocator.ClaimRequest{DatacenterID: 9, MinWorkerID: 0, MaxWorkerID: 0, Holder: "probe", TTL: longTTL}).DBNow.Before(short.ExpiresAt.Add(time.Millisecond)) {
		if time.Now().After(deadline) {
			t.Fatalf("store time did not pass %v within %v", short.ExpiresAt, expiryWait)
		}
		time.Sleep(pollEvery)
	}
	first := claim(t, s, capped("api:svc/h1", 0, longTTL)).Lease
	claim(t, s, capped("api:svc/h2", 1, longTTL)) // another datacenter counts too
	before := listLeases(t, s)
	events := len(AllLeaseEvents(t, s))
	if res, err := s.Claim(ctx, capped("api:svc/h3", 0, longTTL)); !errors.Is(err, allocator.ErrTooManyLeases) {
		t.Fatalf("third live lease of svc with a cap of 2: got worker %d, %v; want ErrTooManyLeases", res.Lease.WorkerID, err)
	}
	if after := listLeases(t, s); !slices.Equal(after, before) {
		t.Errorf("refused claim changed the table:\n got %+v\nwant %+v", after, before)
	}
	if n := len(AllLeaseEvents(t, s)); n != events {
		t.Errorf("refused claim recorded %d events", n-events)
	}
	// A claim of one's own again is not one more lease.
	again := claim(t, s, capped("api:svc/h1", 0, longTTL)).Lease
	if again.WorkerID != first.WorkerID || again.FencingVersion != first.FencingVersion+1 {
		t.Errorf("claim again by h1 at the cap: got worker %d version %d, want %d %d", again.WorkerID, again.FencingVersion, first.WorkerID, first.FencingVersion+1)
	}
	// No cap, or another owner: not refused.
	free := capped("api:svc/h4", 0, longTTL)
	free.MaxOwnerLeases = 0
	claim(t, s, free)
	other := capped("api:other/h2", 0, longTTL)
	other.Owner = "other"
	claim(t, s, other)
	// Releasing makes room under the cap.
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: again.LeaseKey, Holder: again.Holder, FencingVersion: again.FencingVersion,
		Owner: "svc", SecretHash: secretA}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := s.Claim(ctx, capped("api:svc/h5", 0, longTTL)); !errors.Is(err, allocator.ErrTooManyLeases) {
		t.Errorf("claim with svc at 2 live leases and a cap of 2: got %v, want ErrTooManyLeases", err)
	}
	for _, l := range listLeases(t, s) {
		if l.Holder == "api:svc/h4" {
			if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion,
				Owner: "svc", SecretHash: secretA}); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
	}
	claim(t, s, capped("api:svc/h5", 0, longTTL))
}
