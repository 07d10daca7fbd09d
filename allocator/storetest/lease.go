package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Lease durations: longTTL outlives any test, shortTTL expires within one
// (polled for at most expiryWait).
const (
	longTTL    = time.Minute
	shortTTL   = 400 * time.Millisecond
	expiryWait = 15 * time.Second
	pollEvery  = 50 * time.Millisecond
)

// ClaimConcurrently has claimers goroutines claim from a fresh pool of pool
// IDs at once: exactly pool succeed with distinct IDs, the rest get
// ErrNoWorkerAvailable, and the events hold one acquire per claim. s must
// be fresh.
func ClaimConcurrently(t *testing.T, s allocator.Store, claimers, pool int) {
	t.Helper()
	ctx := t.Context()
	const dc = 3
	type outcome struct {
		res allocator.ClaimResult
		err error
	}
	outcomes := make([]outcome, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			<-start
			res, err := s.Claim(ctx, allocator.ClaimRequest{
				DatacenterID: dc, MinWorkerID: 0, MaxWorkerID: int64(pool - 1),
				Holder: fmt.Sprintf("claimer-%02d", i), TTL: longTTL, CeilingMS: 1000,
			})
			outcomes[i] = outcome{res, err}
		})
	}
	close(start)
	wg.Wait()

	holderOf := map[int64]string{} // worker ID → holder that claimed it
	var failed int
	for i, o := range outcomes {
		holder := fmt.Sprintf("claimer-%02d", i)
		switch {
		case o.err == nil:
			w := o.res.Lease.WorkerID
			if prev, dup := holderOf[w]; dup {
				t.Errorf("worker %d claimed by both %s and %s", w, prev, holder)
			}
			holderOf[w] = holder
			if w < 0 || w >= int64(pool) {
				t.Errorf("%s got worker %d, outside the pool 0..%d", holder, w, pool-1)
			}
			if o.res.Lease.Holder != holder || o.res.Lease.FencingVersion != 1 {
				t.Errorf("%s: got holder %q version %d, want %q version 1",
					holder, o.res.Lease.Holder, o.res.Lease.FencingVersion, holder)
			}
		case errors.Is(o.err, allocator.ErrNoWorkerAvailable):
			failed++
		default:
			t.Errorf("%s: Claim: %v, want success or ErrNoWorkerAvailable", holder, o.err)
		}
	}
	if len(holderOf) != pool || failed != claimers-pool {
		t.Errorf("got %d claims and %d ErrNoWorkerAvailable, want %d and %d", len(holderOf), failed, pool, claimers-pool)
	}

	leases := listLeases(t, s)
	if len(leases) != pool {
		t.Fatalf("got %d rows in worker_leases, want %d", len(leases), pool)
	}
	for _, l := range leases {
		if want := holderOf[l.WorkerID]; l.Holder != want || l.FencingVersion != 1 {
			t.Errorf("worker %d: row holder %q version %d, want %q version 1", l.WorkerID, l.Holder, l.FencingVersion, want)
		}
	}

	type claimKey struct{ worker, version int64 }
	acquires := map[claimKey]int{}
	for _, ev := range AllLeaseEvents(t, s) {
		if ev.Kind != allocator.EventAcquire && ev.Kind != allocator.EventTakeover {
			t.Errorf("unexpected %s event of worker %d by %s", ev.Kind, ev.WorkerID, ev.Holder)
			continue
		}
		k := claimKey{ev.WorkerID, ev.FencingVersion}
		acquires[k]++
		if acquires[k] > 1 {
			t.Errorf("worker %d has %d claim events at fencing version %d", ev.WorkerID, acquires[k], ev.FencingVersion)
		}
		if want := holderOf[ev.WorkerID]; ev.Holder != want {
			t.Errorf("claim event of worker %d names %q, want %q", ev.WorkerID, ev.Holder, want)
		}
	}
	if len(acquires) != pool {
		t.Errorf("got claim events for %d (worker, version) pairs, want %d", len(acquires), pool)
	}
}

func testEnsureLayout(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	got, err := s.EnsureLayout(ctx, snowflake.Layout{})
	if err != nil {
		t.Fatalf("EnsureLayout(zero): %v", err)
	}
	if d := snowflake.DefaultLayout().Diff(got); d != "" {
		t.Errorf("EnsureLayout(zero) = %v, want the default layout (%s)", got, d)
	}
	other := snowflake.Layout{TimeBits: 40, DatacenterBits: 4, WorkerBits: 6, SequenceBits: 13,
		Epoch: time.Date(2025, 6, 1, 12, 30, 0, 123e6, time.UTC)}
	got, err = s.EnsureLayout(ctx, other)
	if err != nil {
		t.Fatalf("EnsureLayout(other): %v", err)
	}
	if d := snowflake.DefaultLayout().Diff(got); d != "" {
		t.Errorf("second EnsureLayout = %v, want the first one recorded (%s)", got, d)
	}
	if got.Epoch.Location() != time.UTC {
		t.Errorf("epoch in %v, want UTC", got.Epoch.Location())
	}
}

