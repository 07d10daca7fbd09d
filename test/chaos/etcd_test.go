//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/etcdtest"
)

// The etcd scenarios run the nodes on a three-member etcd cluster of their
// own (internal/etcdtest: three etcd processes on loopback ports), and
// inject faults into the cluster instead of a database server: they never
// touch the shared PostgreSQL and MariaDB servers.
//
//	go test -tags chaos -count=1 -v -run 'TestChaosEtcd' ./test/chaos/

// etcdEnv is the cluster of one etcd scenario.
type etcdEnv struct {
	cluster *etcdtest.Cluster
	// proxies stand between the nodes and each member when the scenario
	// asked for them (proxies[i] in front of member i); nil otherwise.
	proxies []*toxicProxy
	dsn     string // what the nodes and the harness use
}

// newEtcdEnv starts a cluster; withProxies puts a toxiproxy in front of
// each member and names the proxies in the DSN.
func newEtcdEnv(t *testing.T, withProxies bool) *etcdEnv {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{})
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
	sum.mu.Lock()
	defer sum.mu.Unlock()
	fmt.Printf("chaos: summary of %d lines, total %s\n", len(sum.lines), time.Since(began).Round(time.Second))
	for _, l := range sum.lines {
		fmt.Println(l)
	}
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

// etcd-leader-kill: kill -9 the member that leads, under load; restart it
// after 2 × ttl; then kill the new leader the same way. Recovery: from each
// kill to the slowest node's first strict draw served, at most 5 s.
func scenarioEtcdLeaderKill(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	type kill struct {
		member int
		at     time.Time
	}
	var kills []kill
	for range 2 {
		time.Sleep(3 * time.Second)
		m := ee.leader(e.t)
		at := time.Now()
		ee.cluster.Kill(m)
		kills = append(kills, kill{m, at})
		time.Sleep(2 * leaseTTL)
		if err := ee.cluster.Restart(m); err != nil {
			out.problem("restart member %d: %v", m, err)
		}
	}
	time.Sleep(3 * time.Second)
	draws := finish(l, &out)
	var worst time.Duration
	for k, kl := range kills {
		until := time.Now()
		if k+1 < len(kills) {
			until = kills[k+1].at
		}
		rec, problems := storeRecovery(draws, c, kl.at, until)
		out.problems = append(out.problems, problems...)
		worst = max(worst, rec)
		out.note("kill%d_member=m%d kill%d_recovery=%s", k+1, kl.member, k+1, rec.Round(time.Millisecond))
	}
	out.recovery = worst
	if worst > 5*time.Second {
		out.problem("recovery took %s after a leader kill, want at most 5s", worst.Round(time.Millisecond))
	}
	return c, l, draws, out
}

// etcd-member-pause: SIGSTOP the member that leads for 2 × ttl, under
// load, then SIGCONT; then the same with a follower. The paused member's
// connections stay open and answer nothing. Recovery: from each pause to
// the slowest node's first strict draw served.
func scenarioEtcdMemberPause(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	type pause struct {
		member int
		role   string
		at     time.Time
	}
	var pauses []pause
	for _, role := range []string{"leader", "follower"} {
		time.Sleep(3 * time.Second)
		m := ee.leader(e.t)
		if role == "follower" {
			m = (m + 1) % etcdtest.Members
		}
		at := time.Now()
		if err := ee.cluster.Signal(m, syscall.SIGSTOP); err != nil {
			out.problem("SIGSTOP member %d: %v", m, err)
		}
		pauses = append(pauses, pause{m, role, at})
		time.Sleep(2 * leaseTTL)
		if err := ee.cluster.Signal(m, syscall.SIGCONT); err != nil {
			out.problem("SIGCONT member %d: %v", m, err)
		}
	}
	time.Sleep(3 * time.Second)
	draws := finish(l, &out)
	var worst time.Duration
	for k, p := range pauses {
		until := time.Now()
		if k+1 < len(pauses) {
			until = pauses[k+1].at
		}
		rec, problems := storeRecovery(draws, c, p.at, until)
		out.problems = append(out.problems, problems...)
		worst = max(worst, rec)
		out.note("pause%d=%s_m%d pause%d_recovery=%s", k+1, p.role, p.member, k+1, rec.Round(time.Millisecond))
	}
	out.recovery = worst
	return c, l, draws, out
}

