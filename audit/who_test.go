package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// idAt composes the ID of (datacenter, worker) at Unix millisecond ms.
func idAt(t *testing.T, l snowflake.Layout, dc, worker, ms int64) int64 {
	t.Helper()
	id, err := l.Compose(snowflake.Parts{Timestamp: ms - l.EpochMillis(), Datacenter: dc, Worker: worker, Sequence: 5})
	if err != nil {
		t.Fatal(err)
	}
	return int64(id)
}

// TestWhoAcrossATakeover: node A claims worker 3, its lease expires
// unrenewed, node B takes the worker over. An ID from A's span names A, one
// from B's span names B, and an ID of a worker never held, or past the
// last ceiling, names nobody.
func TestWhoAcrossATakeover(t *testing.T) {
	testserver.Parallel(t, testserver.Dialects, func(t *testing.T, dialect string) {
		ctx := context.Background()
		store := testserver.OpenStore(t, dialect)
		layout := snowflake.DefaultLayout()
		claim := func(holder string) allocator.ClaimResult {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				res, err := store.Claim(ctx, allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 3, MaxWorkerID: 3, Holder: holder,
					TTL: allocator.MinLeaseTTL, CeilingMS: time.Now().UnixMilli() + 1000, MaxClockOffset: time.Second})
				if err == nil {
					return res
				}
				if !errors.Is(err, allocator.ErrNoWorkerAvailable) || time.Now().After(deadline) {
					t.Fatalf("claim by %s: %v", holder, err)
				}
				time.Sleep(100 * time.Millisecond) // A's lease runs out on the store's clock
			}
		}
		a := claim("node-a")
		b := claim("node-b") // after A's lease expired: a takeover
		if b.PrevHolder != "node-a" {
			t.Fatalf("B's claim found previous holder %q, want node-a (a takeover)", b.PrevHolder)
		}
		idA := idAt(t, layout, 1, 3, a.DBNow.UnixMilli())
		idA2 := idAt(t, layout, 1, 3, a.Lease.CeilingMS)
		idB := idAt(t, layout, 1, 3, b.Lease.FloorMS)
		never := idAt(t, layout, 1, 4, b.Lease.FloorMS)
		future := idAt(t, layout, 1, 3, b.Lease.CeilingMS+1)
		early := idAt(t, layout, 1, 3, a.DBNow.UnixMilli()-3600_000)

		for _, tc := range []struct {
			name    string
			id      int64
			holder  string
			version int64
		}{
			{"A's claim time", idA, "node-a", a.Lease.FencingVersion},
			{"A's ceiling", idA2, "node-a", a.Lease.FencingVersion},
			// The first claim of a free row found ceiling 0: only A's span
			// holds the time, which the answer says is before the claim.
			{"an hour before A's claim", early, "node-a", a.Lease.FencingVersion},
			{"B's first millisecond", idB, "node-b", b.Lease.FencingVersion},
			{"a worker never held", never, "", 0},
			{"past B's ceiling", future, "", 0},
		} {
			got, err := audit.Who(ctx, layout, store, nil, tc.id)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if tc.holder == "" {
				if got.Found || !strings.HasPrefix(got.Note, audit.NoHolder) {
					t.Errorf("%s: got found %v holding %+v note %q, want %q", tc.name, got.Found, got.Holding, got.Note, audit.NoHolder)
				}
				continue
			}
			if !got.Found || got.Holding.Holder != tc.holder || got.Holding.FencingVersion != tc.version || got.Source != "store" {
				t.Errorf("%s: got %+v (holding %+v), want holder %s at version %d from the store", tc.name, got, got.Holding, tc.holder, tc.version)
				continue
			}
			if tc.name == "an hour before A's claim" && !strings.Contains(got.Note, "before this holder's claim") {
				t.Errorf("%s: got note %q, want one saying the ID's time is before the claim", tc.name, got.Note)
			}
			if tc.holder == "node-a" && (got.Holding.EndedBy != "takeover by the next holder" || got.Holding.CeilingMS != b.PrevCeilingMS) {
				t.Errorf("%s: got end %q, ceiling %d; want the takeover at ceiling %d", tc.name, got.Holding.EndedBy, got.Holding.CeilingMS, b.PrevCeilingMS)
			}
		}
	})
}

func TestClaimFloor(t *testing.T) {
	for _, tc := range []struct {
		detail string
		want   int64
		ok     bool
	}{
		{"free row, previous ceiling 0", 1, true},
		{"taken over from node-a at version 3, previous ceiling 1790000001234", 1790000001235, true},
		{"claimed again from version 2, previous ceiling 17", 18, true},
		{"heartbeat matched no row", 0, false},
	} {
		got, ok := allocator.ClaimFloor(tc.detail)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ClaimFloor(%q): got %d, %v; want %d, %v", tc.detail, got, ok, tc.want, tc.ok)
		}
	}
}