// testEnsureLayoutNarrow: a narrow layout (js53) is recorded as it is, and
// a later different layout gets it back.
func testEnsureLayoutNarrow(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	js53, ok := snowflake.PresetLayout(snowflake.PresetJS53)
	if !ok {
		t.Fatal("no js53 preset")
	}
	got, err := s.EnsureLayout(ctx, js53)
	if err != nil {
		t.Fatalf("EnsureLayout(js53): %v", err)
	}
	if d := js53.Diff(got); d != "" || got.Width() != 53 {
		t.Errorf("EnsureLayout(js53) = %v (%d bits), want js53 (%s)", got, got.Width(), d)
	}
	got, err = s.EnsureLayout(ctx, snowflake.DefaultLayout())
	if err != nil {
		t.Fatalf("EnsureLayout(default) after js53: %v", err)
	}
	if d := js53.Diff(got); d != "" {
		t.Errorf("EnsureLayout(default) after js53 = %v, want js53 recorded first (%s)", got, d)
	}
}

func testEnsureLayoutRace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	const n = 8
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	layouts := make([]snowflake.Layout, n)
	got := make([]snowflake.Layout, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		layouts[i] = snowflake.Layout{TimeBits: 41, DatacenterBits: 2, WorkerBits: 4 + i, SequenceBits: 16 - i, Epoch: epoch}
		wg.Go(func() { got[i], errs[i] = s.EnsureLayout(ctx, layouts[i]) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EnsureLayout #%d: %v", i, errs[i])
		}
	}
	winner := slices.IndexFunc(layouts, func(l snowflake.Layout) bool { return l.Diff(got[0]) == "" })
	if winner < 0 {
		t.Fatalf("EnsureLayout returned %v, which nobody proposed", got[0])
	}
	for i := range n {
		if d := got[0].Diff(got[i]); d != "" {
			t.Errorf("EnsureLayout #%d = %v, want %v like #0 (%s)", i, got[i], got[0], d)
		}
	}
}

func testClaimFreshPool(t *testing.T, s allocator.Store) {
	req := allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 3, MaxWorkerID: 6, Holder: "a", TTL: longTTL, CeilingMS: 1234}
	res := claim(t, s, req)
	l := res.Lease
	if l.DatacenterID != 1 || l.WorkerID != 3 {
		t.Errorf("got worker %d/%d, want the lowest of a fresh pool, 1/3", l.DatacenterID, l.WorkerID)
	}
	if l.Holder != "a" || l.FencingVersion != 1 || l.CeilingMS != 1234 || l.FloorMS != 1 || l.Owner != "" {
		t.Errorf("got holder %q owner %q version %d floor %d ceiling %d, want \"a\" none 1 1 1234", l.Holder, l.Owner, l.FencingVersion, l.FloorMS, l.CeilingMS)
	}
	if res.PrevHolder != "" || res.PrevCeilingMS != 0 {
		t.Errorf("got previous holder %q ceiling %d, want none and 0", res.PrevHolder, res.PrevCeilingMS)
	}
	checkFreshLease(t, res, longTTL)

	res = claim(t, s, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 3, MaxWorkerID: 6, Holder: "b", TTL: longTTL})
	if res.Lease.WorkerID != 4 {
		t.Errorf("second claim got worker %d, want 4", res.Lease.WorkerID)
	}

	leases := listLeases(t, s)
	want := []struct {
		worker  int64
		holder  string
		version int64
	}{{3, "a", 1}, {4, "b", 1}, {5, "", 0}, {6, "", 0}}
	if len(leases) != len(want) {
		t.Fatalf("got %d rows, want %d (one per worker ID of the pool)", len(leases), len(want))
	}
	for i, w := range want {
		if g := leases[i]; g.DatacenterID != 1 || g.WorkerID != w.worker || g.Holder != w.holder || g.FencingVersion != w.version {
			t.Errorf("row %d: got %d/%d holder %q version %d, want 1/%d %q %d",
				i, g.DatacenterID, g.WorkerID, g.Holder, g.FencingVersion, w.worker, w.holder, w.version)
		}
	}
	if free := leases[2]; !free.ExpiresAt.IsZero() || !free.AcquiredAt.IsZero() || free.CeilingMS != 0 {
		t.Errorf("never claimed row: got acquired %v expires %v ceiling %d, want NULL NULL 0", free.AcquiredAt, free.ExpiresAt, free.CeilingMS)
	}

	events := AllLeaseEvents(t, s)
	if len(events) != 2 {
		t.Fatalf("got %d events, want 2", len(events))
	}
	if ev := events[0]; ev.Kind != allocator.EventAcquire || ev.Holder != "a" || ev.WorkerID != 3 || ev.FencingVersion != 1 {
		t.Errorf("first event: got %s by %q of worker %d at version %d, want acquire by \"a\" of 3 at 1", ev.Kind, ev.Holder, ev.WorkerID, ev.FencingVersion)
	}
}

func testClaimLowestCeiling(t *testing.T, s allocator.Store) {
	pool := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 2, TTL: longTTL}
	ceilings := []int64{300, 100, 200}
	for i, c := range ceilings {
		req := pool
		req.Holder, req.CeilingMS = fmt.Sprintf("first-%d", i), c
		res := claim(t, s, req)
		if res.Lease.WorkerID != int64(i) {
			t.Fatalf("claim %d got worker %d, want %d", i, res.Lease.WorkerID, i)
		}
		release(t, s, res.Lease, c)
	}
	for _, want := range []struct {
		worker, prevCeiling int64
	}{{1, 100}, {2, 200}, {0, 300}} {
		req := pool
		req.Holder = fmt.Sprintf("second-%d", want.worker)
		req.CeilingMS = 150
		res := claim(t, s, req)
		if res.Lease.WorkerID != want.worker || res.PrevCeilingMS != want.prevCeiling || res.PrevHolder != "" {
			t.Errorf("got worker %d, previous ceiling %d, previous holder %q; want worker %d, %d, none",
				res.Lease.WorkerID, res.PrevCeilingMS, res.PrevHolder, want.worker, want.prevCeiling)
		}
		if want := max(150, want.prevCeiling); res.Lease.CeilingMS != want {
			t.Errorf("worker %d: got ceiling %d, want the larger of claimed and previous, %d", res.Lease.WorkerID, res.Lease.CeilingMS, want)
		}
		if res.Lease.FencingVersion != 2 {
			t.Errorf("worker %d: got version %d, want 2", res.Lease.WorkerID, res.Lease.FencingVersion)
		}
	}
}

