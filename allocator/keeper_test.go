package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// faultStore wraps a LeaseStore so a test can cut a node off its database
// (every call hangs until its context ends, like a black-holed network) or
// make releases fail (a crash: the lease is left to expire).
type faultStore struct {
	allocator.LeaseStore
	blackhole   atomic.Bool
	failRelease atomic.Bool
}

var errCrashed = errors.New("test: node crashed before releasing")

func (f *faultStore) hang(ctx context.Context) error {
	if !f.blackhole.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *faultStore) Claim(ctx context.Context, r allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := f.hang(ctx); err != nil {
		return allocator.ClaimResult{}, err
	}
	return f.LeaseStore.Claim(ctx, r)
}

func (f *faultStore) Heartbeat(ctx context.Context, r allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if err := f.hang(ctx); err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	return f.LeaseStore.Heartbeat(ctx, r)
}

func (f *faultStore) Release(ctx context.Context, r allocator.ReleaseRequest) (int64, error) {
	if f.failRelease.Load() {
		return 0, errCrashed
	}
	if err := f.hang(ctx); err != nil {
		return 0, err
	}
	return f.LeaseStore.Release(ctx, r)
}

func (f *faultStore) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := f.hang(ctx); err != nil {
		return err
	}
	return f.LeaseStore.RecordLeaseEvent(ctx, ev)
}

func mustKeeper(tb testing.TB, store allocator.LeaseStore, s allocator.KeeperSettings) *allocator.Keeper {
	tb.Helper()
	k, err := allocator.NewKeeper(store, s)
	if err != nil {
		tb.Fatalf("NewKeeper: %v", err)
	}
	if err := k.Start(context.Background()); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() { closeKeeper(k) })
	return k
}

// closeKeeper closes k within a bounded time, even if its database hangs.
func closeKeeper(k *allocator.Keeper) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = k.Close(ctx)
}

func pool(lo, hi int64) *allocator.WorkerRange { return &allocator.WorkerRange{Min: lo, Max: hi} }

// forEachDialect runs f on every store, etcd included.
func forEachDialect(t *testing.T, f func(t *testing.T, dialect string)) {
	for _, d := range testserver.StoreDialects {
		t.Run(d, func(t *testing.T) { f(t, d) })
	}
}

// checkEventHistory replays lease_events: every claim of a worker ID must
// carry a fencing version above the one before, and no claim may happen
// while another holder's claim is live (neither released, lost nor
// superseded by a takeover after expiry).
func checkEventHistory(t *testing.T, evs []allocator.LeaseEvent) {
	t.Helper()
	type key = allocator.LeaseKey
	lastVersion := map[key]int64{}
	holder := map[key]string{}
	for _, ev := range evs {
		switch ev.Kind {
		case allocator.EventAcquire, allocator.EventTakeover:
			if ev.FencingVersion <= lastVersion[ev.LeaseKey] {
				t.Errorf("event %d: %s of worker %d at fencing version %d, not above %d",
					ev.ID, ev.Kind, ev.WorkerID, ev.FencingVersion, lastVersion[ev.LeaseKey])
			}
			if h := holder[ev.LeaseKey]; ev.Kind == allocator.EventAcquire && h != "" && h != ev.Holder {
				t.Errorf("event %d: worker %d acquired by %s while %s still held it", ev.ID, ev.WorkerID, ev.Holder, h)
			}
			lastVersion[ev.LeaseKey] = ev.FencingVersion
			holder[ev.LeaseKey] = ev.Holder
		case allocator.EventRelease:
			if holder[ev.LeaseKey] == ev.Holder && lastVersion[ev.LeaseKey] == ev.FencingVersion {
				holder[ev.LeaseKey] = ""
			}
		}
	}
}

