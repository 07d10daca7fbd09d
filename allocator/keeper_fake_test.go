package allocator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// The keeper's state machine on a fakeLeaseStore, with no database. Most
// tests drive the run loop's steps on a fakeTime; TestKeeperFakeKicksCoalesce
// runs the loop itself on real time.

// moveAttemptsWithin returns the most claim attempts the keeper's backoff
// allows within span, starting with one at once: each delay is at least
// half of its bound, which starts at claimBackoffMin and doubles up to
// min(claimBackoffMax, heartbeat).
func moveAttemptsWithin(span, heartbeat time.Duration) int {
	bound, hi := claimBackoffMin, min(claimBackoffMax, heartbeat)
	n := 1
	for elapsed := bound / 2; elapsed <= span; elapsed += bound / 2 {
		n++
		bound = min(2*bound, hi)
	}
	return n
}

// TestKeeperFakeKicksCoalesce: while the clock is stepped back, thousands
// of refused requests each kick the run loop; the loop tries to move to
// another worker ID at most once per backoff step, and heartbeats on its
// schedule only.
func TestKeeperFakeKicksCoalesce(t *testing.T) {
	store := newFakeLeaseStore(time.Now)
	clock := snowflake.NewShiftedClock(nil, 0)
	const ttl, heartbeat = time.Second, 300 * time.Millisecond
	k, err := NewKeeper(store, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, TTL: ttl, Heartbeat: heartbeat, Clock: clock, Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	for deadline := time.Now().Add(5 * time.Second); k.Ready() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", k.Ready())
		}
	}
	if _, _, err := k.NextSnowflakesFenced(nil, 10); err != nil {
		t.Fatal(err)
	}

	clock.Shift(-3 * time.Second)
	claims0, hbs0, _ := store.counts()
	start := time.Now()
	const requests = 5000
	refused := 0
	for i := range requests {
		if _, err := k.Next(); errors.Is(err, snowflake.ErrClockBackward) {
			refused++
		}
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
	span := time.Since(start)
	claims1, hbs1, _ := store.counts()
	claims, hbs := claims1-claims0, hbs1-hbs0
	t.Logf("%d requests (%d refused) in %v: %d claim attempts, %d heartbeats", requests, refused, span.Round(time.Millisecond), claims, hbs)
	if refused != requests {
		t.Errorf("refused %d of %d requests with ErrClockBackward, want all", refused, requests)
	}
	// One attempt may be under way as the span ends.
	if allowed := moveAttemptsWithin(span, heartbeat) + 1; claims > allowed {
		t.Errorf("%d claim attempts in %v of refused requests, want at most %d (one per backoff step)", claims, span, allowed)
	}
	if allowed := int(span/heartbeat) + 2; hbs > allowed {
		t.Errorf("%d heartbeats in %v, want at most %d (one per %v)", hbs, span, allowed, heartbeat)
	}
}

// fakeNode is a keeper on a fakeTime whose run loop the test steps by hand.
type fakeNode struct {
	k    *Keeper
	wall *fakeWall
	l    *loop
}

const (
	fakeTTL       = 3 * time.Second
	fakeHeartbeat = time.Second // fakeTTL / 3
	fakeMargin    = 300 * time.Millisecond
)

func newFakeNode(t *testing.T, store LeaseStore, ft *fakeTime, s KeeperSettings) *fakeNode {
	t.Helper()
	wall := &fakeWall{t: ft}
	s.Clock = wall
	if s.TTL == 0 {
		s.TTL = fakeTTL
	}
	k, err := NewKeeper(store, s)
	if err != nil {
		t.Fatalf("NewKeeper: %v", err)
	}
	k.mono = ft.mono
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return &fakeNode{k: k, wall: wall, l: k.newLoop()}
}

// newSteppedNode returns a node with settings s on a fakeTime and a
// fakeLeaseStore of its own, the start of most stepped tests, with that
// store and time for the test to drive.
func newSteppedNode(t *testing.T, s KeeperSettings) (*fakeNode, *fakeLeaseStore, *fakeTime) {
	t.Helper()
	ft := newFakeTime()
	store := newFakeLeaseStore(ft.now)
	return newFakeNode(t, store, ft, s), store, ft
}

