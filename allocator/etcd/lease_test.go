package etcd

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
)

// getKey returns the key-value of key, or nil.
func getKey(t *testing.T, s *Store, key string) *clientv3.GetResponse {
	t.Helper()
	resp, err := s.cli.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return resp
}

// TestExpiryIsEtcds checks that etcd alone decides when a worker ID is free
// again: the worker record is on no etcd lease (its ceiling outlives the
// holder), the holder key is on one; a claim fails while the holder key
// lives, even when store time and the claimer's clock are past the expiry
// the record shows, and succeeds, strictly above the old ceiling, once etcd
// has expired the lease.
func TestExpiryIsEtcds(t *testing.T) {
	ctx := t.Context()
	s, dsn := openTestDSN(t)
	req := allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 4, MaxWorkerID: 4, Holder: "old", TTL: time.Millisecond, CeilingMS: 777}
	old, err := s.Claim(ctx, req)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	row := getKey(t, s, s.keys.worker(1, 4))
	if len(row.Kvs) != 1 || row.Kvs[0].Lease != 0 {
		t.Fatalf("worker record: got %d keys, lease %x; want one key on no etcd lease", len(row.Kvs), row.Kvs[0].Lease)
	}
	hold := getKey(t, s, s.keys.holder(1, 4))
	if len(hold.Kvs) != 1 || hold.Kvs[0].Lease == 0 {
		t.Fatalf("holder key: got %d keys, want one on an etcd lease", len(hold.Kvs))
	}
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(hold.Kvs[0].Lease), clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	if ttl.GrantedTTL < 1 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != s.keys.holder(1, 4) {
		t.Errorf("etcd lease: granted %ds, keys %q; want >= 1s holding only the holder key", ttl.GrantedTTL, ttl.Keys)
	}

	// The record says the lease expired a millisecond after the claim, and
	// the claimer's clock is an hour ahead; etcd's lease (at least 1 s)
	// still lives, so the worker ID is not free.
	other := openDSN(t, dsn)
	other.now = func() time.Time { return time.Now().Add(time.Hour) }
	time.Sleep(5 * time.Millisecond)
	req.Holder, req.TTL, req.CeilingMS = "new", time.Minute, 0
	if _, err := other.Claim(ctx, req); !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Fatalf("claim while etcd's lease lives: got %v, want ErrNoWorkerAvailable", err)
	}

	deadline := time.Now().Add(15 * time.Second)
	var res allocator.ClaimResult
	for {
		if res, err = other.Claim(ctx, req); !errors.Is(err, allocator.ErrNoWorkerAvailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("claim after etcd expired the lease: %v", err)
	}
	if len(getKey(t, s, s.keys.holder(1, 4)).Kvs) != 1 {
		t.Errorf("no holder key after the takeover")
	}
	if res.PrevHolder != "old" || res.PrevCeilingMS != 777 || res.Lease.CeilingMS < 777 || res.Lease.FencingVersion != old.Lease.FencingVersion+1 {
		t.Errorf("takeover: previous %q ceiling %d, ceiling %d version %d; want \"old\" 777, >= 777, %d",
			res.PrevHolder, res.PrevCeilingMS, res.Lease.CeilingMS, res.Lease.FencingVersion, old.Lease.FencingVersion+1)
	}
}