// TestKeeperRace starts 32 keepers at once on a pool of 8 worker IDs:
// exactly 8 hold a lease, no worker ID has two holders, and on Postgres
// and MySQL the SERIALIZABLE claims were retried at least once.
func TestKeeperRace(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		// Whether two claims overlap is up to the scheduler: repeat the
		// race on a fresh database until one did (it nearly always does
		// at once); every round checks the invariants.
		const rounds = 5
		for round := 1; round <= rounds; round++ {
			store := testserver.OpenStore(t, dialect)
			keeperRace(t, store)
			r, ok := store.(interface{ SerializationRetries() int64 })
			if !ok || dialect == "sqlite" {
				return
			}
			if n := r.SerializationRetries(); n > 0 {
				t.Logf("%s: round %d: %d serialization retries", dialect, round, n)
				return
			}
		}
		t.Errorf("%s: serialization retries: got 0 in %d rounds of 32 concurrent claims, want > 0", dialect, rounds)
	})
}

// keeperRace starts 32 keepers at once on a pool of 8 worker IDs and checks
// that exactly 8 hold a lease, each on its own worker ID, as the table and
// lease_events agree.
func keeperRace(t *testing.T, store allocator.Store) {
	t.Helper()
	{
		const keepers, workers = 32, 8
		ks := make([]*allocator.Keeper, keepers)
		var wg sync.WaitGroup
		for i := range ks {
			k, err := allocator.NewKeeper(store, allocator.KeeperSettings{
				WorkerIDs: pool(0, workers-1), TTL: 20 * time.Second, Holder: fmt.Sprintf("node-%02d", i),
			})
			if err != nil {
				t.Fatal(err)
			}
			ks[i] = k
			t.Cleanup(func() { closeKeeper(k) })
		}
		for _, k := range ks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := k.Start(context.Background()); err != nil {
					t.Errorf("Start: %v", err)
				}
			}()
		}
		wg.Wait()
		ready := func() int {
			n := 0
			for _, k := range ks {
				if k.Ready() == nil {
					n++
				}
			}
			return n
		}
		testkit.WaitFor(t, 30*time.Second, "8 keepers to hold a lease", func() bool { return ready() == workers })
		// Give the others time to try again; still exactly 8.
		time.Sleep(300 * time.Millisecond)
		if got := ready(); got != workers {
			t.Fatalf("ready keepers: got %d, want %d", got, workers)
		}
		seen := map[int64]string{}
		for _, k := range ks {
			st := k.Status()
			if !st.Held {
				if !errors.Is(k.Ready(), allocator.ErrUnavailable) {
					t.Errorf("%s holds nothing but Ready says %v", st.Holder, k.Ready())
				}
				continue
			}
			if other, dup := seen[st.Lease.WorkerID]; dup {
				t.Fatalf("worker %d held by %s and %s", st.Lease.WorkerID, other, st.Holder)
			}
			seen[st.Lease.WorkerID] = st.Holder
			if _, err := k.Next(); err != nil {
				t.Errorf("%s: Next: %v", st.Holder, err)
			}
		}
		leases, err := store.ListLeases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, l := range leases {
			if l.Holder != "" {
				held++
				if seen[l.WorkerID] != l.Holder {
					t.Errorf("table says worker %d is held by %q, keepers say %q", l.WorkerID, l.Holder, seen[l.WorkerID])
				}
			}
		}
		if held != workers {
			t.Errorf("held rows in worker_leases: got %d, want %d", held, workers)
		}
		checkEventHistory(t, storetest.AllLeaseEvents(t, store))
		for _, k := range ks {
			closeKeeper(k)
		}
	}
}

