//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// The etcd scenarios run the nodes on a three-member etcd cluster of their
// own (internal/testkit: three etcd processes on loopback ports), and
// inject faults into the cluster instead of a database server: they never
// touch the shared PostgreSQL and MariaDB servers.
//
//	go test -tags chaos -count=1 -v -run 'TestChaosEtcd' ./test/chaos/

// etcdEnv is the cluster of one etcd scenario.
type etcdEnv struct {
	cluster *testkit.EtcdCluster
	// proxies stand between the nodes and each member when the scenario
	// asked for them (proxies[i] in front of member i); nil otherwise.
	proxies []*toxicProxy
	dsn     string // what the nodes and the harness use
}

// newEtcdEnv starts a cluster; withProxies puts a toxiproxy in front of
// each member and names the proxies in the DSN.
func newEtcdEnv(t *testing.T, withProxies bool) *etcdEnv {
	t.Helper()
	c := testkit.StartEtcd(t, testkit.EtcdOptions{})
	env := &etcdEnv{cluster: c}
	eps := c.Endpoints()
	if withProxies {
		for i, ep := range eps {
			p := newToxicProxy(t, fmt.Sprintf("etcd-m%d", i), ep)
			env.proxies = append(env.proxies, p)
			eps[i] = p.addr
		}
	}
	env.dsn = "etcd://" + strings.Join(eps, ",") + "/idgen-chaos"
	return env
}

// leader returns the index of the member that leads now.
func (ee *etcdEnv) leader(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		i, err := ee.cluster.Leader(ctx)
		if err == nil {
			return i
		}
		if ctx.Err() != nil {
			t.Fatalf("etcd leader: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReady waits until the cluster answers a linearizable read and
// returns when it did.
func (ee *etcdEnv) waitReady(t *testing.T, timeout time.Duration) (time.Time, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ee.cluster.WaitReady(ctx); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// etcdScenario is one etcd fault scenario.
type etcdScenario struct {
	name    string
	proxies bool
	run     func(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome)
}

func etcdScenarios() []etcdScenario {
	return []etcdScenario{
		{"etcd-leader-kill", false, scenarioEtcdLeaderKill},
		{"etcd-member-pause", false, scenarioEtcdMemberPause},
		{"etcd-partition", true, scenarioEtcdPartition},
		{"etcd-cluster-restart", false, scenarioEtcdClusterRestart},
	}
}

// TestChaosEtcd runs the etcd fault scenarios, each on a cluster of its
// own.
func TestChaosEtcd(t *testing.T) {
	began := time.Now()
	bin := buildIdgen(t, t.TempDir())
	sum := &summaries{}
	for _, sc := range etcdScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			ee := newEtcdEnv(t, sc.proxies)
			e := &env{t: t, bin: bin, db: database{name: "etcd", dsn: ee.dsn}, sum: sum}
			e.run(scenario{name: sc.name, run: func(e *env) (*cluster, *load, []Draw, outcome) { return sc.run(e, ee) }})
		})
	}
	sum.print(began)
}

// etcdSetup migrates, creates the namespaces every etcd scenario draws
// (orders: buffered, step 1000; ledger: strict, every draw its own etcd
// transaction), and starts four nodes on pool 0-4 (one spare worker ID)
// drawing all three kinds. The strict draws are the scenarios' probe of
// the store: a node answers them only while it can write to etcd.
func etcdSetup(e *env) (*cluster, *load) {
	migrate(e.t, e.bin, e.db.dsn)
	createNamespace(e.t, e.bin, e.db.dsn, "orders", "--step", "1000")
	createNamespace(e.t, e.bin, e.db.dsn, "ledger", "--step", "1", "--mode", "strict")
	c := newCluster(e.t, e.bin, "0-4", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(
		loadSpec{Nodes: span(0, 3), Clients: 2, Interval: 20 * time.Millisecond},
		loadSpec{Nodes: span(0, 3), Count: 100, Namespace: "orders", Interval: 20 * time.Millisecond},
		loadSpec{Nodes: span(0, 3), Count: 10, Namespace: "ledger", Interval: 50 * time.Millisecond},
	)
	return c, l
}

// storeRecovery returns, over every node, the longest time from at to the
// node's first strict (ledger) 200 to a request sent at or after at, and a
// problem for each node with none before until.
func storeRecovery(draws []Draw, c *cluster, at, until time.Time) (time.Duration, []string) {
	var worst time.Duration
	var problems []string
	for i := range c.nodes {
		first, ok := FirstOK(draws, i, "ledger", at)
		if !ok || first.After(until) {
			problems = append(problems, fmt.Sprintf("node-%d: no strict draw served between %s and %s",
				i, at.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano)))
			continue
		}
		worst = max(worst, first.Sub(at))
	}
	return worst, problems
}

// finish waits until the load has acknowledged a million IDs (or the
// bound passed), stops it and checks the count.
func finish(l *load, out *outcome) []Draw {
	const want = 1_000_000
	l.waitAcked(want, 60*time.Second)
	draws := l.stop()
	if got := l.acked.Load(); got < want {
		out.problem("acknowledged %d IDs, want at least %d", got, want)
	}
	return draws
}

// memberFault is one fault of an etcd member: which, the role it had when
// picked, and when the fault began.
type memberFault struct {
	member int
	role   string // "leader" or "follower"
	at     time.Time
}

// faultMembers is the scenario of faults on one member at a time, under
// the load etcdSetup starts: one fault per role, each 3 s after the
// previous one healed, on the member that leads, or for "follower" the
// member after it, held for 2 × ttl, then healed. 3 s after the last, the
// load is finished and each fault's recovery measured (storeRecovery)
// until the next fault began; note records each fault's figures, k
// counting from 1. The outcome's recovery is the slowest.
func (ee *etcdEnv) faultMembers(e *env, roles []string, fault, heal func(out *outcome, member int),
	note func(out *outcome, k int, f memberFault, rec time.Duration)) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	var faults []memberFault
	for _, role := range roles {
		time.Sleep(3 * time.Second)
		m := ee.leader(e.t)
		if role == "follower" {
			m = (m + 1) % testkit.EtcdMembers
		}
		at := time.Now()
		fault(&out, m)
		faults = append(faults, memberFault{m, role, at})
		time.Sleep(2 * leaseTTL)
		heal(&out, m)
	}
	time.Sleep(3 * time.Second)
	draws := finish(l, &out)
	var worst time.Duration
	for k, f := range faults {
		until := time.Now()
		if k+1 < len(faults) {
			until = faults[k+1].at
		}
		rec, problems := storeRecovery(draws, c, f.at, until)
		out.problems = append(out.problems, problems...)
		worst = max(worst, rec)
		note(&out, k+1, f, rec)
	}
	out.recovery = worst
	return c, l, draws, out
}

