package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

func TestTransient(t *testing.T) {
	storetest.Classifies(t, "transient", transient, []storetest.ErrCase{
		{rpctypes.ErrNoLeader, true},
		{fmt.Errorf("etcd: claim: %w", rpctypes.ErrTimeoutDueToLeaderFail), true},
		{rpctypes.ErrLeaderChanged, true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{fmt.Errorf("etcd: x: %w", status.Error(codes.Unavailable, "no connection")), true},
		{fmt.Errorf("etcd: fetch: %w", status.Error(codes.Unknown, "raft proposal dropped")), true},
		{status.Error(codes.Unknown, "something else"), false},
		{rpctypes.ErrLeaseNotFound, false},
		{allocator.ErrLeaseLost, false},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{context.Canceled, false},
	})
}

// TestRetryAttempts checks that a try that gets no answer within its
// bound, or meets a member without a leader, is run again, while other
// errors and the caller's context end the retries.
func TestRetryAttempts(t *testing.T) {
	s := &Store{}
	tries := 0
	err := s.retry(t.Context(), "op", func(ctx context.Context, _ *clientv3.Client) (bool, error) {
		tries++
		switch tries {
		case 1: // a member that does not answer
			<-ctx.Done()
			return false, ctx.Err()
		case 2:
			return false, rpctypes.ErrNoLeader
		}
		return true, nil
	})
	if err != nil || tries != 3 || s.transients.Load() != 2 {
		t.Errorf("got %v after %d tries, %d transient; want success on the third try after 2", err, tries, s.transients.Load())
	}

	tries = 0
	err = s.retry(t.Context(), "op", func(context.Context, *clientv3.Client) (bool, error) {
		tries++
		return false, allocator.ErrLeaseLost
	})
	if !errors.Is(err, allocator.ErrLeaseLost) || tries != 1 {
		t.Errorf("got %v after %d tries, want ErrLeaseLost after 1", err, tries)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.retry(ctx, "op", func(context.Context, *clientv3.Client) (bool, error) { return false, rpctypes.ErrNoLeader })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Errorf("retries ended by the context: got %v, want an error wrapping the deadline and the last try's error", err)
	}
}

// TestTriesMoveOffAPausedMember pauses the member a store's operations run
// on: a claim still succeeds, on another member, and the heartbeats after
// it stay there, never waiting for the paused one again.
func TestTriesMoveOffAPausedMember(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{})
	s := openDSN(t, c.DSN("idgen"))
	waitConnected(t, s)
	paused, _ := s.pick()
	if err := c.Signal(paused, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	defer func() { _ = c.Signal(paused, syscall.SIGCONT) }()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Claim with the preferred member paused: %v", err)
	}
	if now, _ := s.pick(); now == paused {
		t.Errorf("tries still prefer the paused member %d", paused)
	}
	before := s.transients.Load()
	if before == 0 {
		t.Errorf("the claim met no unanswered try, want at least the one on the paused member")
	}
	for i := range 5 {
		if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "a",
			FencingVersion: res.Lease.FencingVersion, TTL: 10 * time.Second}); err != nil {
			t.Fatalf("Heartbeat %d: %v", i, err)
		}
	}
	if after := s.transients.Load(); after != before {
		t.Errorf("heartbeats after the claim met %d unanswered or leaderless tries, want 0", after-before)
	}
}

// TestSlowClusterStillServed puts 600 ms of latency on every answer of
// every member: a claim, several round trips, takes longer than a try's
// first bound, and must still succeed on a later try with a longer one.
func TestSlowClusterStillServed(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{})
	var eps []string
	for i, ep := range c.Endpoints() {
		server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
		p := toxiproxy.NewProxy(server, fmt.Sprintf("m%d", i), "127.0.0.1:0", ep)
		if err := p.Start(); err != nil {
			t.Fatalf("toxiproxy: %v", err)
		}
		t.Cleanup(p.Stop)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(
			`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":600}}`)); err != nil {
			t.Fatalf("latency toxic: %v", err)
		}
		eps = append(eps, p.Listen)
	}
	s := openDSN(t, "etcd://"+strings.Join(eps, ",")+"/idgen?dial_timeout=30s")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 0, Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatalf("Claim on a slow cluster: %v", err)
	}
	if s.transients.Load() == 0 {
		t.Errorf("the claim fit in the first try's bound: the test did not slow it enough")
	}
}

// TestConflictsFollowTheLeader: after a lost compare the store prefers the
// Raft leader, unless it moved away from it lately; and asks at most once
// a leaderCheckEvery.
func TestConflictsFollowTheLeader(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{})
	s := openDSN(t, c.DSN("idgen"))
	waitConnected(t, s)
	m := s.members
	ctx := t.Context()
	leaderOf := func() int {
		t.Helper()
		for i := range m.cfgs {
			resp, err := m.clis[i].Status(ctx, m.cfgs[i].Endpoints[0])
			if err != nil {
				t.Fatalf("status of member %d: %v", i, err)
			}
			if resp.Leader == resp.Header.MemberId {
				return i
			}
		}
		t.Fatalf("no member is the leader")
		return -1
	}
	leader := leaderOf()
	clock := time.Now()
	m.now = func() time.Time { return clock }

	m.mu.Lock()
	m.pref, m.checked = (leader+1)%len(m.cfgs), time.Time{}
	m.mu.Unlock()
	m.followLeader(ctx)
	if got, _ := m.pick(); got != leader {
		t.Errorf("after followLeader: got member %d preferred, want the leader %d", got, leader)
	}

	// Within leaderCheckEvery it does not ask again.
	m.mu.Lock()
	m.pref = (leader + 1) % len(m.cfgs)
	m.mu.Unlock()
	m.followLeader(ctx)
	if got, _ := m.pick(); got == leader {
		t.Errorf("followLeader asked again within %s: got the leader %d preferred", leaderCheckEvery, got)
	}

	// A leader that avoid moved away from lately is not preferred again.
	m.avoid(leader)
	clock = clock.Add(leaderCheckEvery)
	m.followLeader(ctx)
	if got, _ := m.pick(); got == leader {
		t.Errorf("followLeader %s after avoid: got the avoided leader %d preferred", leaderCheckEvery, got)
	}
	clock = clock.Add(leaderAvoidFor)
	m.followLeader(ctx)
	if got, _ := m.pick(); got != leader {
		t.Errorf("followLeader %s after avoid: got member %d preferred, want the leader %d", leaderAvoidFor+leaderCheckEvery, got, leader)
	}
}

// waitConnected waits until s has a client of every member.
func waitConnected(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !s.members.connected() {
		if time.Now().After(deadline) {
			t.Fatalf("member clients not connected within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