// TestKeeperTakeover stops a keeper's heartbeats (its database is cut off);
// it stops issuing before its lease expires in the database, another
// keeper takes the worker ID over, the new holder's IDs start above the old
// holder's ceiling, and when the old keeper reaches the database again its
// heartbeat matches no row and it issues nothing more.
func TestKeeperTakeover(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		ctx := context.Background()
		const ttl = 2 * time.Second
		fa := &faultStore{LeaseStore: store}
		a := mustKeeper(t, fa, allocator.KeeperSettings{WorkerIDs: pool(3, 3), TTL: ttl, Holder: "node-a"})
		testkit.WaitFor(t, 10*time.Second, "node-a to be ready", func() bool { return a.Ready() == nil })

		var aIDs []snowflake.ID
		var aLast time.Time // wall time of node-a's last successful Next
		for range 100 {
			id, err := a.Next()
			if err != nil {
				t.Fatalf("node-a Next: %v", err)
			}
			aIDs = append(aIDs, id)
		}

		fa.blackhole.Store(true)
		// node-a keeps issuing until its local deadline, then refuses.
		for {
			id, err := a.Next()
			if err != nil {
				if !errors.Is(err, allocator.ErrUnavailable) || !errors.Is(err, allocator.ErrLeaseExpired) {
					t.Fatalf("node-a refused with %v, want ErrUnavailable wrapping ErrLeaseExpired", err)
				}
				break
			}
			aIDs = append(aIDs, id)
			aLast = time.Now()
			time.Sleep(time.Millisecond)
		}
		leases, err := store.ListLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var aLease allocator.Lease
		for _, l := range leases {
			if l.WorkerID == 3 {
				aLease = l
			}
		}
		if aLease.Holder != "node-a" {
			t.Fatalf("worker 3 held by %q, want node-a", aLease.Holder)
		}
		// The database is on this machine, so its clock is ours.
		if !aLast.IsZero() && !aLast.Before(aLease.ExpiresAt) {
			t.Errorf("node-a issued at %v, not before its lease expired in the database at %v", aLast, aLease.ExpiresAt)
		}

		b := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(3, 3), TTL: ttl, Holder: "node-b"})
		testkit.WaitFor(t, 10*time.Second, "node-b to take worker 3 over", func() bool { return b.Ready() == nil })
		bst := b.Status()
		if bst.Lease.FencingVersion <= aLease.FencingVersion {
			t.Errorf("node-b fencing version %d, want above node-a's %d", bst.Lease.FencingVersion, aLease.FencingVersion)
		}
		if bst.FloorMS <= aLease.CeilingMS {
			t.Errorf("node-b floor %d, want above node-a's ceiling %d", bst.FloorMS, aLease.CeilingMS)
		}
		bFirst, err := b.Next()
		if err != nil {
			t.Fatalf("node-b Next: %v", err)
		}
		if ts := b.Layout().Decompose(bFirst).Time.UnixMilli(); ts <= aLease.CeilingMS {
			t.Errorf("node-b's first timestamp %d, want above node-a's ceiling %d", ts, aLease.CeilingMS)
		}
		if last := slices.Max(aIDs); bFirst <= last {
			t.Errorf("node-b's first ID %d, want above every node-a ID (max %d)", bFirst, last)
		}

		// node-a reaches the database again: its heartbeat matches no row.
		fa.blackhole.Store(false)
		testkit.WaitFor(t, 10*time.Second, "node-a to notice the loss", func() bool { return a.Status().Lost > 0 })
		for range 50 {
			if id, err := a.Next(); err == nil {
				t.Fatalf("node-a issued %d after losing its lease", id)
			}
		}
		// The keeper counts the loss before it records the lost event.
		kinds := map[string][]allocator.EventKind{}
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Contains(kinds["node-a"], allocator.EventLost) && time.Now().Before(deadline) {
			clear(kinds)
			for _, ev := range storetest.AllLeaseEvents(t, store) {
				kinds[ev.Holder] = append(kinds[ev.Holder], ev.Kind)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := kinds["node-a"]; !slices.Contains(got, allocator.EventAcquire) || !slices.Contains(got, allocator.EventLost) {
			t.Errorf("node-a events: got %v, want acquire and lost", got)
		}
		if got := kinds["node-b"]; !slices.Contains(got, allocator.EventTakeover) {
			t.Errorf("node-b events: got %v, want takeover", got)
		}
	})
}