// TestHeartbeatRenewsEtcdLease checks that a heartbeat with the claim's ttl
// renews the holder key's etcd lease, and that one with another ttl moves
// the key to a new lease of that ttl and revokes the old one.
func TestHeartbeatRenewsEtcdLease(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	leaseOf := func() (clientv3.LeaseID, *clientv3.LeaseTimeToLiveResponse) {
		t.Helper()
		kvs := getKey(t, s, s.keys.holder(0, 0)).Kvs
		if len(kvs) != 1 {
			t.Fatalf("holder key: %d keys, want 1", len(kvs))
		}
		id := clientv3.LeaseID(kvs[0].Lease)
		ttl, err := s.cli.TimeToLive(ctx, id)
		if err != nil {
			t.Fatalf("TimeToLive: %v", err)
		}
		return id, ttl
	}
	first, ttl := leaseOf()
	if ttl.GrantedTTL != 10 {
		t.Errorf("claim's etcd lease: granted %ds, want 10", ttl.GrantedTTL)
	}
	time.Sleep(1100 * time.Millisecond) // let the lease run down a second
	hb := allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "a", FencingVersion: 1, TTL: 10 * time.Second}
	if _, _, err := s.Heartbeat(ctx, hb); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	same, ttl := leaseOf()
	if same != first || ttl.TTL < 9 {
		t.Errorf("after a heartbeat with the same ttl: lease %x with %ds left, want %x renewed to about 10s", same, ttl.TTL, first)
	}
	hb.TTL = 2500 * time.Millisecond
	l, _, err := s.Heartbeat(ctx, hb)
	if err != nil {
		t.Fatalf("Heartbeat with another ttl: %v", err)
	}
	moved, ttl := leaseOf()
	if moved == first || ttl.GrantedTTL != 3 {
		t.Errorf("after a heartbeat with ttl 2.5s: lease %x granted %ds, want a new lease of 3s", moved, ttl.GrantedTTL)
	}
	if got := l.ExpiresAt.Sub(l.HeartbeatAt); got != 2500*time.Millisecond {
		t.Errorf("record: expires_at - heartbeat_at = %v, want 2.5s", got)
	}
	old, err := s.cli.TimeToLive(ctx, first)
	if err != nil {
		t.Fatalf("TimeToLive(old): %v", err)
	}
	if old.TTL != -1 {
		t.Errorf("old etcd lease still has %ds to live, want it revoked", old.TTL)
	}
}

// TestReleaseDeletesHolderKey checks that a release deletes the holder key
// and revokes its etcd lease, keeping the worker record.
func TestReleaseDeletesHolderKey(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: time.Minute, CeilingMS: 10})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	lease := clientv3.LeaseID(getKey(t, s, s.keys.holder(0, 0)).Kvs[0].Lease)
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: "a", FencingVersion: 1, LastTimestampMS: 10}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := len(getKey(t, s, s.keys.holder(0, 0)).Kvs); n != 0 {
		t.Errorf("holder key after release: %d keys, want none", n)
	}
	if ttl, err := s.cli.TimeToLive(ctx, lease); err != nil || ttl.TTL != -1 {
		t.Errorf("etcd lease after release: %v, %v; want revoked", ttl, err)
	}
	if kvs := getKey(t, s, s.keys.worker(0, 0)).Kvs; len(kvs) != 1 {
		t.Errorf("worker record after release: %d keys, want 1", len(kvs))
	}
}

// TestConcurrentClaimsConflict checks that concurrent claims really collide
// in etcd (their compares fail) and that the store resolves the collisions
// by retrying.
func TestConcurrentClaimsConflict(t *testing.T) {
	storetest.ClaimsCollide(t, openTest)
}

// TestClaimOutlivesItsGrant checks that a claim whose etcd lease expired
// before its transaction (retries outlasting it) grants another and still
// claims, instead of failing.
func TestClaimOutlivesItsGrant(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	var grants []clientv3.LeaseID
	s.grantedHook = func(id clientv3.LeaseID) {
		grants = append(grants, id)
		if len(grants) == 1 {
			if _, err := s.cli.Revoke(ctx, id); err != nil {
				t.Errorf("Revoke: %v", err)
			}
		}
	}
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 9, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: time.Minute})
	if err != nil || res.Lease.FencingVersion != 1 {
		t.Fatalf("Claim: %+v, %v", res, err)
	}
	if len(grants) != 2 {
		t.Errorf("claim granted %d etcd leases, want 2 (the first revoked under it)", len(grants))
	}
	kvs := getKey(t, s, s.keys.holder(9, 0)).Kvs
	if len(kvs) != 1 || len(grants) < 2 || clientv3.LeaseID(kvs[0].Lease) != grants[len(grants)-1] {
		t.Errorf("holder key: %d keys, want one on the second lease", len(kvs))
	}
}