// etcd-partition: the nodes reach the members through a toxiproxy each;
// the proxy in front of the member that leads drops everything, both
// ways, for 2 × ttl, then heals; then the same in front of a follower. The
// members still see each other: only idgen is cut from one of them.
// Recovery: from each cut to the slowest node's first strict draw served.
func scenarioEtcdPartition(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	type cut struct {
		member int
		role   string
		at     time.Time
	}
	var cuts []cut
	for _, role := range []string{"leader", "follower"} {
		time.Sleep(3 * time.Second)
		m := ee.leader(e.t)
		if role == "follower" {
			m = (m + 1) % etcdtest.Members
		}
		p := ee.proxies[m]
		at := time.Now()
		p.add(e.t, "cut-up", "timeout", "upstream", `{"timeout":0}`)
		p.add(e.t, "cut-down", "timeout", "downstream", `{"timeout":0}`)
		cuts = append(cuts, cut{m, role, at})
		time.Sleep(2 * leaseTTL)
		p.remove(e.t, "cut-up")
		p.remove(e.t, "cut-down")
	}
	time.Sleep(3 * time.Second)
	draws := finish(l, &out)
	var worst time.Duration
	for k, ct := range cuts {
		until := time.Now()
		if k+1 < len(cuts) {
			until = cuts[k+1].at
		}
		rec, problems := storeRecovery(draws, c, ct.at, until)
		out.problems = append(out.problems, problems...)
		worst = max(worst, rec)
		out.note("cut%d=%s_m%d cut%d_recovery=%s", k+1, ct.role, ct.member, k+1, rec.Round(time.Millisecond))
	}
	out.recovery = worst
	return c, l, draws, out
}

// etcd-cluster-restart: kill -9 every member and start them again at once;
// later kill them all and keep the cluster down for 2 × ttl, so that every
// node's lease runs out, then start it again. Recovery: from the cluster
// answering a linearizable read again to the slowest node's first 200 of
// each kind (Snowflake, buffered and strict namespace); at most 5 s.
func scenarioEtcdClusterRestart(e *env, ee *etcdEnv) (*cluster, *load, []Draw, outcome) {
	c, l := etcdSetup(e)
	out := outcome{recovery: -1}
	type phase struct {
		hold       time.Duration
		down, back time.Time
	}
	phases := []*phase{{hold: 0}, {hold: 2 * leaseTTL}}
	for _, ph := range phases {
		time.Sleep(3 * time.Second)
		ph.down = time.Now()
		for i := range etcdtest.Members {
			ee.cluster.Kill(i)
		}
		time.Sleep(ph.hold)
		for i := range etcdtest.Members {
			if err := ee.cluster.Restart(i); err != nil {
				out.problem("restart member %d: %v", i, err)
			}
		}
		back, err := ee.waitReady(e.t, time.Minute)
		if err != nil {
			out.problem("%v", err)
			back = time.Now()
		}
		ph.back = back
		time.Sleep(7 * time.Second)
	}
	draws := finish(l, &out)
	var worst time.Duration
	for k, ph := range phases {
		next := time.Now()
		if k+1 < len(phases) {
			next = phases[k+1].down
		}
		var slowest time.Duration
		for i := range c.nodes {
			for _, ns := range []string{"", "orders", "ledger"} {
				first, ok := FirstOK(draws, i, ns, ph.back)
				if !ok || first.After(next) {
					out.problem("node-%d served no %q draw between the cluster coming back and the next restart", i, ns)
					continue
				}
				slowest = max(slowest, first.Sub(ph.back))
			}
		}
		worst = max(worst, slowest)
		out.note("phase%d_down_for=%s phase%d_recovery=%s", k+1, ph.back.Sub(ph.down).Round(time.Millisecond),
			k+1, slowest.Round(time.Millisecond))
	}
	out.recovery = worst
	if worst > 5*time.Second {
		out.problem("recovery took %s after the cluster answered again, want at most 5s", worst.Round(time.Millisecond))
	}
	return c, l, draws, out
}