// TestKeeperRestarts restarts one node 100 times on a pool of 4 worker IDs;
// every 10th run it crashes without releasing. The pool is never
// exhausted for good and no ID repeats across the runs.
func TestKeeperRestarts(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		ctx := context.Background()
		seen := map[int64]int{}
		for run := range 100 {
			fs := &faultStore{LeaseStore: store}
			k, err := allocator.NewKeeper(fs, allocator.KeeperSettings{
				WorkerIDs: pool(0, 3), TTL: time.Second, Heartbeat: 300 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Start(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 15*time.Second, fmt.Sprintf("run %d to be ready", run), func() bool { return k.Ready() == nil })
			ids, _, err := k.NextSnowflakesFenced(nil, 50)
			if err != nil {
				t.Fatalf("run %d: NextSnowflakesFenced: %v", run, err)
			}
			for _, id := range ids {
				if prev, dup := seen[id]; dup {
					t.Fatalf("run %d issued %d, already issued by run %d", run, id, prev)
				}
				seen[id] = run
			}
			crash := run%10 == 9
			fs.failRelease.Store(crash)
			err = k.Close(ctx)
			if crash != errors.Is(err, errCrashed) {
				t.Fatalf("run %d: Close: %v", run, err)
			}
		}
		events := storetest.AllLeaseEvents(t, store)
		checkEventHistory(t, events)
		takeovers := 0
		for _, ev := range events {
			if ev.Kind == allocator.EventTakeover {
				takeovers++
			}
		}
		t.Logf("%s: 100 runs, %d IDs, %d takeovers of crashed leases", dialect, len(seen), takeovers)
	})
}

// TestKeeperClockSteppedBack sets the node's clock back 3 s while it runs:
// it refuses on its worker ID and moves to a free one whose ceiling lies
// below the clock, releasing the old one.
func TestKeeperClockSteppedBack(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		clock := snowflake.NewShiftedClock(nil, 0)
		k := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 1), TTL: 3 * time.Second, Clock: clock})
		testkit.WaitFor(t, 10*time.Second, "ready", func() bool { return k.Ready() == nil })
		before, _, err := k.NextSnowflakesFenced(nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		first := k.Status().Lease.WorkerID

		clock.Shift(-3 * time.Second)
		if _, err := k.Next(); !errors.Is(err, snowflake.ErrClockBackward) {
			t.Fatalf("Next after the step: got %v, want ErrClockBackward", err)
		}
		testkit.WaitFor(t, 10*time.Second, "a move to another worker ID", func() bool {
			return k.Ready() == nil && k.Status().Lease.WorkerID != first
		})
		after, _, err := k.NextSnowflakesFenced(nil, 10)
		if err != nil {
			t.Fatalf("Next after moving: %v", err)
		}
		for _, id := range after {
			if slices.Contains(before, id) {
				t.Fatalf("ID %d issued before and after the step", id)
			}
		}
		// The new worker ID is published before the old one is released.
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("worker %d to be released", first), func() bool {
			leases, err := store.ListLeases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range leases {
				if l.WorkerID == first {
					return l.Holder == "" && !l.ReleasedAt.IsZero()
				}
			}
			return false
		})
	})
}

// TestKeeperPoolFull: a node that finds every worker ID held stays not
// ready and keeps trying; once one is released it becomes ready.
func TestKeeperPoolFull(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		a := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 0), TTL: 10 * time.Second, Holder: "a"})
		testkit.WaitFor(t, 10*time.Second, "a ready", func() bool { return a.Ready() == nil })
		b := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 0), TTL: 10 * time.Second, Holder: "b"})
		time.Sleep(500 * time.Millisecond)
		if err := b.Ready(); !errors.Is(err, allocator.ErrNoLease) {
			t.Fatalf("b.Ready with the pool full: got %v, want ErrNoLease", err)
		}
		if _, err := b.Next(); !errors.Is(err, allocator.ErrUnavailable) {
			t.Fatalf("b.Next with the pool full: got %v, want ErrUnavailable", err)
		}
		if err := a.Close(context.Background()); err != nil {
			t.Fatalf("a.Close: %v", err)
		}
		testkit.WaitFor(t, 15*time.Second, "b ready after a released", func() bool { return b.Ready() == nil })
		if _, err := b.Next(); err != nil {
			t.Fatalf("b.Next: %v", err)
		}
	})
}

// TestKeeperClockOffset: a node whose clock is further from database time
// than the limit refuses to issue.
func TestKeeperClockOffset(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		clock := snowflake.NewShiftedClock(nil, 3*time.Second)
		k := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 3), Clock: clock, MaxClockOffset: time.Second})
		testkit.WaitFor(t, 10*time.Second, "a lease", func() bool { return k.Status().Held })
		if _, err := k.Next(); !errors.Is(err, allocator.ErrClockOffset) {
			t.Fatalf("Next with the clock 3s ahead: got %v, want ErrClockOffset", err)
		}
		if off := k.Status().ClockOffset; off > -2*time.Second {
			t.Errorf("measured offset %v, want about -3s", off)
		}
	})
}