func testPoolExhausted(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 1, TTL: longTTL}
	for _, h := range []string{"a", "b"} {
		req.Holder = h
		claim(t, s, req)
	}
	req.Holder = "c"
	if _, err := s.Claim(ctx, req); !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Errorf("third claim of a pool of 2: got %v, want ErrNoWorkerAvailable", err)
	}
	// Another datacenter is another pool.
	req.DatacenterID = 2
	if res := claim(t, s, req); res.Lease.DatacenterID != 2 || res.Lease.WorkerID != 0 {
		t.Errorf("claim in datacenter 2 got %d/%d, want 2/0", res.Lease.DatacenterID, res.Lease.WorkerID)
	}
}

func testMaxPrevCeiling(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	pool := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 1, TTL: longTTL}
	for i, c := range []int64{5000, 1000} {
		req := pool
		req.Holder, req.CeilingMS = fmt.Sprintf("first-%d", i), c
		release(t, s, claim(t, s, req).Lease, c)
	}
	req := pool
	req.Holder, req.MaxPrevCeilingMS = "b", 2000
	if res := claim(t, s, req); res.Lease.WorkerID != 1 {
		t.Errorf("got worker %d, want 1, the only one with a ceiling <= 2000", res.Lease.WorkerID)
	}
	req.Holder = "c"
	if res, err := s.Claim(ctx, req); !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Errorf("claim with ceiling limit 2000 while only worker 0 (ceiling 5000) is free: got worker %d, %v; want ErrNoWorkerAvailable",
			res.Lease.WorkerID, err)
	}
	req.MaxPrevCeilingMS = 5000 // the limit is inclusive
	if res := claim(t, s, req); res.Lease.WorkerID != 0 || res.PrevCeilingMS != 5000 || res.Lease.CeilingMS != 5000 {
		t.Errorf("got worker %d, previous ceiling %d, ceiling %d; want 0, 5000, 5000",
			res.Lease.WorkerID, res.PrevCeilingMS, res.Lease.CeilingMS)
	}
}

func testSameHolderReclaim(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 7, MaxWorkerID: 7, Holder: "a", TTL: longTTL, CeilingMS: 100}
	first := claim(t, s, req)
	other := req
	other.Holder = "b"
	if _, err := s.Claim(ctx, other); !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Errorf("claim by b of a's live lease: got %v, want ErrNoWorkerAvailable", err)
	}
	req.CeilingMS = 50
	again := claim(t, s, req)
	if again.Lease.WorkerID != 7 || again.Lease.FencingVersion != 2 || again.PrevHolder != "a" || again.PrevCeilingMS != 100 {
		t.Errorf("claim again by a: got worker %d version %d previous %q/%d, want 7 2 \"a\"/100",
			again.Lease.WorkerID, again.Lease.FencingVersion, again.PrevHolder, again.PrevCeilingMS)
	}
	if again.Lease.CeilingMS != 100 {
		t.Errorf("got ceiling %d, want 100: a claim never lowers it", again.Lease.CeilingMS)
	}
	events := AllLeaseEvents(t, s)
	if len(events) != 2 || events[1].Kind != allocator.EventAcquire || events[1].FencingVersion != 2 {
		t.Errorf("got events %+v, want two acquires (claiming one's own lease is no takeover)", events)
	}
	// The first claim's fencing version is stale now.
	hb := allocator.HeartbeatRequest{Key: first.Lease.LeaseKey, Holder: "a", FencingVersion: 1, TTL: longTTL}
	if _, _, err := s.Heartbeat(ctx, hb); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat at the superseded version: got %v, want ErrLeaseLost", err)
	}
	hb.FencingVersion = 2
	if _, _, err := s.Heartbeat(ctx, hb); err != nil {
		t.Errorf("heartbeat at the current version: %v", err)
	}
}