// stepToReady runs one step of the run loop and fails the test unless the
// keeper is ready after it; when says at what point of the test.
func (n *fakeNode) stepToReady(t *testing.T, when string) {
	t.Helper()
	n.step()
	if err := n.k.Ready(); err != nil {
		t.Fatalf("Ready %s: %v", when, err)
	}
}

// step runs one step of the run loop and returns the wait it asks for.
func (n *fakeNode) step() time.Duration { return n.k.step(context.Background(), n.l) }

// nowMS is the node's clock in Unix milliseconds.
func (n *fakeNode) nowMS() int64 { return n.wall.Now().UnixMilli() }

// next issues one ID and returns its timestamp, failing the test on an error.
func (n *fakeNode) next(t *testing.T) int64 {
	t.Helper()
	id, err := n.k.Next()
	if err != nil {
		t.Fatalf("%s: Next: %v", n.k.Holder(), err)
	}
	return n.k.Layout().Decompose(id).Time.UnixMilli()
}

func key(w int64) LeaseKey { return LeaseKey{WorkerID: w} }

func TestKeeperFakeClaim(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 3}, Holder: "a"})
	if err := n.k.Ready(); !errors.Is(err, ErrNoLease) {
		t.Fatalf("Ready before the first step: got %v, want ErrNoLease", err)
	}
	if wait := n.step(); wait != fakeHeartbeat {
		t.Errorf("step after a claim asks to wait %v, want the heartbeat interval %v", wait, fakeHeartbeat)
	}
	if err := n.k.Ready(); err != nil {
		t.Fatalf("Ready after the claim: %v", err)
	}
	st := n.k.Status()
	if !st.Held || st.Lease.WorkerID != 0 || st.Lease.FencingVersion != 1 || st.Claims != 1 || st.Takeovers != 0 {
		t.Errorf("status %+v, want worker 0 (lowest of a fresh pool) at version 1, one claim", st)
	}
	if want := ft.now().Add(fakeTTL).UnixMilli(); st.CeilingMS != want || store.row(key(0)).CeilingMS != want {
		t.Errorf("ceiling %d (row %d), want clock + ttl = %d", st.CeilingMS, store.row(key(0)).CeilingMS, want)
	}
	if st.FloorMS != 1 || st.ValidFor != fakeTTL-fakeMargin {
		t.Errorf("floor %d valid for %v, want 1 and ttl - margin = %v", st.FloorMS, st.ValidFor, fakeTTL-fakeMargin)
	}
	if ts := n.next(t); ts != n.nowMS() {
		t.Errorf("ID timestamp %d, want the clock's %d", ts, n.nowMS())
	}
	if got := store.kinds(); len(got) != 1 || got[0] != EventAcquire {
		t.Errorf("events %v, want one acquire", got)
	}
}