// roleNote notes fault k as <kind>k=<role>_m<member> with its recovery.
func roleNote(kind string) func(out *outcome, k int, f memberFault, rec time.Duration) {
	return func(out *outcome, k int, f memberFault, rec time.Duration) {
		out.note("%s%d=%s_m%d %s%d_recovery=%s", kind, k, f.role, f.member, kind, k, rec.Round(time.Millisecond))
	}
}

// etcd-leader-kill: kill -9 the member that leads, under load; restart it
// after 2 × ttl; then kill the new leader the same way. Recovery: from each
// kill to the slowest node's first strict draw served, at most 5 s.
func scenarioEtcdLeaderKill(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	kill := func(_ *outcome, m int) { ee.cluster.Kill(m) }
	restart := func(out *outcome, m int) {
		if err := ee.cluster.Restart(m); err != nil {
			out.problem("restart member %d: %v", m, err)
		}
	}
	c, l, draws, out := ee.faultMembers(e, []string{"leader", "leader"}, kill, restart,
		func(out *outcome, k int, f memberFault, rec time.Duration) {
			out.note("kill%d_member=m%d kill%d_recovery=%s", k, f.member, k, rec.Round(time.Millisecond))
		})
	if out.recovery > 5*time.Second {
		out.problem("recovery took %s after a leader kill, want at most 5s", out.recovery.Round(time.Millisecond))
	}
	return c, l, draws, out
}

// etcd-member-pause: SIGSTOP the member that leads for 2 × ttl, under
// load, then SIGCONT; then the same with a follower. The paused member's
// connections stay open and answer nothing. Recovery: from each pause to
// the slowest node's first strict draw served.
func scenarioEtcdMemberPause(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	signal := func(sig syscall.Signal, name string) func(out *outcome, m int) {
		return func(out *outcome, m int) {
			if err := ee.cluster.Signal(m, sig); err != nil {
				out.problem("%s member %d: %v", name, m, err)
			}
		}
	}
	return ee.faultMembers(e, []string{"leader", "follower"}, signal(syscall.SIGSTOP, "SIGSTOP"), signal(syscall.SIGCONT, "SIGCONT"),
		roleNote("pause"))
}

// etcd-partition: the nodes reach the members through a toxiproxy each;
// the proxy in front of the member that leads drops everything, both
// ways, for 2 × ttl, then heals; then the same in front of a follower. The
// members still see each other: only idgen is cut from one of them.
// Recovery: from each cut to the slowest node's first strict draw served.
func scenarioEtcdPartition(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	cut := func(_ *outcome, m int) {
		ee.proxies[m].add(e.t, "cut-up", "timeout", "upstream", `{"timeout":0}`)
		ee.proxies[m].add(e.t, "cut-down", "timeout", "downstream", `{"timeout":0}`)
	}
	heal := func(_ *outcome, m int) {
		ee.proxies[m].remove(e.t, "cut-up")
		ee.proxies[m].remove(e.t, "cut-down")
	}
	return ee.faultMembers(e, []string{"leader", "follower"}, cut, heal, roleNote("cut"))
}

// etcd-cluster-restart: kill -9 every member and start them again at once;
// later kill them all and keep the cluster down for 2 × ttl, so that every
// node's lease runs out, then start it again. Recovery: from the cluster
// answering a linearizable read again to the slowest node's first 200 of
// each kind (Snowflake, buffered and strict namespace); at most 5 s.
func scenarioEtcdClusterRestart(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	outages := storeOutages(&out, func(hold time.Duration) (time.Time, error) {
		for i := range testkit.EtcdMembers {
			ee.cluster.Kill(i)
		}
		time.Sleep(hold)
		for i := range testkit.EtcdMembers {
			if err := ee.cluster.Restart(i); err != nil {
				out.problem("restart member %d: %v", i, err)
			}
		}
		return ee.waitReady(e.t, time.Minute)
	})
	draws := finish(l, &out)
	outageRecovery(c, draws, &out, outages, "the cluster", []string{"", "orders", "ledger"})
	return c, l, draws, out
}