func testInvalidClaims(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	valid := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 3, Holder: "a", TTL: longTTL}
	for _, tc := range []struct {
		name   string
		change func(*allocator.ClaimRequest)
	}{
		{"no holder", func(r *allocator.ClaimRequest) { r.Holder = "" }},
		{"no ttl", func(r *allocator.ClaimRequest) { r.TTL = 0 }},
		{"negative datacenter", func(r *allocator.ClaimRequest) { r.DatacenterID = -1 }},
		{"negative worker", func(r *allocator.ClaimRequest) { r.MinWorkerID = -1 }},
		{"empty range", func(r *allocator.ClaimRequest) { r.MinWorkerID, r.MaxWorkerID = 3, 2 }},
		{"negative ceiling", func(r *allocator.ClaimRequest) { r.CeilingMS = -1 }},
		{"owner too long", func(r *allocator.ClaimRequest) { r.Owner = strings.Repeat("o", allocator.MaxOwnerLen+1) }},
		{"owner not UTF-8", func(r *allocator.ClaimRequest) { r.Owner = "orders-\xff" }},
		{"request ID too long", func(r *allocator.ClaimRequest) { r.RequestID = strings.Repeat("r", allocator.MaxRequestIDLen+1) }},
		{"secret hash too short", func(r *allocator.ClaimRequest) { r.SecretHash = "abc" }},
		{"secret hash upper case", func(r *allocator.ClaimRequest) { r.SecretHash = strings.Repeat("A", allocator.SecretHashLen) }},
		{"negative lease cap", func(r *allocator.ClaimRequest) { r.MaxOwnerLeases = -1 }},
	} {
		req := valid
		tc.change(&req)
		_, err := s.Claim(ctx, req)
		if err == nil || errors.Is(err, allocator.ErrNoWorkerAvailable) {
			t.Errorf("%s: got %v, want an error other than ErrNoWorkerAvailable", tc.name, err)
		}
	}
	if leases := listLeases(t, s); len(leases) != 0 {
		t.Errorf("invalid claims left %d rows, want 0", len(leases))
	}
}

// testCeilingBounded: ceilings proposed an hour ahead are bounded to store
// time + ttl + offset; smaller ones stay; a ceiling is never lowered.
func testCeilingBounded(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	const offset = 2 * time.Second
	hourAhead := time.Now().Add(time.Hour).UnixMilli()
	// bounded checks ceiling is the bound from store time at, to the ms.
	bounded := func(what string, ceiling int64, at time.Time, ttl, offset time.Duration) {
		t.Helper()
		bound := at.Add(ttl + offset).UnixMilli()
		if ceiling > bound || ceiling < bound-1 {
			t.Errorf("%s proposing a ceiling an hour ahead: stored %d, %v after store time; want store time + ttl + offset = %d (%v)",
				what, ceiling, time.Duration(ceiling-at.UnixMilli())*time.Millisecond, bound, ttl+offset)
		}
	}

	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 1, Holder: "a", TTL: longTTL,
		CeilingMS: hourAhead, MaxClockOffset: offset}
	res := claim(t, s, req)
	bounded("claim", res.Lease.CeilingMS, res.Lease.AcquiredAt, longTTL, offset)
	if got := listLeases(t, s)[0]; got.CeilingMS != res.Lease.CeilingMS {
		t.Errorf("row holds ceiling %d, the claim returned %d", got.CeilingMS, res.Lease.CeilingMS)
	}

	hb := allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "a", FencingVersion: res.Lease.FencingVersion,
		TTL: longTTL, CeilingMS: hourAhead, MaxClockOffset: offset}
	l, _, err := s.Heartbeat(ctx, hb)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	bounded("heartbeat", l.CeilingMS, l.HeartbeatAt, longTTL, offset)

	// A bound below the stored ceiling leaves it: never lowered.
	hb.TTL, hb.MaxClockOffset = time.Second, 0
	l2, _, err := s.Heartbeat(ctx, hb)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if l2.CeilingMS != l.CeilingMS {
		t.Errorf("heartbeat with a lower bound: ceiling %d, want %d kept", l2.CeilingMS, l.CeilingMS)
	}

	// A proposal within the bound is stored as it is.
	want := time.Now().Add(time.Second).UnixMilli()
	req.Holder, req.CeilingMS = "b", want
	if res := claim(t, s, req); res.Lease.WorkerID != 1 || res.Lease.CeilingMS != want {
		t.Errorf("claim proposing %d: got worker %d ceiling %d, want worker 1 ceiling %d", want, res.Lease.WorkerID, res.Lease.CeilingMS, want)
	}
	if got := listLeases(t, s); got[0].CeilingMS != l.CeilingMS || got[1].CeilingMS != want {
		t.Errorf("rows hold ceilings %d and %d, want %d and %d", got[0].CeilingMS, got[1].CeilingMS, l.CeilingMS, want)
	}
	for _, bad := range []time.Duration{-time.Millisecond, -time.Hour} {
		req.Holder, req.MaxClockOffset = "c", bad
		if _, err := s.Claim(ctx, req); err == nil || errors.Is(err, allocator.ErrNoWorkerAvailable) {
			t.Errorf("claim with offset %v: got %v, want an invalid request", bad, err)
		}
	}
}