func TestKeeperFakeHeartbeat(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	n.step()
	ft.advance(fakeHeartbeat / 2)
	if wait := n.step(); wait != fakeHeartbeat/2 {
		t.Errorf("step before the heartbeat is due asks to wait %v, want the %v left", wait, fakeHeartbeat/2)
	}
	if _, hbs, _ := store.counts(); hbs != 0 {
		t.Fatalf("%d heartbeats before one was due", hbs)
	}
	ft.advance(fakeHeartbeat / 2)
	if wait := n.step(); wait != fakeHeartbeat {
		t.Errorf("step after a heartbeat asks to wait %v, want %v", wait, fakeHeartbeat)
	}
	st := n.k.Status()
	if want := ft.now().Add(fakeTTL).UnixMilli(); st.CeilingMS != want || st.ValidFor != fakeTTL-fakeMargin {
		t.Errorf("after a heartbeat: ceiling %d valid for %v, want %d and %v", st.CeilingMS, st.ValidFor, want, fakeTTL-fakeMargin)
	}
	if ts := n.next(t); ts != n.nowMS() {
		t.Errorf("ID timestamp %d, want %d: the raised ceiling is in force", ts, n.nowMS())
	}

	// The database goes away for less than the lease: the node keeps
	// issuing until its local deadline, retries, and recovers.
	store.setDown(errFakeLeaseDown)
	ft.advance(fakeHeartbeat)
	wait := n.step()
	if wait <= 0 || wait > fakeHeartbeat {
		t.Errorf("after a failed heartbeat the step asks to wait %v, want a backoff within (0, %v]", wait, fakeHeartbeat)
	}
	if st := n.k.Status(); st.HeartbeatFails != 1 || st.DatabaseOK || !st.Held {
		t.Errorf("status after a failed heartbeat: %+v, want 1 failure, database not OK, lease held", st)
	}
	n.next(t)
	ft.advance(fakeTTL - fakeMargin - fakeHeartbeat) // the deadline: the last heartbeat + ttl - margin
	if _, err := n.k.Next(); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Next past the local deadline: got %v, want ErrUnavailable wrapping ErrLeaseExpired", err)
	}
	store.setDown(nil)
	n.stepToReady(t, "after the database came back within the ttl")
	if st := n.k.Status(); st.Claims != 1 || st.Lost != 0 || !st.DatabaseOK {
		t.Errorf("status %+v, want the same lease (one claim, none lost)", st)
	}
}

func TestKeeperFakeLost(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 1}, Holder: "a"})
	n.step()
	last := n.next(t)
	// Another node holds worker 0 now (say it took it over after an
	// outage this node did not notice).
	row := store.row(key(0))
	row.Holder, row.FencingVersion, row.ExpiresAt = "b", row.FencingVersion+1, ft.now().Add(time.Hour)
	store.setRow(row)

	ft.advance(fakeHeartbeat)
	if wait := n.step(); wait != 0 {
		t.Errorf("step that lost the lease asks to wait %v, want 0: claim afresh at once", wait)
	}
	if _, err := n.k.Next(); !errors.Is(err, ErrNoLease) {
		t.Fatalf("Next after the loss: got %v, want ErrNoLease", err)
	}
	if st := n.k.Status(); st.Lost != 1 || st.Held {
		t.Errorf("status %+v, want one loss and no lease", st)
	}
	if got := store.kinds(); len(got) != 2 || got[1] != EventLost {
		t.Fatalf("events %v, want acquire, lost", got)
	}
	if ev := store.events[1]; ev.Holder != "a" || ev.WorkerID != 0 || ev.FencingVersion != 1 {
		t.Errorf("lost event %+v, want a's loss of worker 0 at version 1", ev)
	}

	n.step()
	st := n.k.Status()
	if !st.Held || st.Lease.WorkerID != 1 || st.Claims != 2 {
		t.Fatalf("after claiming afresh: %+v, want worker 1 (0 is b's)", st)
	}
	if ts := n.next(t); ts < last {
		t.Errorf("timestamp %d after the new claim, below %d", ts, last)
	}
}

func TestKeeperFakeTakeover(t *testing.T) {
	a, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	a.wall.step(2 * time.Second) // a's clock runs 2 s ahead: its ceiling lies ahead of b's clock
	a.step()
	aCeiling := a.k.Status().CeilingMS
	a.next(t)

	// a's process is paused: it neither heartbeats nor releases.
	b := newFakeNode(t, store, ft, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "b"})
	b.step()
	if st := b.k.Status(); st.Held {
		t.Fatalf("b claimed a's live lease: %+v", st)
	}
	ft.advance(fakeTTL)
	if _, err := a.k.Next(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("a (paused past its deadline) Next: got %v, want ErrLeaseExpired", err)
	}
	for range 3 { // b's claim backoff has passed long ago
		if b.step(); b.k.Status().Held {
			break
		}
	}
	st := b.k.Status()
	if !st.Held || st.Takeovers != 1 || st.Lease.FencingVersion != 2 || st.FloorMS != aCeiling+1 {
		t.Fatalf("b after a's lease expired: %+v, want a takeover at version 2 with floor %d", st, aCeiling+1)
	}
	if err := b.k.Ready(); !errors.Is(err, ErrUnavailable) || b.nowMS() >= st.FloorMS {
		t.Fatalf("b Ready with its clock %d below the floor %d: got %v, want unavailable", b.nowMS(), st.FloorMS, err)
	}
	if _, err := b.k.Next(); err == nil {
		t.Fatalf("b issued below its floor")
	}
	ft.advance(2 * time.Second)
	if ts := b.next(t); ts <= aCeiling {
		t.Errorf("b's first timestamp %d, want above a's ceiling %d", ts, aCeiling)
	}
	if got := store.kinds(); len(got) != 2 || got[1] != EventTakeover {
		t.Errorf("events %v, want acquire, takeover", got)
	}

	// a resumes: its heartbeat matches no row.
	a.step()
	if st := a.k.Status(); st.Lost != 1 {
		t.Errorf("a after resuming: %+v, want the lease lost", st)
	}
	if _, err := a.k.Next(); err == nil {
		t.Errorf("a issued after losing its lease")
	}
}