// TestKeeperLayoutMismatch: a node configured with another layout than the
// one stored refuses to start and says what differs.
func TestKeeperLayoutMismatch(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		mustKeeper(t, store, allocator.KeeperSettings{})
		other := snowflake.DefaultLayout()
		other.WorkerBits, other.SequenceBits = 6, 11
		k, err := allocator.NewKeeper(store, allocator.KeeperSettings{Layout: other})
		if err != nil {
			t.Fatal(err)
		}
		err = k.Start(context.Background())
		if !errors.Is(err, allocator.ErrLayoutMismatch) {
			t.Fatalf("Start: got %v, want ErrLayoutMismatch", err)
		}
		if want := "worker bits 6 != 5, sequence bits 11 != 12"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if _, err := k.Next(); !errors.Is(err, allocator.ErrUnavailable) {
			t.Errorf("Next on a keeper that did not start: got %v, want ErrUnavailable", err)
		}
	})
}

// TestKeeperClockOffsetKeepsCeiling: while a node's clock is too far from
// database time, its heartbeats do not push the worker ID's ceiling ahead.
func TestKeeperClockOffsetKeepsCeiling(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	clock := snowflake.NewShiftedClock(nil, 0)
	k := mustKeeper(t, store, allocator.KeeperSettings{
		WorkerIDs: pool(0, 0), Clock: clock, TTL: time.Second, Heartbeat: 100 * time.Millisecond, MaxClockOffset: time.Second,
	})
	testkit.WaitFor(t, 10*time.Second, "ready", func() bool { return k.Ready() == nil })
	clock.Shift(time.Hour)
	testkit.WaitFor(t, 10*time.Second, "the offset to be refused", func() bool { return errors.Is(k.Ready(), allocator.ErrClockOffset) })
	before := k.Status().CeilingMS
	claims := k.Status().Claims
	time.Sleep(500 * time.Millisecond) // several heartbeats
	st := k.Status()
	if st.Claims != claims {
		t.Fatalf("the keeper re-claimed (%d claims, was %d); the test wants heartbeats on one lease", st.Claims, claims)
	}
	// The database is on this machine: its time is ours. The ceiling may
	// follow database time, but never run ahead by more than ttl plus the
	// allowed offset (and a little for the round trips).
	limit := time.Now().Add(time.Second + time.Second + 200*time.Millisecond).UnixMilli()
	if st.CeilingMS > limit {
		t.Errorf("ceiling %d lies %v ahead of database time with the clock an hour off, want at most ttl + max offset",
			st.CeilingMS, time.Duration(st.CeilingMS-time.Now().UnixMilli())*time.Millisecond)
	}
	if st.CeilingMS < before {
		t.Errorf("ceiling went down from %d to %d", before, st.CeilingMS)
	}
}

// TestKeeperNeverWaitIsReady: with MaxBackwardWait < 0 (never wait out a
// step back) a keeper whose clock did not move back is ready and issues.
func TestKeeperNeverWaitIsReady(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	k := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 0), MaxBackwardWait: -time.Second})
	testkit.WaitFor(t, 10*time.Second, "a lease", func() bool { return k.Status().Held })
	if _, _, err := k.NextSnowflakesFenced(nil, 100); err != nil {
		t.Fatalf("NextSnowflakesFenced: %v", err)
	}
	if err := k.Ready(); err != nil {
		t.Errorf("Ready after issuing with MaxBackwardWait < 0: got %v, want nil", err)
	}
}