func testHeartbeat(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	res := claim(t, s, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 100})
	prev := res.Lease
	for _, tc := range []struct {
		ceiling, want int64
		ttl           time.Duration
	}{
		{500, 500, longTTL},     // raises
		{200, 500, longTTL},     // never lowers
		{500, 500, 2 * longTTL}, // a longer ttl
		{900, 900, longTTL / 2},
	} {
		l, now, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{
			Key: prev.LeaseKey, Holder: "a", FencingVersion: 1, TTL: tc.ttl, CeilingMS: tc.ceiling})
		if err != nil {
			t.Fatalf("Heartbeat(ceiling %d): %v", tc.ceiling, err)
		}
		if l.CeilingMS != tc.want {
			t.Errorf("Heartbeat(ceiling %d): got ceiling %d, want %d", tc.ceiling, l.CeilingMS, tc.want)
		}
		if l.Holder != "a" || l.FencingVersion != 1 || !l.AcquiredAt.Equal(prev.AcquiredAt) {
			t.Errorf("Heartbeat changed holder, version or acquired_at: got %q %d %v, want \"a\" 1 %v",
				l.Holder, l.FencingVersion, l.AcquiredAt, prev.AcquiredAt)
		}
		if l.HeartbeatAt.Before(prev.HeartbeatAt) {
			t.Errorf("heartbeat_at went back from %v to %v", prev.HeartbeatAt, l.HeartbeatAt)
		}
		if got := l.ExpiresAt.Sub(l.HeartbeatAt); got != tc.ttl {
			t.Errorf("expires_at - heartbeat_at = %v, want the ttl %v", got, tc.ttl)
		}
		if now.Before(l.HeartbeatAt) || !plausible(now) {
			t.Errorf("database time %v: want a time at or after heartbeat_at %v, near this machine's", now, l.HeartbeatAt)
		}
		prev = l
	}
	if got := listLeases(t, s)[0]; got.CeilingMS != 900 || !got.ExpiresAt.Equal(prev.ExpiresAt) {
		t.Errorf("row after heartbeats: ceiling %d expires %v, want 900 %v", got.CeilingMS, got.ExpiresAt, prev.ExpiresAt)
	}

	for _, tc := range []struct {
		name string
		req  allocator.HeartbeatRequest
	}{
		{"other holder", allocator.HeartbeatRequest{Key: prev.LeaseKey, Holder: "b", FencingVersion: 1, TTL: longTTL}},
		{"other version", allocator.HeartbeatRequest{Key: prev.LeaseKey, Holder: "a", FencingVersion: 2, TTL: longTTL}},
		{"other worker", allocator.HeartbeatRequest{Key: allocator.LeaseKey{DatacenterID: 2, WorkerID: 1}, Holder: "a", FencingVersion: 1, TTL: longTTL}},
	} {
		if _, _, err := s.Heartbeat(ctx, tc.req); !errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("heartbeat with %s: got %v, want ErrLeaseLost", tc.name, err)
		}
	}
	if got := listLeases(t, s)[0]; got.CeilingMS != 900 || got.Holder != "a" || !got.ExpiresAt.Equal(prev.ExpiresAt) {
		t.Errorf("a failed heartbeat changed the row: %+v", got)
	}
}

// testInvalidHeartbeatRelease: malformed heartbeats and releases are
// refused, not as ErrLeaseLost, and change nothing.
func testInvalidHeartbeatRelease(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	l := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 100}).Lease
	hb := allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: l.FencingVersion, TTL: longTTL, CeilingMS: 200}
	for _, tc := range []struct {
		name   string
		change func(*allocator.HeartbeatRequest)
	}{
		{"no holder", func(r *allocator.HeartbeatRequest) { r.Holder = "" }},
		{"holder too long", func(r *allocator.HeartbeatRequest) { r.Holder = strings.Repeat("a", allocator.MaxHolderLen+1) }},
		{"no ttl", func(r *allocator.HeartbeatRequest) { r.TTL = 0 }},
		{"negative ceiling", func(r *allocator.HeartbeatRequest) { r.CeilingMS = -1 }},
		{"negative offset", func(r *allocator.HeartbeatRequest) { r.MaxClockOffset = -time.Second }},
		{"negative worker", func(r *allocator.HeartbeatRequest) { r.Key.WorkerID = -1 }},
		{"negative version", func(r *allocator.HeartbeatRequest) { r.FencingVersion = -1 }},
		{"owner not UTF-8", func(r *allocator.HeartbeatRequest) { r.Owner = "\xc3" }},
		{"request ID too long", func(r *allocator.HeartbeatRequest) { r.RequestID = strings.Repeat("r", allocator.MaxRequestIDLen+1) }},
		{"secret hash malformed", func(r *allocator.HeartbeatRequest) { r.SecretHash = "secret" }},
	} {
		req := hb
		tc.change(&req)
		if _, _, err := s.Heartbeat(ctx, req); err == nil || errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("heartbeat with %s: got %v, want an error other than ErrLeaseLost", tc.name, err)
		}
	}
	rel := allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: l.FencingVersion, LastTimestampMS: 50}
	for _, tc := range []struct {
		name   string
		change func(*allocator.ReleaseRequest)
	}{
		{"no holder", func(r *allocator.ReleaseRequest) { r.Holder = "" }},
		{"negative last timestamp", func(r *allocator.ReleaseRequest) { r.LastTimestampMS = -1 }},
		{"negative datacenter", func(r *allocator.ReleaseRequest) { r.Key.DatacenterID = -1 }},
		{"negative version", func(r *allocator.ReleaseRequest) { r.FencingVersion = -1 }},
		{"owner too long", func(r *allocator.ReleaseRequest) { r.Owner = strings.Repeat("o", allocator.MaxOwnerLen+1) }},
		{"request ID not UTF-8", func(r *allocator.ReleaseRequest) { r.RequestID = "req-\xff" }},
		{"secret hash malformed", func(r *allocator.ReleaseRequest) { r.SecretHash = strings.Repeat("g", allocator.SecretHashLen) }},
	} {
		req := rel
		tc.change(&req)
		if _, err := s.Release(ctx, req); err == nil || errors.Is(err, allocator.ErrLeaseLost) || errors.Is(err, allocator.ErrInvalidRelease) {
			t.Errorf("release with %s: got %v, want an error other than ErrLeaseLost and ErrInvalidRelease", tc.name, err)
		}
	}
	if got := listLeases(t, s)[0]; got.Holder != "a" || got.CeilingMS != 100 || !got.ExpiresAt.Equal(l.ExpiresAt) || !got.HeartbeatAt.Equal(l.HeartbeatAt) {
		t.Errorf("invalid requests changed the row: holder %q ceiling %d expires %v, want \"a\" 100 %v", got.Holder, got.CeilingMS, got.ExpiresAt, l.ExpiresAt)
	}
	if n := len(AllLeaseEvents(t, s)); n != 1 {
		t.Errorf("invalid requests left %d events, want the claim's 1", n)
	}
}