// TestKeeperFakeReleaseExpired: a node whose lease expired before it shut
// down (a pause, a starved process) finds nothing to release: Close says
// so in the log, returns nil, and the row keeps its ceiling.
func TestKeeperFakeReleaseExpired(t *testing.T) {
	a, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a", TTL: 3 * time.Second})
	a.step()
	a.next(t)
	ceiling := store.row(key(0)).CeilingMS
	ft.advance(4 * time.Second) // past the ttl, without a heartbeat
	if err := a.k.Close(context.Background()); err != nil {
		t.Fatalf("Close after the lease expired: %v, want nil", err)
	}
	if row := store.row(key(0)); row.CeilingMS != ceiling || !row.ReleasedAt.IsZero() {
		t.Errorf("row after Close: %+v, want the ceiling %d kept and no release", row, ceiling)
	}
	if got := store.kinds(); len(got) != 1 {
		t.Errorf("events %v, want the acquire alone", got)
	}
}

func TestKeeperFakeRelease(t *testing.T) {
	a, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	a.step()
	claimed := a.k.Status().CeilingMS
	a.next(t)
	ft.advance(5 * time.Millisecond)
	last := a.next(t)
	if err := a.k.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	row := store.row(key(0))
	if row.Holder != "" || row.CeilingMS != last || row.ReleasedAt.IsZero() || last >= claimed {
		t.Errorf("released row %+v, want no holder and the ceiling lowered from %d to the last timestamp used, %d", row, claimed, last)
	}
	if _, err := a.k.Next(); !errors.Is(err, ErrKeeperClosed) {
		t.Errorf("Next after Close: got %v, want ErrKeeperClosed", err)
	}
	if got := store.kinds(); len(got) != 2 || got[1] != EventRelease {
		t.Errorf("events %v, want acquire, release", got)
	}

	// The next holder starts right after the last timestamp used.
	b := newFakeNode(t, store, ft, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "b"})
	b.step()
	if st := b.k.Status(); st.FloorMS != last+1 || st.Takeovers != 0 {
		t.Errorf("b after a released: %+v, want floor %d and no takeover", st, last+1)
	}
	// A holder that issued nothing releases at the ceiling it found.
	if err := b.k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if row := store.row(key(0)); row.CeilingMS != last {
		t.Errorf("after b released without issuing: ceiling %d, want %d", row.CeilingMS, last)
	}
}

func TestKeeperFakeClockSteppedBackMoves(t *testing.T) {
	n, store, _ := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 1}, Holder: "a"})
	n.step()
	last := n.next(t)
	n.wall.step(-3 * time.Second)
	if _, err := n.k.Next(); !errors.Is(err, snowflake.ErrClockBackward) {
		t.Fatalf("Next after the step back: got %v, want ErrClockBackward", err)
	}
	n.step()
	st := n.k.Status()
	if !st.Held || st.Lease.WorkerID != 1 || n.k.Ready() != nil {
		t.Fatalf("after the step back: %+v, ready %v; want worker 1, whose ceiling lies below the clock, and ready", st, n.k.Ready())
	}
	n.next(t)
	if row := store.row(key(0)); row.Holder != "" || row.CeilingMS != last {
		t.Errorf("worker 0 after the move: %+v, want released at the last timestamp used, %d", row, last)
	}
}

