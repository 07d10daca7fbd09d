package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func iv(lo, hi time.Duration) interval { return interval{t0.Add(lo), t0.Add(hi)} }

func TestAgree(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		ivs    []interval
		need   int
		ok     bool
		lo, hi time.Duration
	}{
		{"three agree", []interval{iv(0, s), iv(200e6, 1200e6), iv(-100e6, 900e6)}, 2, true, 0, s},
		{"one member an hour ahead", []interval{iv(0, s), iv(200e6, 1200e6), iv(3600*s, 3601*s)}, 2, true, 200e6, s},
		{"one member an hour behind", []interval{iv(-3600*s, -3599*s), iv(0, s), iv(500e6, 1500e6)}, 2, true, 500e6, s},
		{"all three apart", []interval{iv(0, s), iv(10*s, 11*s), iv(20*s, 21*s)}, 2, false, 0, 0},
		{"one reading of three", []interval{iv(0, s)}, 2, false, 0, 0},
		{"two readings of three, agreeing", []interval{iv(0, s), iv(500e6, 1500e6)}, 2, true, 500e6, s},
		{"two readings of three, apart", []interval{iv(0, s), iv(5*s, 6*s)}, 2, false, 0, 0},
		{"single member", []interval{iv(0, s)}, 1, true, 0, s},
		{"touching at one instant", []interval{iv(0, s), iv(s, 2*s)}, 2, true, s, s},
		{"five members, two wrong", []interval{iv(0, s), iv(100e6, 1100e6), iv(300e6, 1300e6), iv(-50*s, -49*s), iv(70*s, 71*s)}, 3, true, 300e6, s},
		{"none", nil, 1, false, 0, 0},
	}
	for _, tt := range tests {
		lo, hi, ok := agree(tt.ivs, tt.need)
		if ok != tt.ok {
			t.Errorf("%s: got ok %v, want %v", tt.name, ok, tt.ok)
			continue
		}
		if ok && (!lo.Equal(t0.Add(tt.lo)) || !hi.Equal(t0.Add(tt.hi))) {
			t.Errorf("%s: got [%v, %v], want [%v, %v]", tt.name, lo.Sub(t0), hi.Sub(t0), tt.lo, tt.hi)
		}
	}
}

// fakeMembers is a timeSource whose members' clocks are the test's: member
// i shows real time + skew[i], or fails when down[i].
type fakeMembers struct {
	skew []time.Duration
	down []bool
}

func (f *fakeMembers) source(t *testing.T) *timeSource {
	t.Helper()
	var urls []string
	for i := range f.skew {
		urls = append(urls, fmt.Sprintf("http://member%d/version", i))
	}
	ts := newTimeSource(urls, nil)
	ts.read = func(_ context.Context, url string) (time.Time, error) {
		var i int
		if _, err := fmt.Sscanf(url, "http://member%d/version", &i); err != nil {
			return time.Time{}, err
		}
		if f.down[i] {
			return time.Time{}, errors.New("connection refused")
		}
		// The Date header: whole seconds, truncated.
		return time.Now().Add(f.skew[i]).Truncate(time.Second), nil
	}
	return ts
}

// TestStoreTimeOneWrongMember checks that one member whose clock is an
// hour off moves store time by nothing, whatever the node's clock says: the
// window is the two right members' (one second wide, the Date header's
// resolution), and the node's clock is clamped into it.
func TestStoreTimeOneWrongMember(t *testing.T) {
	for _, memberSkew := range []time.Duration{time.Hour, -time.Hour} {
		for _, nodeSkew := range []time.Duration{0, 300 * time.Millisecond, time.Hour, -time.Hour, 24 * 365 * time.Hour} {
			name := fmt.Sprintf("member %v, node %v", memberSkew, nodeSkew)
			f := &fakeMembers{skew: []time.Duration{0, memberSkew, 0}, down: make([]bool, 3)}
			s := &Store{time: f.source(t), now: func() time.Time { return time.Now().Add(nodeSkew) }}
			before := time.Now()
			got, err := s.storeNow(t.Context())
			after := time.Now()
			if err != nil {
				t.Fatalf("%s: storeNow: %v", name, err)
			}
			// Within the Date header's resolution (1s) plus the reading's
			// round trip of the right members' clocks, which are real time.
			lo, hi := before.Add(-time.Second), after.Add(time.Second+50*time.Millisecond)
			if got.Before(lo) || got.After(hi) {
				t.Errorf("%s: store time %v is %v from real time, want within [-1s, +1.05s]",
					name, got, got.Sub(before))
			}
			if nodeSkew == 0 && got.Sub(before) < -time.Millisecond {
				t.Errorf("%s: a node whose clock is right got store time %v behind it", name, before.Sub(got))
			}
		}
	}
}