// TestKeeperClockAheadCeilingBounded starts a node whose clock is an hour
// ahead: the ceiling its claim commits is bounded by database time (ttl
// plus the allowed offset ahead of it), not by the node's clock, so when it
// crashes another node takes the worker ID over within about ttl + offset.
func TestKeeperClockAheadCeilingBounded(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dialect string) {
		store := testserver.OpenStore(t, dialect)
		ctx := context.Background()
		const ttl, offset = time.Second, time.Second
		fa := &faultStore{LeaseStore: store}
		ahead := snowflake.NewShiftedClock(nil, time.Hour)
		a := mustKeeper(t, fa, allocator.KeeperSettings{
			WorkerIDs: pool(0, 0), TTL: ttl, MaxClockOffset: offset, Clock: ahead, Holder: "ahead",
		})
		testkit.WaitFor(t, 10*time.Second, "node-ahead to hold a lease", func() bool { return a.Status().Held })
		leases, err := store.ListLeases(ctx)
		if err != nil || len(leases) != 1 {
			t.Fatalf("ListLeases: %d rows, %v; want 1", len(leases), err)
		}
		// The database runs on this machine: its time is ours. Allow a
		// little for the round trips.
		if limit := time.Now().Add(ttl + offset + 500*time.Millisecond).UnixMilli(); leases[0].CeilingMS > limit {
			t.Errorf("node an hour ahead committed ceiling %d, %v ahead of database time; want at most ttl + offset (%v)",
				leases[0].CeilingMS, time.Duration(leases[0].CeilingMS-time.Now().UnixMilli())*time.Millisecond, ttl+offset)
		}

		// The node crashes: its lease is left to expire.
		fa.failRelease.Store(true)
		if err := a.Close(ctx); !errors.Is(err, errCrashed) {
			t.Fatalf("Close: got %v, want the crash", err)
		}
		crashed := time.Now()
		b := mustKeeper(t, store, allocator.KeeperSettings{WorkerIDs: pool(0, 0), TTL: ttl, MaxClockOffset: offset, Holder: "b"})
		testkit.WaitFor(t, ttl+offset+5*time.Second, "node-b to take the worker ID over", func() bool { return b.Ready() == nil })
		t.Logf("%s: node-b ready %v after the crash", dialect, time.Since(crashed).Round(time.Millisecond))
		if _, err := b.Next(); err != nil {
			t.Errorf("node-b Next: %v", err)
		}
	})
}

// TestNewKeeperPoolTooLarge: a pool larger than a store can claim from
// (allocator.MaxPoolSize worker IDs) would make every claim fail; NewKeeper
// refuses it at once and names the setting that fixes it.
func TestNewKeeperPoolTooLarge(t *testing.T) {
	wide := snowflake.DefaultLayout()
	wide.DatacenterBits, wide.WorkerBits, wide.SequenceBits = 0, 17, 5
	for _, tc := range []struct {
		name    string
		workers *allocator.WorkerRange
		ok      bool
	}{
		{"every worker ID of 17 bits", nil, false},
		{"explicit range of 65537", pool(0, allocator.MaxPoolSize), false},
		{"explicit range of 65536", pool(allocator.MaxPoolSize, 2*allocator.MaxPoolSize-1), true},
	} {
		_, err := allocator.NewKeeper(nil, allocator.KeeperSettings{Layout: wide, WorkerIDs: tc.workers})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: NewKeeper: %v, want no error", tc.name, err)
		case !tc.ok && !errors.Is(err, snowflake.ErrInvalidSettings):
			t.Errorf("%s: NewKeeper: got %v, want an error wrapping ErrInvalidSettings", tc.name, err)
		case !tc.ok && !strings.Contains(err.Error(), "invalid KeeperSettings.WorkerIDs"):
			t.Errorf("%s: NewKeeper: got %q, want it to name KeeperSettings.WorkerIDs", tc.name, err)
		}
	}
}