// testHeartbeatAfterExpiry: an expired lease can be neither extended nor
// released, even when not taken over.
func testHeartbeatAfterExpiry(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	l := claim(t, s, allocator.ClaimRequest{DatacenterID: 5, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: shortTTL, CeilingMS: 10}).Lease

	// Poll database time via claims elsewhere until past the expiry.
	probe := allocator.ClaimRequest{DatacenterID: 6, MinWorkerID: 0, MaxWorkerID: 0, Holder: "probe", TTL: longTTL}
	deadline := time.Now().Add(expiryWait)
	for claim(t, s, probe).DBNow.Before(l.ExpiresAt.Add(time.Millisecond)) {
		if time.Now().After(deadline) {
			t.Fatalf("database time did not pass %v within %v", l.ExpiresAt, expiryWait)
		}
		time.Sleep(pollEvery)
	}

	hb := allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: l.FencingVersion, TTL: longTTL, CeilingMS: 20}
	if _, _, err := s.Heartbeat(ctx, hb); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat of an expired lease: got %v, want ErrLeaseLost", err)
	}
	if got := listLeases(t, s)[0]; got.Holder != "a" || got.CeilingMS != 10 || !got.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("failed heartbeat changed the row: holder %q ceiling %d expires %v, want \"a\" 10 %v", got.Holder, got.CeilingMS, got.ExpiresAt, l.ExpiresAt)
	}
	events := len(AllLeaseEvents(t, s))
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: l.FencingVersion, LastTimestampMS: 5}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("release of an expired lease nobody took: got %v, want ErrLeaseLost", err)
	}
	if got := listLeases(t, s)[0]; got.Holder != "a" || got.CeilingMS != 10 || !got.ReleasedAt.IsZero() {
		t.Errorf("failed release changed the row: holder %q ceiling %d released %v, want \"a\" 10 NULL", got.Holder, got.CeilingMS, got.ReleasedAt)
	}
	if n := len(AllLeaseEvents(t, s)); n != events {
		t.Errorf("a refused release recorded %d events", n-events)
	}
}

func testExpiryTakeover(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 4, MinWorkerID: 1, MaxWorkerID: 1, Holder: "old", TTL: shortTTL, CeilingMS: 700}
	old := claim(t, s, req).Lease

	// Poll until another holder can take the expired lease.
	req.Holder, req.TTL, req.CeilingMS = "new", longTTL, 600
	var (
		res allocator.ClaimResult
		err error
	)
	deadline := time.Now().Add(expiryWait)
	for {
		res, err = s.Claim(ctx, req)
		if !errors.Is(err, allocator.ErrNoWorkerAvailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if err != nil {
		t.Fatalf("claim after the lease of %v expired: %v", shortTTL, err)
	}
	l := res.Lease
	if l.WorkerID != 1 || l.Holder != "new" || l.FencingVersion != old.FencingVersion+1 {
		t.Errorf("takeover: got worker %d holder %q version %d, want 1 \"new\" %d", l.WorkerID, l.Holder, l.FencingVersion, old.FencingVersion+1)
	}
	if res.PrevHolder != "old" || res.PrevCeilingMS != 700 || l.CeilingMS != 700 {
		t.Errorf("takeover: got previous holder %q ceiling %d, ceiling %d; want \"old\" 700, 700 (never lowered)",
			res.PrevHolder, res.PrevCeilingMS, l.CeilingMS)
	}
	if res.DBNow.Before(old.ExpiresAt) {
		t.Errorf("taken over at %v, before the old lease expired at %v", res.DBNow, old.ExpiresAt)
	}
	events := AllLeaseEvents(t, s)
	if n := len(events); n != 2 || events[1].Kind != allocator.EventTakeover || events[1].Holder != "new" || events[1].FencingVersion != 2 {
		t.Errorf("got events %+v, want an acquire by old and a takeover by new at version 2", events)
	}

	// The old holder is fenced out.
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: old.LeaseKey, Holder: "old", FencingVersion: old.FencingVersion, TTL: longTTL, CeilingMS: 9999}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat by the old holder: got %v, want ErrLeaseLost", err)
	}
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: old.LeaseKey, Holder: "old", FencingVersion: old.FencingVersion, LastTimestampMS: 1}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("release by the old holder: got %v, want ErrLeaseLost", err)
	}
	if got := listLeases(t, s)[0]; got.Holder != "new" || got.FencingVersion != 2 || got.CeilingMS != 700 {
		t.Errorf("row after the old holder's attempts: holder %q version %d ceiling %d, want \"new\" 2 700", got.Holder, got.FencingVersion, got.CeilingMS)
	}
}

