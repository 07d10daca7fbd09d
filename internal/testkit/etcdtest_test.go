package testkit

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { os.Exit(EtcdMain(m)) }

func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestEtcdCluster checks that the cluster has three members, each its own
// process answering on its own endpoint, in one Raft group.
func TestEtcdCluster(t *testing.T) {
	eps := EtcdEndpoints(t)
	if len(eps) != EtcdMembers {
		t.Fatalf("got %d endpoints, want %d", len(eps), EtcdMembers)
	}
	cli := newClient(t, eps)
	ctx := t.Context()
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("MemberList: %v", err)
	}
	if len(members.Members) != EtcdMembers {
		t.Errorf("got %d members, want %d", len(members.Members), EtcdMembers)
	}
	ids := map[uint64]bool{}
	var leaders int
	for _, ep := range eps {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatalf("Status(%s): %v", ep, err)
		}
		if ids[st.Header.MemberId] {
			t.Errorf("endpoint %s answers as member %x, like another endpoint", ep, st.Header.MemberId)
		}
		ids[st.Header.MemberId] = true
		if st.Leader == st.Header.MemberId {
			leaders++
		}
		if st.Header.ClusterId != members.Header.ClusterId {
			t.Errorf("endpoint %s in cluster %x, want %x", ep, st.Header.ClusterId, members.Header.ClusterId)
		}
	}
	if leaders != 1 {
		t.Errorf("got %d members that say they lead, want 1", leaders)
	}
}

// TestEtcdDSN checks that each test gets a fresh prefix and that its keys are
// deleted when the test ends.
func TestEtcdDSN(t *testing.T) {
	var dsns []string
	for i := range 2 {
		t.Run(fmt.Sprint("inner", i), func(t *testing.T) {
			dsn := EtcdDSN(t)
			dsns = append(dsns, dsn)
			cli := newClient(t, EtcdEndpoints(t))
			prefix := prefixOf(t, dsn)
			resp, err := cli.Get(t.Context(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || resp.Count != 0 {
				t.Fatalf("fresh prefix %s: %d keys (%v), want 0", prefix, resp.Count, err)
			}
			if _, err := cli.Put(t.Context(), prefix+"/k", "v"); err != nil {
				t.Fatalf("Put: %v", err)
			}
		})
	}
	if len(dsns) != 2 {
		t.Fatalf("got %d DSNs, want 2", len(dsns))
	}
	if dsns[0] == dsns[1] {
		t.Errorf("two tests got the same DSN %s", dsns[0])
	}
	re := regexp.MustCompile(`^etcd://127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+/idgen-test/testetcddsn_inner\d_[0-9a-f]{16}$`)
	cli := newClient(t, EtcdEndpoints(t))
	for _, dsn := range dsns {
		if !re.MatchString(dsn) {
			t.Errorf("DSN %q does not match %s", dsn, re)
		}
		prefix := prefixOf(t, dsn)
		resp, err := cli.Get(t.Context(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 0 {
			t.Errorf("prefix %s after its test: %d keys (%v), want 0", prefix, resp.Count, err)
		}
	}
}

func prefixOf(t *testing.T, dsn string) string {
	t.Helper()
	rest := strings.TrimPrefix(dsn, "etcd://")
	_, path, ok := strings.Cut(rest, "/")
	if !ok {
		t.Fatalf("DSN %q has no prefix", dsn)
	}
	return "/" + path
}

// TestEtcdMemberDown checks, on a cluster of the test's own, that the cluster
// serves writes with one member paused or killed, as a three-member cluster
// should (the members really are three processes in one Raft group), and
// that a killed member started again rejoins.
func TestEtcdMemberDown(t *testing.T) {
	c := StartEtcd(t, EtcdOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	eps := c.Endpoints()
	put := func(cli *clientv3.Client, what string) {
		t.Helper()
		// When the member that led went down, writes time out until the
		// other two have elected a leader.
		for {
			_, err := cli.Put(ctx, "/k", what)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("Put with %s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := c.Signal(2, sigStop); err != nil {
		t.Fatalf("stop member 2: %v", err)
	}
	put(newClient(t, eps[:2]), "member 2 paused")
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	if _, err := newClient(t, eps[2:]).Get(short, "/k"); err == nil {
		t.Errorf("Get from the paused member succeeded, want an error")
	}
	cancel2()
	if err := c.Signal(2, sigCont); err != nil {
		t.Fatalf("continue member 2: %v", err)
	}

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	c.Kill(leader)
	var rest []string
	for i, ep := range eps {
		if i != leader {
			rest = append(rest, ep)
		}
	}
	put(newClient(t, rest), "the leader killed")
	if now, err := c.Leader(ctx); err != nil || now == leader {
		t.Errorf("Leader after killing member %d: got %d, %v; want another member", leader, now, err)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := newClient(t, eps[leader:leader+1]).Get(rctx, "/k")
		cancel()
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "the leader killed" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted member %d did not catch up: %v", leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestUniqueName(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9_]+_[0-9a-f]{16}$`)
	a, b := UniqueName(t), UniqueName(t)
	if a == b || !re.MatchString(a) || !strings.HasPrefix(a, "testuniquename_") {
		t.Errorf("UniqueName: got %q and %q, want two different names matching %s and starting testuniquename_", a, b, re)
	}
}