// TestStoreTimeUnavailable checks that without a majority of the members'
// clocks store time is refused, and lease calls with it, changing nothing.
func TestStoreTimeUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    fakeMembers
	}{
		{"two of three down", fakeMembers{skew: []time.Duration{0, 0, 0}, down: []bool{false, true, true}}},
		{"all three disagree", fakeMembers{skew: []time.Duration{0, time.Hour, 2 * time.Hour}, down: make([]bool, 3)}},
	} {
		s := &Store{time: tc.f.source(t), now: time.Now}
		if _, err := s.storeNow(t.Context()); !errors.Is(err, ErrNoStoreTime) {
			t.Errorf("%s: storeNow: got %v, want ErrNoStoreTime", tc.name, err)
		}
	}
}

// TestStoreTimeNeverGoesBack checks that store time is monotonic even when
// the node's clock steps back within the members' window.
func TestStoreTimeNeverGoesBack(t *testing.T) {
	f := &fakeMembers{skew: []time.Duration{0, 0, 0}, down: make([]bool, 3)}
	clock := snowflake.NewShiftedClock(snowflake.SystemClock(), 0)
	s := &Store{time: f.source(t), now: clock.Now}
	first, err := s.storeNow(t.Context())
	if err != nil {
		t.Fatalf("storeNow: %v", err)
	}
	clock.Shift(-500 * time.Millisecond)
	second, err := s.storeNow(t.Context())
	if err != nil {
		t.Fatalf("storeNow: %v", err)
	}
	if second.Before(first) {
		t.Errorf("store time went back from %v to %v after the node's clock stepped back", first, second)
	}
}

// ceilingLimit is the most a ceiling committed at a store time read between
// before and after may be: real time (the test cluster's members run on
// this machine's clock) + the Date header's resolution and a round trip
// + ttl + the allowed offset.
func ceilingLimit(after time.Time, ttl, offset time.Duration) int64 {
	return after.Add(time.Second + 100*time.Millisecond + ttl + offset).UnixMilli()
}

// TestNodeClockCannotPushCeiling checks, on the real cluster, that a node
// whose clock runs an hour (or years) ahead cannot commit a ceiling beyond
// store time + ttl + the allowed clock offset, through a claim, a heartbeat
// or a release, whatever ceiling it proposes; and that the store time it
// is given is the members', not its own.
func TestNodeClockCannotPushCeiling(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, 10 * 365 * 24 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			ctx := t.Context()
			s := openTest(t)
			s.now = func() time.Time { return time.Now().Add(skew) }
			const ttl, offset = 30 * time.Second, 5 * time.Second
			before := time.Now()
			res, err := s.Claim(ctx, allocator.ClaimRequest{
				DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 3, Holder: "fast", TTL: ttl, MaxClockOffset: offset,
				CeilingMS: s.now().Add(ttl).UnixMilli(), // what the keeper proposes before it has a store reading
			})
			after := time.Now()
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if got, limit := res.Lease.CeilingMS, ceilingLimit(after, ttl, offset); got > limit {
				t.Errorf("claim committed ceiling %d, %d ms beyond the bound", got, got-limit)
			}
			if res.DBNow.Before(before.Add(-time.Second)) || res.DBNow.After(after.Add(1100*time.Millisecond)) {
				t.Errorf("claim's store time %v is %v from real time: the node's clock moved it", res.DBNow, res.DBNow.Sub(before))
			}

			hb := allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "fast", FencingVersion: res.Lease.FencingVersion,
				TTL: ttl, MaxClockOffset: offset, CeilingMS: 1<<62 - 1}
			l, dbNow, err := s.Heartbeat(ctx, hb)
			after = time.Now()
			if err != nil {
				t.Fatalf("Heartbeat: %v", err)
			}
			if got, limit := l.CeilingMS, ceilingLimit(after, ttl, offset); got > limit {
				t.Errorf("heartbeat committed ceiling %d, %d ms beyond the bound", got, got-limit)
			}
			if off := s.now().Sub(dbNow); off < skew-2*time.Second {
				t.Errorf("heartbeat's store time %v is only %v behind the node's clock, want about %v: the keeper could not see its offset", dbNow, off, skew)
			}

			// A release cannot raise the ceiling: one claiming a last
			// timestamp above it is refused.
			_, err = s.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: "fast", FencingVersion: res.Lease.FencingVersion,
				LastTimestampMS: 1<<62 - 1})
			after = time.Now()
			if !errors.Is(err, allocator.ErrInvalidRelease) {
				t.Fatalf("Release with a last timestamp far above the ceiling: got %v, want ErrInvalidRelease", err)
			}
			leases, err := s.ListLeases(ctx)
			if err != nil {
				t.Fatalf("ListLeases: %v", err)
			}
			if got, limit := leases[0].CeilingMS, ceilingLimit(after, ttl, offset); got > limit {
				t.Errorf("release committed ceiling %d, %d ms beyond the bound", got, got-limit)
			}
		})
	}
}

