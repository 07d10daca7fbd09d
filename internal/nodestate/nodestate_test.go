package nodestate_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/nodestate"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

var epoch = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func mustOpen(t *testing.T, path string, clock *testkit.Manual) *nodestate.File {
	t.Helper()
	f, err := nodestate.Open(path, clock)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return f
}

// TestFileRoundTrip: what a file holds survives a reopen; raises pace
// their writes, lowers are written at once, and neither moves the wrong way.
func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.state")
	clock := testkit.NewManual(epoch)
	f := mustOpen(t, path, clock)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new file: got %v, want nothing written before a change", err)
	}
	fresh, err := f.Start(allocator.StoreMark{StoreID: "s1", Generation: 3})
	if err != nil || fresh {
		t.Fatalf("Start on an empty file: got fresh %v, %v; want false, nil", fresh, err)
	}
	w := allocator.LeaseKey{DatacenterID: 1, WorkerID: 7}
	steps := []struct {
		name string
		do   func() error
	}{
		{"raise ceiling", func() error { return f.RaiseCeiling(w, 1000) }},
		{"raise ceiling lower: no change", func() error { return f.RaiseCeiling(w, 900) }},
		{"raise counter", func() error { return f.RaiseCounter("orders", 500) }},
		{"lower counter higher: no change", func() error { return f.LowerCounter("orders", 600) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	// Within RaiseEvery of the write of Start, the raises are in memory
	// only.
	if got := mustOpen(t, path, clock).Mark(); len(got.Ceilings) != 0 || len(got.Counters) != 0 {
		t.Errorf("raises within %s of the last write: got %+v on disk, want none yet", nodestate.RaiseEvery, got)
	}
	if err := f.LowerCeiling(w, 800); err != nil {
		t.Fatalf("LowerCeiling: %v", err)
	}
	got := mustOpen(t, path, clock).Mark()
	if got.StoreID != "s1" || got.Generation != 3 || got.Ceilings[w] != 800 || got.Counters["orders"] != 500 {
		t.Errorf("after a lower: got %+v on disk, want store s1, generation 3, ceiling 800, orders 500", got)
	}
	clock.Advance(nodestate.RaiseEvery)
	if err := f.RaiseCounter("orders", 700); err != nil {
		t.Fatalf("RaiseCounter: %v", err)
	}
	if got := mustOpen(t, path, clock).Mark(); got.Counters["orders"] != 700 {
		t.Errorf("a raise %s after the last write: got orders %d on disk, want 700", nodestate.RaiseEvery, got.Counters["orders"])
	}
	if err := f.RaiseCounter("invoices", 9); err != nil {
		t.Fatalf("RaiseCounter: %v", err)
	}
	if err := f.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := mustOpen(t, path, clock).Mark(); got.Counters["invoices"] != 9 {
		t.Errorf("after Flush: got invoices %d on disk, want 9", got.Counters["invoices"])
	}
}

// TestFileStart: Start refuses a store behind the file and leaves the file
// as it was; a store of another identity starts the file afresh.
func TestFileStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.state")
	clock := testkit.NewManual(epoch)
	f := mustOpen(t, path, clock)
	w := allocator.LeaseKey{WorkerID: 3}
	if _, err := f.Start(allocator.StoreMark{StoreID: "s1", Generation: 1}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := f.LowerCounter("orders", 1); err != nil { // not known yet: nothing to lower
		t.Fatalf("LowerCounter: %v", err)
	}
	clock.Advance(nodestate.RaiseEvery)
	if err := f.RaiseCeiling(w, 5000); err != nil {
		t.Fatalf("RaiseCeiling: %v", err)
	}
	if err := f.RaiseCounter("orders", 100); err != nil {
		t.Fatalf("RaiseCounter: %v", err)
	}
	if err := f.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	restored := allocator.StoreMark{StoreID: "s1", Generation: 1,
		Ceilings: map[allocator.LeaseKey]int64{w: 4000}, Counters: map[string]int64{"orders": 100}}
	again := mustOpen(t, path, clock)
	if _, err := again.Start(restored); !errors.Is(err, allocator.ErrStoreBehind) {
		t.Fatalf("Start on a store behind the file: got %v, want ErrStoreBehind", err)
	}
	fenced := restored
	fenced.Generation, fenced.Ceilings = 2, map[allocator.LeaseKey]int64{w: 9000}
	if fresh, err := mustOpen(t, path, clock).Start(fenced); err != nil || fresh {
		t.Fatalf("Start on the fenced store: got fresh %v, %v; want false, nil", fresh, err)
	}
	if got := mustOpen(t, path, clock).Mark(); got.Generation != 2 || got.Ceilings[w] != 5000 {
		t.Errorf("after the start on the fenced store: got %+v, want generation 2 and the node's own ceiling 5000 kept", got)
	}
	other := allocator.StoreMark{StoreID: "s2"}
	if fresh, err := mustOpen(t, path, clock).Start(other); err != nil || !fresh {
		t.Fatalf("Start on another store: got fresh %v, %v; want true, nil", fresh, err)
	}
	if got := mustOpen(t, path, clock).Mark(); got.StoreID != "s2" || len(got.Ceilings) != 0 || len(got.Counters) != 0 {
		t.Errorf("after the start on another store: got %+v, want an empty mark of s2", got)
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nodestate.Open(path, clock); err == nil {
		t.Errorf("Open of a corrupt file: got nil, want an error")
	}
}

// TestStoreRecords: the wrapped store records the keeper's claims,
// heartbeats and fetches, lowers the file before a release or a tail
// return, leaves remote holders out, and does not release when the file
// cannot be written.
func TestStoreRecords(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.state")
	clock := testkit.NewManual(epoch)
	file := mustOpen(t, path, clock)
	base := testserver.OpenStore(t, "sqlite")
	s := nodestate.Wrap(base, file, slog.New(slog.DiscardHandler))

	c, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 0, MaxWorkerID: 3, Holder: "node", TTL: time.Minute,
		CeilingMS: epoch.Add(time.Hour).UnixMilli(), MaxClockOffset: time.Second})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	key := c.Lease.LeaseKey
	if got := file.Mark().Ceilings[key]; got != c.Lease.CeilingMS {
		t.Errorf("after a claim: got ceiling %d in the file, want the committed %d", got, c.Lease.CeilingMS)
	}
	api, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 0, MaxWorkerID: 3, Holder: allocator.RemoteHolderPrefix + "orders/h",
		Owner: "orders", TTL: time.Minute, CeilingMS: epoch.Add(time.Hour).UnixMilli(), MaxClockOffset: time.Second})
	if err != nil {
		t.Fatalf("Claim of a remote holder: %v", err)
	}
	if _, ok := file.Mark().Ceilings[api.Lease.LeaseKey]; ok {
		t.Errorf("a remote holder's claim: got it in the file, want it left out")
	}
	hb, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: key, Holder: "node", FencingVersion: c.Lease.FencingVersion,
		TTL: time.Minute, CeilingMS: epoch.Add(time.Hour).UnixMilli(), MaxClockOffset: time.Second})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if got := file.Mark().Ceilings[key]; got != hb.CeilingMS {
		t.Errorf("after a heartbeat: got ceiling %d in the file, want %d", got, hb.CeilingMS)
	}

	if _, err := base.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	seg, err := s.FetchSegment(ctx, "orders", 10)
	if err != nil {
		t.Fatalf("FetchSegment: %v", err)
	}
	if got := file.Mark().Counters["orders"]; got != seg.Namespace.MaxID {
		t.Errorf("after a fetch: got counter %d in the file, want %d", got, seg.Namespace.MaxID)
	}
	ok, err := s.ReturnTail(ctx, "orders", seg.Namespace.MaxID, seg.Namespace.Version, seg.Namespace.MaxID-4)
	if err != nil || !ok {
		t.Fatalf("ReturnTail: got %v, %v; want true, nil", ok, err)
	}
	if got := mustOpen(t, path, clock).Mark().Counters["orders"]; got != seg.Namespace.MaxID-4 {
		t.Errorf("after a tail return: got counter %d on disk, want %d", got, seg.Namespace.MaxID-4)
	}
	last := c.Lease.FloorMS + 5
	ceiling, err := s.Release(ctx, allocator.ReleaseRequest{Key: key, Holder: "node", FencingVersion: c.Lease.FencingVersion, LastTimestampMS: last})
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := mustOpen(t, path, clock).Mark().Ceilings[key]; got != ceiling || got != last {
		t.Errorf("after a release: got ceiling %d on disk, want the store's %d (the last timestamp %d)", got, ceiling, last)
	}

	// A file that cannot be written: no release, the lease stays.
	c2, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 0, MaxWorkerID: 3, Holder: "node", TTL: time.Minute,
		CeilingMS: epoch.Add(time.Hour).UnixMilli(), MaxClockOffset: time.Second})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	// The file's directory becomes a plain file: no write can succeed,
	// whoever runs the test.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Release(ctx, allocator.ReleaseRequest{Key: c2.Lease.LeaseKey, Holder: "node", FencingVersion: c2.Lease.FencingVersion})
	if err == nil {
		t.Fatalf("Release with a state file that cannot be written: got nil, want an error")
	}
	for _, l := range mustLeases(t, base) {
		if l.LeaseKey == c2.Lease.LeaseKey && l.Holder != "node" {
			t.Errorf("after the refused release: got holder %q, want the lease still held by node", l.Holder)
		}
	}
}

func mustLeases(t *testing.T, s allocator.LeaseAdmin) []allocator.Lease {
	t.Helper()
	l, err := s.ListLeases(t.Context())
	if err != nil {
		t.Fatalf("ListLeases: %v", err)
	}
	return l
}