func TestKeeperSettingsResolve(t *testing.T) {
	got, err := allocator.KeeperSettings{}.Resolve()
	if err != nil {
		t.Fatalf("Resolve of the zero value: %v", err)
	}
	if d := snowflake.DefaultLayout().Diff(got.Layout); d != "" || got.TTL != 30*time.Second || got.Heartbeat != 10*time.Second ||
		got.Margin != 3*time.Second || got.MaxCeilingAhead != 5*time.Second || got.MaxClockOffset != 5*time.Second ||
		got.MaxBackwardWait != snowflake.DefaultMaxBackwardWait {
		t.Errorf("Resolve of the zero value: got %+v, want the default layout, ttl 30s, heartbeat 10s, margin 3s, 5s and 5s", got)
	}
	if again, err := got.Resolve(); err != nil || again.TTL != got.TTL || again.Heartbeat != got.Heartbeat || again.Margin != got.Margin {
		t.Errorf("Resolve of a resolved value: got %+v, %v; want it unchanged", again, err)
	}
	if got, err := (allocator.KeeperSettings{TTL: 3 * time.Second}).Resolve(); err != nil || got.Heartbeat != time.Second || got.Margin != 300*time.Millisecond {
		t.Errorf("ttl 3s: got heartbeat %v margin %v (%v), want a third and a tenth of it: 1s 300ms", got.Heartbeat, got.Margin, err)
	}

	for _, tc := range []struct {
		name string
		s    allocator.KeeperSettings
		want string // "" when valid
	}{
		{"shortest ttl, longest heartbeat", allocator.KeeperSettings{TTL: time.Second, Heartbeat: 500 * time.Millisecond}, ""},
		{"ttl below 1s", allocator.KeeperSettings{TTL: 999 * time.Millisecond}, "invalid KeeperSettings.TTL 999ms: want at least 1s"},
		{"negative ttl", allocator.KeeperSettings{TTL: -time.Second}, "want at least 1s"},
		{"heartbeat above half the ttl", allocator.KeeperSettings{TTL: time.Second, Heartbeat: 501 * time.Millisecond}, "invalid KeeperSettings.Heartbeat 501ms: want more than 0 and at most half of KeeperSettings.TTL 1s"},
		{"negative heartbeat", allocator.KeeperSettings{Heartbeat: -time.Second}, "want more than 0 and at most half"},
		{"margin of half the ttl", allocator.KeeperSettings{TTL: 2 * time.Second, Margin: time.Second}, "invalid KeeperSettings.Margin 1s: want at least 0 and less than half of KeeperSettings.TTL 2s"},
		{"negative margin", allocator.KeeperSettings{Margin: -time.Millisecond}, "invalid KeeperSettings.Margin -1ms"},
		{"negative offset", allocator.KeeperSettings{MaxClockOffset: -time.Second}, "invalid KeeperSettings.MaxClockOffset -1s: want at least 0"},
		{"offset at the limit", allocator.KeeperSettings{MaxClockOffset: time.Minute}, ""},
		{"offset above the limit", allocator.KeeperSettings{MaxClockOffset: time.Minute + time.Millisecond}, "invalid KeeperSettings.MaxClockOffset 1m0.001s: want at least 0 and at most 1m0s"},
		{"negative ceiling ahead", allocator.KeeperSettings{MaxCeilingAhead: -time.Second}, "invalid KeeperSettings.MaxCeilingAhead -1s: want at least 0"},
		{"datacenter beyond layout", allocator.KeeperSettings{DatacenterID: 32}, "invalid KeeperSettings.DatacenterID 32: the layout allows 0 to 31"},
		{"worker IDs beyond layout", allocator.KeeperSettings{WorkerIDs: pool(0, 32)}, "invalid KeeperSettings.WorkerIDs 0-32: the layout allows 0 to 31"},
		{"worker IDs reversed", allocator.KeeperSettings{WorkerIDs: pool(5, 4)}, "invalid KeeperSettings.WorkerIDs 5-4"},
		{"holder too long", allocator.KeeperSettings{Holder: strings.Repeat("h", 256)}, "invalid KeeperSettings.Holder of 256 bytes: want at most 255"},
		{"backward wait at the limit", allocator.KeeperSettings{MaxBackwardWait: time.Second}, ""},
		{"backward wait never", allocator.KeeperSettings{MaxBackwardWait: -1}, ""},
		{"backward wait too long", allocator.KeeperSettings{MaxBackwardWait: time.Second + time.Millisecond}, "invalid KeeperSettings.MaxBackwardWait 1.001s: want at most 1s"},
	} {
		_, err := tc.s.Resolve()
		allocator.CheckResolveError(t, tc.name, err, tc.want)
	}
}