func testRelease(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	req := allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 1000}
	l := claim(t, s, req).Lease
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: 1, TTL: longTTL, CeilingMS: 2000}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	for _, tc := range []struct {
		name string
		req  allocator.ReleaseRequest
	}{
		{"other holder", allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "b", FencingVersion: 1, LastTimestampMS: 1500}},
		{"other version", allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: 2, LastTimestampMS: 1500}},
	} {
		if _, err := s.Release(ctx, tc.req); !errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("release with %s: got %v, want ErrLeaseLost", tc.name, err)
		}
	}
	rel := allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: 1, LastTimestampMS: 1500}
	if c, err := s.Release(ctx, rel); err != nil || c != 1500 {
		t.Fatalf("Release: got ceiling %d, %v; want 1500, nil", c, err)
	}
	got := listLeases(t, s)[0]
	if got.Holder != "" || got.FencingVersion != 1 || got.CeilingMS != 1500 {
		t.Errorf("released row: holder %q version %d ceiling %d, want none 1 1500 (lowered to the last timestamp used)",
			got.Holder, got.FencingVersion, got.CeilingMS)
	}
	if got.ReleasedAt.IsZero() || !got.ExpiresAt.Equal(got.ReleasedAt) || got.ReleasedAt.Before(got.HeartbeatAt) {
		t.Errorf("released row: released_at %v expires_at %v heartbeat_at %v, want released_at = expires_at, not before the heartbeat",
			got.ReleasedAt, got.ExpiresAt, got.HeartbeatAt)
	}
	if _, err := s.Release(ctx, rel); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("second release: got %v, want ErrLeaseLost", err)
	}
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: 1, TTL: longTTL}); !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat after release: got %v, want ErrLeaseLost", err)
	}
	events := AllLeaseEvents(t, s)
	if len(events) != 2 || events[1].Kind != allocator.EventRelease || events[1].Holder != "a" || events[1].FencingVersion != 1 {
		t.Errorf("got events %+v, want an acquire and a release by a at version 1", events)
	}

	req.Holder, req.CeilingMS = "b", 0
	res := claim(t, s, req)
	if res.PrevHolder != "" || res.PrevCeilingMS != 1500 || res.Lease.FencingVersion != 2 || res.Lease.CeilingMS != 1500 || !res.Lease.ReleasedAt.IsZero() {
		t.Errorf("claim after release: previous holder %q ceiling %d, version %d ceiling %d released_at %v; want none 1500, 2 1500 NULL",
			res.PrevHolder, res.PrevCeilingMS, res.Lease.FencingVersion, res.Lease.CeilingMS, res.Lease.ReleasedAt)
	}
	if res.Lease.FloorMS != 1501 {
		t.Errorf("claim after release: floor %d, want one above the ceiling left behind, 1501", res.Lease.FloorMS)
	}
	if ev := AllLeaseEvents(t, s)[2]; ev.Kind != allocator.EventAcquire {
		t.Errorf("claim of a released row recorded %s, want acquire", ev.Kind)
	}
}

// testReleaseNeverRaises: a release above the ceiling is refused.
func testReleaseNeverRaises(t *testing.T, s allocator.Store) {
	l := claim(t, s, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: longTTL, CeilingMS: 1000}).Lease
	for _, last := range []int64{1001, time.Now().Add(time.Hour).UnixMilli()} {
		c, err := s.Release(t.Context(), allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "a", FencingVersion: l.FencingVersion, LastTimestampMS: last})
		if !errors.Is(err, allocator.ErrInvalidRelease) || errors.Is(err, allocator.ErrLeaseLost) {
			t.Errorf("release with last timestamp %d above the ceiling 1000: got %d, %v; want ErrInvalidRelease", last, c, err)
		}
		if got := listLeases(t, s)[0]; got.Holder != "a" || got.CeilingMS != 1000 || !got.ReleasedAt.IsZero() {
			t.Errorf("refused release changed the row: holder %q ceiling %d released_at %v, want \"a\" 1000 NULL", got.Holder, got.CeilingMS, got.ReleasedAt)
		}
	}
	if n := len(AllLeaseEvents(t, s)); n != 1 {
		t.Errorf("refused releases left %d events, want the claim's 1", n)
	}
}

func testListLeasesOrder(t *testing.T, s allocator.Store) {
	for _, k := range []allocator.LeaseKey{{DatacenterID: 2, WorkerID: 5}, {DatacenterID: 1, WorkerID: 7}, {DatacenterID: 1, WorkerID: 0}} {
		claim(t, s, allocator.ClaimRequest{DatacenterID: k.DatacenterID, MinWorkerID: k.WorkerID, MaxWorkerID: k.WorkerID, Holder: "a", TTL: longTTL})
	}
	var got []allocator.LeaseKey
	for _, l := range listLeases(t, s) {
		got = append(got, l.LeaseKey)
	}
	want := []allocator.LeaseKey{{DatacenterID: 1, WorkerID: 0}, {DatacenterID: 1, WorkerID: 7}, {DatacenterID: 2, WorkerID: 5}}
	if !slices.Equal(got, want) {
		t.Errorf("ListLeases order: got %v, want %v", got, want)
	}
}

