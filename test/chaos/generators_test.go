//go:build chaos

package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
)

// The local generators' scenarios: processes that hold a worker lease
// through a node's lease API (/v1/leases) and make Snowflake IDs in their
// own memory with client.Generator (client/internal/holder), beside the
// nodes, on the lease API's own worker IDs (--lease-api-worker-ids). Their
// IDs go through the same oracle as the nodes': a batch a generator made
// is a draw of holder "api:gens/<name>", sent and received at the wall
// clock before and after it, checked against the tenures lease_events
// records for that holder.

// Tokens of the generator scenarios' nodes: one caller, gens, for the
// generators' leases and the load clients' /ids.
const (
	genTokenName = "gens"
	genSecret    = "chaos-generators-secret"
)

// genScenarios are the generator scenarios, run by TestChaosGenerators on
// PostgreSQL, then MySQL/MariaDB, then SQLite (the nodes of a scenario
// share one SQLite file). None of them touches the database itself:
// gen-blackhole's proxy stands between a generator and its node's lease
// API, so every one applies to SQLite as it is.
func genScenarios() []scenario {
	return []scenario{
		{"gen-pause", scenarioGenPause},
		{"gen-blackhole", scenarioGenBlackhole},
		{"gen-kill", scenarioGenKill},
		{"gen-abuse", scenarioGenAbuse},
	}
}

// TestChaosGenerators runs the generator scenarios:
//
//	go test -tags chaos -count=1 -v -run TestChaosGenerators ./test/chaos/
//
// The SQLite part needs no database server:
//
//	go test -tags chaos -count=1 -v -run 'TestChaosGenerators/sqlite' ./test/chaos/
func TestChaosGenerators(t *testing.T) {
	began := time.Now()
	bin := buildIdgen(t, t.TempDir())
	sum := &summaries{}
	for _, db := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(db, func(t *testing.T) {
			for _, sc := range genScenarios() {
				runOnDatabase(t, bin, db, sum, sc)
			}
		})
	}
	sum.print(began)
}

// buildHolder builds the lease holder (client/internal/holder) into dir.
func buildHolder(t testing.TB, dir string) string {
	t.Helper()
	return testkit.MustBuild(t, dir, "./client/internal/holder")
}

// genCluster is a cluster whose nodes serve the lease API, and the
// generators that lease from it.
type genCluster struct {
	*cluster
	holderBin  string
	genWorkers string // the lease API's worker IDs, "A-B"
	gens       []*gen
}

// newGenCluster prepares n nodes on e's database with the gens token, on
// pool workers, whose lease API grants genWorkers (not started).
func newGenCluster(e *env, workers, genWorkers string, n int) *genCluster {
	t := e.t
	tokens := filepath.Join(t.TempDir(), "tokens")
	line := fmt.Sprintf("%s ids,leases %s\n", genTokenName, idgen.HashSecret(genSecret))
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, e.bin, workers, []string{e.db.dsn}, n)
	for _, nd := range c.nodes {
		nd.flags = append(nd.flags, "--tokens-file", tokens, "--lease-api-worker-ids", genWorkers)
	}
	return &genCluster{cluster: c, holderBin: buildHolder(t, t.TempDir()), genWorkers: genWorkers}
}

// gen is one generator process (the holder), restartable; every
// incarnation appends to the same output file. Its name is its holder
// name; the lease table says "api:gens/<name>" (holder).
type gen struct {
	restartable
	gc  *genCluster
	idx int
	url string // the lease API it talks to
	out string
}

// addGen prepares a generator talking to url (not started).
func (gc *genCluster) addGen(url string) *gen {
	i := len(gc.gens)
	name := fmt.Sprintf("gen-%d", i)
	g := &gen{restartable: restartable{t: gc.t, name: name, logPath: filepath.Join(gc.dir, name+".log")},
		gc: gc, idx: i, url: url, out: filepath.Join(gc.dir, name+".out")}
	gc.gens = append(gc.gens, g)
	return g
}

// start starts a new incarnation with the nodes' lease settings.
func (g *gen) start() {
	g.t.Helper()
	g.launch(g.gc.holderBin, []string{"--url", g.url, "--holder", g.name, "--out", g.out,
		"--workers", g.gc.genWorkers, "--ttl", leaseTTL.String(), "--heartbeat", heartbeat.String(),
		"--batch", "100", "--interval", "10ms", "--start-timeout", "120s"},
		testkit.Env("IDGEN_HOLDER_TOKEN="+genSecret), false)
}

