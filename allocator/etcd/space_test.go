package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
)

func TestNoSpace(t *testing.T) {
	other := errors.New("connection refused")
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{"nil", nil, false},
		{"NOSPACE", fmt.Errorf("etcd: fetch segment of %q: %w", "orders", rpctypes.ErrNoSpace), true},
		{"other", other, false},
		{"wrapped already", noSpace(rpctypes.ErrNoSpace), true},
	}
	for _, tt := range tests {
		got := noSpace(tt.err)
		if full := errors.Is(got, allocator.ErrStoreFull); full != tt.full || !errors.Is(got, tt.err) {
			t.Errorf("%s: noSpace(%v) = %v: full %v, want %v, wrapping the error", tt.name, tt.err, got, full, tt.full)
		}
	}
	if got := noSpace(noSpace(rpctypes.ErrNoSpace)); got.Error() != noSpace(rpctypes.ErrNoSpace).Error() {
		t.Errorf("noSpace twice: got %q, want it wrapped once", got)
	}
}

func TestAlarmNames(t *testing.T) {
	got := alarmNames([]*etcdserverpb.AlarmMember{
		{MemberID: 1, Alarm: etcdserverpb.AlarmType_NOSPACE},
		{MemberID: 2, Alarm: etcdserverpb.AlarmType_NOSPACE},
		{MemberID: 2, Alarm: etcdserverpb.AlarmType_NONE},
		{MemberID: 3, Alarm: etcdserverpb.AlarmType_CORRUPT},
	})
	if fmt.Sprint(got) != "[NOSPACE CORRUPT]" {
		t.Errorf("alarmNames: got %v, want [NOSPACE CORRUPT]", got)
	}
}

// TestSpaceAndCompaction runs on a cluster of its own: compaction is
// cluster-wide, and the keys outside the prefix are counted.
func TestSpaceAndCompaction(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1, Flags: []string{"--quota-backend-bytes", "8388608"}})
	s := openDSN(t, c.DSN("/idgen-a/"))
	ctx := t.Context()

	sp, err := s.Space(ctx)
	if err != nil {
		t.Fatalf("Space: %v", err)
	}
	if sp.Size <= 0 || sp.InUse <= 0 || sp.InUse > sp.Size || sp.Quota != 8388608 || sp.Revision <= 0 || len(sp.Alarms) != 0 {
		t.Errorf("Space of a fresh cluster: got %+v, want sizes, the 8 MiB quota, a revision and no alarm", sp)
	}

	if n, err := s.KeysOutsidePrefix(ctx); err != nil || n != 0 {
		t.Errorf("KeysOutsidePrefix on a cluster of idgen's own: got %d, %v; want 0", n, err)
	}
	for _, k := range []string{"/idgen-a", "/idgen-a0", "/other/x", "/idgen-a/inside"} {
		if _, err := c.Client().Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.KeysOutsidePrefix(ctx); err != nil || n != 3 {
		t.Errorf("KeysOutsidePrefix with three keys outside /idgen-a/: got %d, %v; want 3", n, err)
	}

	if seen, err := s.HistoryCompacted(ctx); err != nil || seen {
		t.Errorf("HistoryCompacted before any compaction: got %v, %v; want false", seen, err)
	}
	rev, err := s.Revision(ctx)
	if err != nil || rev < sp.Revision+4 {
		t.Fatalf("Revision after four puts: got %d, %v; want at least %d", rev, err, sp.Revision+4)
	}
	if err := s.CompactHistory(ctx, rev); err != nil {
		t.Fatalf("CompactHistory(%d): %v", rev, err)
	}
	if seen, err := s.HistoryCompacted(ctx); err != nil || !seen {
		t.Errorf("HistoryCompacted after a compaction: got %v, %v; want true", seen, err)
	}
	// Compacted already (by another node, say): no error.
	if err := s.CompactHistory(ctx, rev-1); err != nil {
		t.Errorf("CompactHistory below the compacted revision: got %v, want nil", err)
	}
	if _, err := c.Client().Get(ctx, "/other/x", clientv3.WithRev(rev-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read at revision %d after compacting to %d: got %v, want ErrCompacted", rev-1, rev, err)
	}
}

// TestSpaceUnreachable: a cluster that does not answer is an error, not
// a report of zeros.
func TestSpaceUnreachable(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1})
	s := openDSN(t, c.DSN("/idgen/"))
	c.Kill(0)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if sp, err := s.Space(ctx); err == nil {
		t.Errorf("Space of a cluster that is down: got %+v, want an error", sp)
	}
}

// TestOneRevisionPerWrite pins what idgen adds to etcd's history, which
// grows until compacted: a heartbeat writes one revision of one key (the
// worker record: the renewal of the etcd lease writes none), and so does a
// strict fetch (the namespace record). It logs the bytes each rewrites,
// the figures of docs/operations.md's sizing.
func TestOneRevisionPerWrite(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1})
	s := openDSN(t, c.DSN("/idgen/"))
	ctx := t.Context()
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 3, MaxWorkerID: 3, Holder: "node-a/1234/abcdef",
		TTL: 10 * time.Second, CeilingMS: time.Now().Add(10 * time.Second).UnixMilli(), MaxClockOffset: time.Second})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 1, MinStep: 1, MaxStep: 1,
		Mode: allocator.ModeStrict, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatal(err)
	}
	// written returns the keys (and their value's size) written since rev.
	written := func(rev int64) map[string]int {
		resp, err := c.Client().Get(ctx, "/idgen/", clientv3.WithPrefix(), clientv3.WithMinModRev(rev+1))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = len(kv.Value)
		}
		return out
	}
	for i := range 3 {
		before, _ := s.Revision(ctx)
		if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "node-a/1234/abcdef",
			FencingVersion: res.Lease.FencingVersion, TTL: 10 * time.Second,
			CeilingMS: time.Now().Add(10 * time.Second).UnixMilli(), MaxClockOffset: time.Second}); err != nil {
			t.Fatalf("Heartbeat %d: %v", i, err)
		}
		after, _ := s.Revision(ctx)
		keys := written(before)
		if after != before+1 || len(keys) != 1 || keys[s.keys.worker(0, 3)] == 0 {
			t.Fatalf("heartbeat %d: revision %d -> %d, keys written %v; want one revision of the worker record", i, before, after, keys)
		}
		t.Logf("heartbeat: one revision, %d bytes of value", keys[s.keys.worker(0, 3)])
	}
	before, _ := s.Revision(ctx)
	if _, err := s.FetchSegment(ctx, "orders", 1); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Revision(ctx)
	if keys := written(before); after != before+1 || len(keys) != 1 || keys[s.keys.namespace("orders")] == 0 {
		t.Fatalf("strict fetch: revision %d -> %d, keys written %v; want one revision of the namespace record", before, after, keys)
	} else {
		t.Logf("strict fetch: one revision, %d bytes of value", keys[s.keys.namespace("orders")])
	}
}