func TestKeeperFakeClockSteppedBackStays(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	n.step()
	last := n.next(t)
	n.wall.step(-2500 * time.Millisecond)
	claims0, _, _ := store.counts()
	wait := n.step()
	claims1, hbs1, _ := store.counts()
	if claims1 != claims0+1 {
		t.Errorf("%d move attempts, want 1", claims1-claims0)
	}
	if wait <= 0 || wait > claimBackoffMin {
		t.Errorf("after a failed move the step asks to wait %v, want the move backoff, within (0, %v]", wait, claimBackoffMin)
	}
	if st := n.k.Status(); !st.Held || st.Lease.WorkerID != 0 || !errors.Is(n.k.Ready(), snowflake.ErrClockBackward) {
		t.Fatalf("with no other worker ID: %+v, ready %v; want worker 0 kept, not ready (clock backward)", st, n.k.Ready())
	}
	// It keeps its lease with heartbeats until the clock catches up, and
	// retries moves no more often than the backoff allows.
	for n.nowMS() <= last {
		wait := n.step()
		if wait <= 0 {
			t.Fatalf("step asks to wait %v", wait)
		}
		ft.advance(wait)
	}
	n.step()
	claims2, hbs2, _ := store.counts()
	if st := n.k.Status(); st.Lease.WorkerID != 0 || st.Claims != 1 || hbs2 <= hbs1 {
		t.Errorf("after the clock caught up: %+v, %d heartbeats; want worker 0 held throughout with heartbeats", st, hbs2-hbs1)
	}
	if moves := claims2 - claims0; moves > moveAttemptsWithin(2500*time.Millisecond, fakeHeartbeat)+1 {
		t.Errorf("%d move attempts in 2.5 s, more than the backoff allows", moves)
	}
	if err := n.k.Ready(); err != nil {
		t.Fatalf("Ready once the clock caught up: %v", err)
	}
	if ts := n.next(t); ts <= last {
		t.Errorf("timestamp %d after the clock caught up, want above %d", ts, last)
	}
}