// holder is g's holder as the lease table names it.
func (g *gen) holder() string { return allocator.RemoteHolderPrefix + genTokenName + "/" + g.name }

// unexpectedExit describes an incarnation that exited without being told.
func (g *gen) unexpectedExit() string {
	if p, ok := g.exitedOnItsOwn(); ok {
		b, _ := os.ReadFile(g.logPath)
		return fmt.Sprintf("%s exited on its own (%v): %s", g.name, p.Err(), b)
	}
	return ""
}

// stopGens stops every running generator gracefully (it releases its
// lease) and returns a problem for each that did not exit 0 or exited on
// its own before.
func (gc *genCluster) stopGens() []string {
	var problems []string
	for _, g := range gc.gens {
		if p := g.unexpectedExit(); p != "" {
			problems = append(problems, p)
		}
		if g.running() {
			if code := g.stop(15 * time.Second); code != 0 {
				problems = append(problems, fmt.Sprintf("%s exited %d after SIGTERM", g.name, code))
			}
		}
	}
	return problems
}

// genOutput is what a generator's incarnations wrote.
type genOutput struct {
	draws    []Draw
	leases   []genLease
	refusals []genRefusal
}

type genLease struct {
	at              time.Time
	worker, version int64
}

type genRefusal struct {
	at     time.Time
	reason string
}

// read parses the generator's output into draws for the oracle (one per
// batch), its leases and its refusals.
func (g *gen) read() genOutput {
	t := g.gc.t
	t.Helper()
	var o genOutput
	f, err := os.Open(g.out)
	if errors.Is(err, os.ErrNotExist) {
		return o
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	holder := g.holder()
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return o // a last line cut by a kill has no newline: skipped
		}
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(line)
		num := func(i int) int64 {
			n, err := strconv.ParseInt(fields[i], 10, 64)
			if err != nil {
				t.Fatalf("%s: bad line %q", g.name, line)
			}
			return n
		}
		switch fields[0] {
		case "lease":
			o.leases = append(o.leases, genLease{time.Unix(0, num(1)), num(3), num(4)})
		case "ids":
			d := Draw{Node: 100 + g.idx, Holder: holder, Send: time.Unix(0, num(1)), Recv: time.Unix(0, num(2)),
				Status: 200, Source: "snowflake", IDs: make([]int64, 0, len(fields)-6)}
			for i := 6; i < len(fields); i++ {
				d.IDs = append(d.IDs, num(i))
			}
			d.Count = len(d.IDs)
			o.draws = append(o.draws, d)
		case "refused":
			o.refusals = append(o.refusals, genRefusal{time.Unix(0, num(1)), fields[2]})
		}
	}
}

// waitLease waits until g reported a lease after from, and returns it.
func (g *gen) waitLease(from time.Time, timeout time.Duration) (genLease, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range g.read().leases {
			if !l.at.Before(from) {
				return l, true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return genLease{}, false
}

// collect reads every generator's draws, and notes the refusals.
func (gc *genCluster) collect(out *outcome) []Draw {
	var draws []Draw
	refusals := map[string]int{}
	for _, g := range gc.gens {
		o := g.read()
		draws = append(draws, o.draws...)
		for _, r := range o.refusals {
			refusals[r.reason]++
		}
	}
	var ids int
	for _, d := range draws {
		ids += len(d.IDs)
	}
	out.note("generator_batches=%d generator_ids=%d refusals=%v", len(draws), ids, refusals)
	return draws
}

// keepGenLogs copies the generators' output and logs (IDGEN_CHAOS_LOGS).
func (gc *genCluster) keepGenLogs(e *env, name string) {
	dir := os.Getenv("IDGEN_CHAOS_LOGS")
	if dir == "" {
		return
	}
	for _, g := range gc.gens {
		for _, f := range []string{g.out, g.logPath} {
			if b, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(dir, e.db.name+"-"+name+"-"+filepath.Base(f)), b, 0o644)
			}
		}
	}
}