// TestKeeperWithFastClock runs the lease keeper over the etcd store on a
// node whose clock is an hour ahead: the keeper must refuse to issue
// (offset beyond the limit) and the ceiling committed for its worker ID
// must stay within the bound, so that the next holder can use the worker
// ID without waiting an hour.
func TestKeeperWithFastClock(t *testing.T) {
	s := openTest(t)
	clock := snowflake.NewShiftedClock(snowflake.SystemClock(), time.Hour)
	s.now = clock.Now
	const ttl = 3 * time.Second
	k, err := allocator.NewKeeper(s, allocator.KeeperSettings{
		Holder: "fast", TTL: ttl, Heartbeat: time.Second, Clock: clock,
		WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0},
	})
	if err != nil {
		t.Fatalf("NewKeeper: %v", err)
	}
	if err := k.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = k.Close(context.Background()) }()
	deadline := time.Now().Add(15 * time.Second)
	for !k.Status().Held || k.Status().Claims == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("keeper claimed nothing within 15s: %+v", k.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := k.Ready(); !errors.Is(err, allocator.ErrClockOffset) {
		t.Errorf("Ready with a clock an hour ahead: got %v, want ErrClockOffset", err)
	}
	if _, err := k.Next(); err == nil {
		t.Errorf("Next with a clock an hour ahead issued an ID")
	}
	if off := k.Status().ClockOffset; off > -time.Hour+2*time.Second {
		t.Errorf("measured offset %v, want about -1h", off)
	}
	// Two heartbeats later, the ceiling is still bounded.
	time.Sleep(2500 * time.Millisecond)
	after := time.Now()
	leases, err := s.ListLeases(t.Context())
	if err != nil {
		t.Fatalf("ListLeases: %v", err)
	}
	if got, limit := leases[0].CeilingMS, ceilingLimit(after, ttl, allocator.DefaultMaxClockOffset); got > limit {
		t.Errorf("keeper's worker ID has ceiling %d, %d ms beyond the bound", got, got-limit)
	}
}

// TestNamespaceTimeDoesNotMoveStoreTime checks that a namespace write on a
// node whose clock is far ahead, before the store has read the members'
// clocks, does not become the store time of a later claim.
func TestNamespaceTimeDoesNotMoveStoreTime(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: time.Minute,
		CeilingMS: s.now().UnixMilli()})
	after := time.Now()
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if res.DBNow.After(after.Add(1100 * time.Millisecond)) {
		t.Errorf("claim's store time %v is %v ahead of real time", res.DBNow, res.DBNow.Sub(after))
	}
	if got, limit := res.Lease.CeilingMS, ceilingLimit(after, time.Minute, 0); got > limit {
		t.Errorf("claim committed ceiling %d, %d ms beyond the bound", got, got-limit)
	}
}

// TestStoreTimeDoesNotWaitForAHungMember checks that a member that does not
// answer (paused, cut off) holds up no store time once the other two have
// answered and agree: its read is cancelled by the refresh, not ended by
// the read timeout.
func TestStoreTimeDoesNotWaitForAHungMember(t *testing.T) {
	f := &fakeMembers{skew: []time.Duration{0, 0, 0}, down: make([]bool, 3)}
	ts := f.source(t)
	answer := ts.read
	hung := make(chan error, 1)
	ts.read = func(ctx context.Context, url string) (time.Time, error) {
		if url == "http://member1/version" {
			<-ctx.Done()
			hung <- ctx.Err()
			return time.Time{}, ctx.Err()
		}
		return answer(ctx, url)
	}
	s := &Store{time: ts, now: time.Now}
	if _, err := s.storeNow(t.Context()); err != nil {
		t.Fatalf("storeNow with one member hung: %v", err)
	}
	ts.close()
	if err := <-hung; !errors.Is(err, context.Canceled) {
		t.Errorf("the hung member's read ended with %v, want it cancelled once two members agreed (not %v)", err, context.DeadlineExceeded)
	}
}