func testLeaseEventsPaging(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	var want []allocator.LeaseEvent
	for i, kind := range []allocator.EventKind{allocator.EventLost, allocator.EventAcquire, allocator.EventTakeover, allocator.EventRelease, allocator.EventEvict} {
		ev := allocator.LeaseEvent{
			LeaseKey:       allocator.LeaseKey{DatacenterID: int64(i % 2), WorkerID: int64(10 + i)},
			Holder:         fmt.Sprintf("holder-%d", i),
			FencingVersion: int64(100 + i),
			Kind:           kind,
			Detail:         fmt.Sprintf("detail %d: ünïcode ok", i),
		}
		if i%2 == 1 { // the others keep owner and request ID NULL
			ev.Owner, ev.RequestID = fmt.Sprintf("owner-%d é", i), fmt.Sprintf("req-%d", i)
		}
		if err := s.RecordLeaseEvent(ctx, ev); err != nil {
			t.Fatalf("RecordLeaseEvent(%s): %v", kind, err)
		}
		want = append(want, ev)
	}
	for _, bad := range []allocator.LeaseEvent{
		{Holder: "x", Kind: "vanished"},
		{Holder: "x", Kind: allocator.EventLost, Owner: strings.Repeat("o", allocator.MaxOwnerLen+1)},
		{Holder: "x", Kind: allocator.EventLost, RequestID: "nul\x00"},
	} {
		if err := s.RecordLeaseEvent(ctx, bad); err == nil {
			t.Errorf("RecordLeaseEvent(%+v): got no error", bad)
		}
	}

	var got []allocator.LeaseEvent
	after := int64(0)
	var sizes []int
	for range 10 { // bounded: 5 events in pages of 2
		page, err := s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{AfterID: after, Limit: 2})
		if err != nil {
			t.Fatalf("ListLeaseEvents(%d, 2): %v", after, err)
		}
		sizes = append(sizes, len(page))
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].ID
	}
	if !slices.Equal(sizes, []int{2, 2, 1, 0}) {
		t.Errorf("page sizes: got %v, want [2 2 1 0]", sizes)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if i > 0 && g.ID <= got[i-1].ID {
			t.Errorf("event %d: ID %d not above the previous %d", i, g.ID, got[i-1].ID)
		}
		if g.LeaseKey != w.LeaseKey || g.Holder != w.Holder || g.FencingVersion != w.FencingVersion || g.Kind != w.Kind || g.Detail != w.Detail ||
			g.Owner != w.Owner || g.RequestID != w.RequestID {
			t.Errorf("event %d: got %+v, want %+v", i, g, w)
		}
		if !plausible(g.At) {
			t.Errorf("event %d: at %v, want the database's current time", i, g.At)
		}
	}
	for _, limit := range []int{0, -1} {
		if page, err := s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: limit}); err != nil || len(page) != 0 {
			t.Errorf("ListLeaseEvents(0, %d): got %d events, %v; want none", limit, len(page), err)
		}
	}
}

func claim(t *testing.T, s allocator.Store, req allocator.ClaimRequest) allocator.ClaimResult {
	t.Helper()
	res, err := s.Claim(t.Context(), req)
	if err != nil {
		t.Fatalf("Claim(%+v): %v", req, err)
	}
	return res
}

// release releases l with last timestamp last, returning the ceiling left.
func release(t *testing.T, s allocator.Store, l allocator.Lease, last int64) int64 {
	t.Helper()
	c, err := s.Release(t.Context(), allocator.ReleaseRequest{Key: l.LeaseKey, Holder: l.Holder, FencingVersion: l.FencingVersion,
		LastTimestampMS: last, Owner: l.Owner})
	if err != nil {
		t.Fatalf("Release(%d/%d by %s, last %d): %v", l.DatacenterID, l.WorkerID, l.Holder, last, err)
	}
	return c
}

func listLeases(t *testing.T, s allocator.Store) []allocator.Lease {
	t.Helper()
	leases, err := s.ListLeases(t.Context())
	if err != nil {
		t.Fatalf("ListLeases: %v", err)
	}
	return leases
}

// AllLeaseEvents returns every event of s, oldest first, in pages of 100.
func AllLeaseEvents(t testing.TB, s allocator.LeaseAdmin) []allocator.LeaseEvent {
	t.Helper()
	var all []allocator.LeaseEvent
	for after := int64(0); ; {
		page, err := s.ListLeaseEvents(t.Context(), allocator.LeaseEventFilter{AfterID: after, Limit: 100})
		if err != nil {
			t.Fatalf("ListLeaseEvents: %v", err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
}

// checkFreshLease checks a just-claimed lease's times: acquired = heartbeat
// = claim time, expiring ttl later, not released.
func checkFreshLease(t *testing.T, res allocator.ClaimResult, ttl time.Duration) {
	t.Helper()
	l := res.Lease
	if !l.AcquiredAt.Equal(res.DBNow) || !l.HeartbeatAt.Equal(res.DBNow) {
		t.Errorf("acquired_at %v heartbeat_at %v, want both the claim's database time %v", l.AcquiredAt, l.HeartbeatAt, res.DBNow)
	}
	if got := l.ExpiresAt.Sub(l.AcquiredAt); got != ttl {
		t.Errorf("expires_at - acquired_at = %v, want the ttl %v", got, ttl)
	}
	if !l.ReleasedAt.IsZero() {
		t.Errorf("released_at = %v, want NULL", l.ReleasedAt)
	}
	if !plausible(res.DBNow) {
		t.Errorf("database time %v is far from this machine's: a time zone mistake?", res.DBNow)
	}
}

// plausible reports whether a database time is UTC and within an hour of
// ours: further off means a zone applied twice or not at all.
func plausible(t time.Time) bool {
	d := time.Since(t)
	return t.Location() == time.UTC && d < time.Hour && d > -time.Hour
}