// startGens starts generators until there are n, on the nodes in turn,
// and waits until each of the n holds a lease.
func (gc *genCluster) startGens(n int) {
	t := gc.t
	t.Helper()
	for i := len(gc.gens); i < n; i++ {
		gc.addGen(gc.nodes[i%len(gc.nodes)].url("")).start()
	}
	began := time.Now().Add(-time.Minute)
	for _, g := range gc.gens[:n] {
		if _, ok := g.waitLease(began, 30*time.Second); !ok {
			b, _ := os.ReadFile(g.logPath)
			t.Fatalf("%s holds no lease after 30s: %s", g.name, b)
		}
	}
}

// startGenNodes migrates e's database and starts two nodes of a
// genCluster on the worker IDs 0-1, whose lease API grants genWorkers, and
// waits until both are ready.
func startGenNodes(e *env, genWorkers string) *genCluster {
	migrate(e.t, e.bin, e.db.dsn)
	gc := newGenCluster(e, "0-1", genWorkers, 2)
	gc.startAll()
	gc.waitReady(0, 1)
	return gc
}

// startGenLoad starts generators until there are four, each holding a
// lease, and the load on both nodes' /ids.
func (gc *genCluster) startGenLoad() *load {
	gc.startGens(4)
	return gc.startLoad(loadSpec{Nodes: span(0, 1), Interval: 20 * time.Millisecond, Token: genSecret})
}

// stopGenLoad stops the load and then the generators, and returns the
// load's draws and the generators'; the generators' problems go to out.
func (gc *genCluster) stopGenLoad(l *load, out *outcome) (draws, gdraws []Draw) {
	draws = l.stop()
	out.problems = append(out.problems, gc.stopGens()...)
	return draws, gc.collect(out)
}

// 11. gen-pause: SIGSTOP a generator past its lease while a spare takes
// its worker ID, then SIGCONT: it issues nothing stale.
func scenarioGenPause(e *env) (*cluster, *load, []Draw, outcome) {
	// Four generators fill the lease API's pool 2-5: the spare can only
	// get the paused generator's worker ID.
	gc := startGenNodes(e, "2-5")
	l := gc.startGenLoad()
	out := outcome{recovery: -1, who: true}
	g0 := gc.gens[0]
	leases := g0.read().leases
	old := leases[len(leases)-1]

	time.Sleep(2 * time.Second)
	paused := time.Now()
	g0.signal(syscall.SIGSTOP)
	spare := gc.addGen(gc.nodes[1].url(""))
	spare.start()
	spareLease, ok := spare.waitLease(paused, 20*time.Second)
	if !ok {
		out.problem("the spare generator got no lease while gen-0 was paused")
	} else if spareLease.worker != old.worker {
		out.problem("the spare leased worker %d, want paused gen-0's %d", spareLease.worker, old.worker)
	}
	time.Sleep(time.Until(paused.Add(2 * leaseTTL)))
	resumed := time.Now()
	g0.signal(syscall.SIGCONT)
	// The pool is full: gen-0 has nothing to issue with.
	time.Sleep(2 * time.Second)
	freed := time.Now()
	if code := spare.stop(15 * time.Second); code != 0 {
		out.problem("the spare exited %d after SIGTERM, want 0", code)
	}
	if _, ok := g0.waitLease(freed, 20*time.Second); !ok {
		out.problem("gen-0 got no lease after the spare released its worker ID")
	}
	time.Sleep(2 * time.Second)
	draws, gdraws := gc.stopGenLoad(l, &out)

	o := g0.read()
	stale := 0
	for _, d := range o.draws {
		if !d.Send.Before(resumed) && d.Send.Before(freed) {
			stale++
		}
	}
	if stale > 0 {
		out.problem("gen-0 issued %d batches after SIGCONT while the pool was full (its lease was taken over)", stale)
	}
	out.recoveryFrom(gdraws, 100, "", freed, "gen-0 issued nothing after a worker ID was freed for it")
	if !e.tookOver(spare.holder(), paused, resumed) {
		out.problem("the spare did not take over a worker ID while gen-0 was paused")
	}
	var refusedAfter int
	for _, r := range o.refusals {
		if !r.at.Before(resumed) && r.at.Before(freed) {
			refusedAfter++
		}
	}
	out.note("paused=%s old_lease=%d/v%d stale_batches=%d refusals_after_sigcont=%d", resumed.Sub(paused).Round(time.Millisecond),
		old.worker, old.version, stale, refusedAfter)
	gc.keepGenLogs(e, "gen-pause")
	return gc.cluster, l, append(draws, gdraws...), out
}