func TestKeeperFakePoolFull(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	other, err := store.Claim(context.Background(), ClaimRequest{MaxWorkerID: 0, Holder: "other", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for range 8 {
		wait := n.step()
		if wait <= 0 || wait > fakeHeartbeat {
			t.Fatalf("step with the pool full asks to wait %v, want a backoff within (0, %v]", wait, fakeHeartbeat)
		}
		waits = append(waits, wait)
		if err := n.k.Ready(); !errors.Is(err, ErrNoLease) {
			t.Fatalf("Ready with the pool full: got %v, want ErrNoLease", err)
		}
		if _, err := n.k.Next(); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Next with the pool full: got %v, want ErrUnavailable", err)
		}
		// A kick or an early wake-up claims nothing before the backoff ends.
		before, _, _ := store.counts()
		if early := n.step(); early != wait {
			t.Fatalf("step before the backoff ended asks to wait %v, want the same %v", early, wait)
		}
		if after, _, _ := store.counts(); after != before {
			t.Fatalf("a step before the backoff ended claimed")
		}
		ft.advance(wait)
	}
	if waits[len(waits)-1] < fakeHeartbeat/2 {
		t.Errorf("claim waits %v, want them to grow to the heartbeat interval (at least half of %v)", waits, fakeHeartbeat)
	}
	if st := n.k.Status(); st.Claims != 0 || !st.DatabaseOK || st.LastError == "" {
		t.Errorf("status %+v, want no claim, the database OK and the error reported", st)
	}
	if _, err := store.Release(context.Background(), ReleaseRequest{Key: other.Lease.LeaseKey, Holder: "other",
		FencingVersion: other.Lease.FencingVersion}); err != nil {
		t.Fatal(err)
	}
	n.stepToReady(t, "after the worker ID was released")
}

func TestKeeperFakeDatabaseDownAtStart(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	store.setDown(errFakeLeaseDown)
	ft.advance(n.step())
	if st := n.k.Status(); st.DatabaseOK || st.Held || st.LastError == "" {
		t.Errorf("status with the database down: %+v, want database not OK, no lease, the error reported", st)
	}
	store.setDown(nil)
	n.stepToReady(t, "once the database answered")
}

// TestKeeperFakeClockAheadCeilingBounded: a node whose clock is an hour
// ahead proposes a ceiling an hour ahead; the store keeps it within store
// time + ttl + the allowed offset.
func TestKeeperFakeClockAheadCeilingBounded(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a", MaxClockOffset: time.Second})
	n.wall.step(time.Hour)
	n.step()
	bound := ft.now().Add(fakeTTL + time.Second).UnixMilli()
	if got := store.row(key(0)).CeilingMS; got != bound {
		t.Errorf("ceiling of a node an hour ahead: %d, want store time + ttl + offset = %d", got, bound)
	}
	if err := n.k.Ready(); !errors.Is(err, ErrClockOffset) {
		t.Errorf("Ready an hour ahead: got %v, want ErrClockOffset", err)
	}
	if _, err := n.k.Next(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Next an hour ahead: got %v, want ErrUnavailable", err)
	}
}

// TestKeeperFakeNextSnowflakesFenced: the token NextSnowflakesFenced
// returns names the lease the IDs were made under, and a re-claim of the
// same worker ID shows a greater fencing version.
func TestKeeperFakeNextSnowflakesFenced(t *testing.T) {
	n, store, ft := newSteppedNode(t, KeeperSettings{DatacenterID: 3, WorkerIDs: &WorkerRange{5, 5}, Holder: "a"})
	if ids, tok, err := n.k.NextSnowflakesFenced(nil, 4); !errors.Is(err, ErrNoLease) || len(ids) != 0 || tok != (LeaseToken{}) {
		t.Fatalf("NextSnowflakesFenced before a claim: got %d IDs, token %+v, err %v; want none, the zero token, ErrNoLease", len(ids), tok, err)
	}

	n.step()
	ids, tok, err := n.k.NextSnowflakesFenced(nil, 4)
	if err != nil {
		t.Fatalf("NextSnowflakesFenced: %v", err)
	}
	st := n.k.Status()
	want := LeaseToken{DatacenterID: st.Lease.DatacenterID, WorkerID: st.Lease.WorkerID, FencingVersion: st.Lease.FencingVersion}
	if tok != want || want != (LeaseToken{DatacenterID: 3, WorkerID: 5, FencingVersion: 1}) {
		t.Errorf("token %+v, lease %+v; want both {3 5 1}", tok, want)
	}
	if len(ids) != 4 {
		t.Fatalf("got %d IDs, want 4", len(ids))
	}
	for _, id := range ids {
		if p := n.k.Layout().Decompose(snowflake.ID(id)); p.Datacenter != tok.DatacenterID || p.Worker != tok.WorkerID {
			t.Errorf("ID %d made by datacenter %d worker %d, but the token says %d/%d", id, p.Datacenter, p.Worker, tok.DatacenterID, tok.WorkerID)
		}
	}
	sfs, sfTok, err := n.k.NextSnowflakesFenced(nil, 100) // more than one chunk of the loop
	if err != nil || len(sfs) != 100 || sfTok != tok {
		t.Errorf("NextSnowflakesFenced: %d IDs, token %+v, err %v; want 100, %+v, nil", len(sfs), sfTok, err, tok)
	}

	// Another holder takes the row over and lets it expire; the node loses
	// its lease and claims worker 5 again, at a greater fencing version.
	row := store.row(LeaseKey{DatacenterID: 3, WorkerID: 5})
	row.Holder, row.FencingVersion, row.ExpiresAt = "b", row.FencingVersion+1, ft.now()
	store.setRow(row)
	ft.advance(fakeHeartbeat)
	n.step() // the heartbeat finds the row gone: lost
	if _, stale, err := n.k.NextSnowflakesFenced(nil, 1); !errors.Is(err, ErrNoLease) || stale != (LeaseToken{}) {
		t.Fatalf("NextSnowflakesFenced after the loss: token %+v, err %v; want the zero token and ErrNoLease", stale, err)
	}
	ft.advance(fakeTTL) // past the ceiling a committed: the new floor
	n.step()
	ids, tok2, err := n.k.NextSnowflakesFenced(ids[:0], 2)
	if err != nil {
		t.Fatalf("NextSnowflakesFenced after the re-claim: %v", err)
	}
	if tok2.DatacenterID != 3 || tok2.WorkerID != 5 || tok2.FencingVersion <= tok.FencingVersion {
		t.Errorf("token after the re-claim %+v, want datacenter 3, worker 5 and a fencing version above %d", tok2, tok.FencingVersion)
	}
	if got := n.k.Status().Lease.FencingVersion; tok2.FencingVersion != got || len(ids) != 2 {
		t.Errorf("token version %d, lease version %d, %d IDs; want equal versions and 2 IDs", tok2.FencingVersion, got, len(ids))
	}
}

// TestKeeperFakeStoreFull: while the database refuses writes for want of
// space (ErrStoreFull), the keeper's refusals and Ready name it, whether
// it holds no lease yet or its lease ran out for want of a heartbeat; once
// writes work again it is ready with the same lease and names it no more.
func TestKeeperFakeStoreFull(t *testing.T) {
	full := fmt.Errorf("etcd: claim: %w (etcd NOSPACE alarm): etcdserver: mvcc: database space exceeded", ErrStoreFull)

	n, store, ft := newSteppedNode(t, KeeperSettings{WorkerIDs: &WorkerRange{0, 0}, Holder: "a"})
	store.setDown(full)
	ft.advance(n.step())
	for what, err := range map[string]error{"Ready": n.k.Ready(), "Next": nextErr(n.k)} {
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNoLease) || !errors.Is(err, ErrStoreFull) {
			t.Errorf("%s with no lease and the database full: got %v, want ErrUnavailable, ErrNoLease and ErrStoreFull", what, err)
		}
	}
	store.setDown(nil)
	n.stepToReady(t, "once the database took writes")

	// The lease runs out while heartbeats are refused.
	store.setDown(full)
	ft.advance(fakeHeartbeat)
	n.step()
	ft.advance(fakeTTL)
	if err := n.k.Ready(); !errors.Is(err, ErrLeaseExpired) || !errors.Is(err, ErrStoreFull) {
		t.Errorf("Ready past the deadline with the database full: got %v, want ErrLeaseExpired and ErrStoreFull", err)
	}
	if err := nextErr(n.k); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrStoreFull) {
		t.Errorf("Next past the deadline with the database full: got %v, want ErrUnavailable and ErrStoreFull", err)
	}
	// Another failure before any success (the pool looks full while the
	// holder key lives on): still out of space, as far as the keeper knows.
	store.setDown(fmt.Errorf("x: %w", ErrNoWorkerAvailable))
	ft.advance(n.step())
	if err := n.k.Ready(); !errors.Is(err, ErrStoreFull) {
		t.Errorf("Ready after another failure with no success since: got %v, want ErrStoreFull still", err)
	}
	// Writes work again: the keeper is ready by itself (its lease, expired
	// in the store meanwhile, is claimed afresh).
	store.setDown(nil)
	for i := 0; n.k.Ready() != nil && i < 5; i++ {
		ft.advance(n.step())
	}
	if err := n.k.Ready(); err != nil {
		t.Errorf("Ready after the recovery: %v", err)
	}
	store.setDown(errFakeLeaseDown)
	ft.advance(fakeTTL)
	n.step()
	if err := n.k.Ready(); err == nil || errors.Is(err, ErrStoreFull) {
		t.Errorf("Ready when the database fails otherwise after the recovery: got %v, want a refusal without ErrStoreFull", err)
	}
}

func nextErr(k *Keeper) error {
	_, err := k.Next()
	return err
}