// 12. gen-blackhole: gen-0 reaches its node's lease API through toxiproxy,
// which drops everything for 2 × ttl and until a spare has taken over its
// worker ID.
func scenarioGenBlackhole(e *env) (*cluster, *load, []Draw, outcome) {
	gc := startGenNodes(e, "2-5")
	proxy := newToxicProxy(e.t, "gen-blackhole", gc.nodes[0].addr)
	g0 := gc.addGen("http://" + proxy.addr)
	g0.start()
	l := gc.startGenLoad() // gen-1..3, and waits for gen-0 too
	out := outcome{recovery: -1}
	lasts := g0.read().leases
	old := lasts[len(lasts)-1]

	time.Sleep(2 * time.Second)
	holed := time.Now()
	proxy.add(e.t, "hole_up", "timeout", "upstream", `{"timeout":0}`)
	proxy.add(e.t, "hole_down", "timeout", "downstream", `{"timeout":0}`)
	spare := gc.addGen(gc.nodes[1].url(""))
	spare.start()
	time.Sleep(time.Until(holed.Add(2 * leaseTTL)))
	if l, ok := spare.waitLease(holed, 10*time.Second); !ok {
		out.problem("the spare got no lease during the black hole")
	} else if l.worker != old.worker {
		out.problem("the spare leased worker %d, want cut-off gen-0's %d", l.worker, old.worker)
	}
	healed := time.Now()
	proxy.remove(e.t, "hole_up")
	proxy.remove(e.t, "hole_down")
	if code := spare.stop(15 * time.Second); code != 0 {
		out.problem("the spare exited %d after SIGTERM, want 0", code)
	}
	freed := time.Now()
	if _, ok := g0.waitLease(freed, 20*time.Second); !ok {
		out.problem("gen-0 got no lease after the black hole healed and the spare released")
	}
	time.Sleep(2 * time.Second)
	draws, gdraws := gc.stopGenLoad(l, &out)

	o := g0.read()
	// gen-0's deadline is at most a ttl after its last heartbeat, sent
	// before the black hole.
	late := 0
	for _, d := range o.draws {
		if d.Send.After(holed.Add(leaseTTL)) && d.Recv.Before(healed) {
			late++
		}
	}
	if late > 0 {
		out.problem("gen-0 issued %d batches more than a ttl into the black hole", late)
	}
	firstRefusal := time.Duration(-1)
	for _, r := range o.refusals {
		if !r.at.Before(holed) {
			firstRefusal = r.at.Sub(holed)
			break
		}
	}
	switch {
	case firstRefusal < 0:
		out.problem("gen-0 never refused during the black hole")
	case firstRefusal > leaseTTL+time.Second:
		out.problem("gen-0 first refused %s into the black hole, past its lease deadline (ttl %s)", firstRefusal, leaseTTL)
	}
	out.recoveryFrom(gdraws, 100, "", freed, "gen-0 issued nothing after the black hole")
	if !e.tookOver(spare.holder(), holed, healed) {
		out.problem("the spare did not take over a worker ID during the black hole")
	}
	out.note("first_refusal_after=%s late_batches=%d", firstRefusal.Round(time.Millisecond), late)
	gc.keepGenLogs(e, "gen-blackhole")
	return gc.cluster, l, append(draws, gdraws...), out
}

// 13. gen-kill: kill -9 a random generator every 2 s for 30 s and restart
// it at once under the same holder name.
func scenarioGenKill(e *env) (*cluster, *load, []Draw, outcome) {
	// One worker ID to spare: a restarted generator takes the free one, or
	// its own again and waits past its old ceiling.
	gc := startGenNodes(e, "2-6")
	l := gc.startGenLoad()
	out := outcome{recovery: -1}
	seed, restarts := killRandomly(4, 30*time.Second, func(i int) {
		gc.gens[i].kill9()
		gc.gens[i].start()
	})
	time.Sleep(2*leaseTTL + time.Second)
	draws, gdraws := gc.stopGenLoad(l, &out)
	worst, recovered := restartRecovery(gdraws, restarts, 100, "")
	out.recovery = worst
	out.note("seed=%d kills=%d recovered_before_next_kill=%d", seed, len(restarts), recovered)
	if recovered == 0 {
		out.problem("no restarted generator issued before it was killed again")
	}
	gc.keepGenLogs(e, "gen-kill")
	return gc.cluster, l, append(draws, gdraws...), out
}
