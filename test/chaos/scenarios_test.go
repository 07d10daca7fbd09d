//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/allocator"
)

// summaries collects the summary lines of a run to print them together at
// the end.
type summaries struct {
	mu    sync.Mutex
	lines []string
}

func (s *summaries) add(line string) {
	fmt.Println(line) // at once, as its own line, whatever -v does
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
}

// print prints the run's lines together, after a line counting them and
// giving the time since the run began.
func (s *summaries) print(began time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("chaos: summary of %d lines, total %s\n", len(s.lines), time.Since(began).Round(time.Second))
	for _, l := range s.lines {
		fmt.Println(l)
	}
}

// env is what a scenario runs in: a fresh schema or database of one server,
// or a fresh SQLite file (see database).
type env struct {
	t   *testing.T
	bin string
	db  database
	sum *summaries
}

// outcome is what a scenario adds to the oracle's verdict.
type outcome struct {
	clockMin map[string]time.Duration // per holder, the most negative clock offset used
	strict   map[string]bool
	recovery time.Duration // < 0: not applicable
	notes    []string      // figures for the detail line
	problems []string      // broken expectations of the scenario itself
	// who: check `idgen audit who` on a sample of the scenario's IDs
	// (checkWho), for the scenarios with a takeover of a stopped holder.
	who bool
}

func (o *outcome) note(format string, args ...any) {
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
}
func (o *outcome) problem(format string, args ...any) {
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
}

// scenario is one fault scenario.
type scenario struct {
	name string
	run  func(e *env) (*cluster, *load, []Draw, outcome)
}

// scenarios lists the fault scenarios in the order they run; db-restart
// and strict-kill-restart restart the shared server, so they run last.
func scenarios() []scenario {
	return []scenario{
		{"baseline", scenarioBaseline},
		{"pause", scenarioPause},
		{"pause-in-transaction", scenarioPauseInTransaction},
		{"blackhole", scenarioBlackhole},
		{"latency", scenarioLatency},
		{"kill-restart", scenarioKillRestart},
		{"restart-clock-back", scenarioRestartClockBack},
		{"clock-jump", scenarioClockJump},
		{"contention", scenarioContention},
		{"lost-commit-ack", scenarioLostCommitAck},
		{"db-restart", scenarioDBRestart},
		{"strict-kill-restart", scenarioStrictKillRestart},
	}
}

// TestChaos runs every scenario on PostgreSQL, then on MySQL/MariaDB, then
// the bad-input checks and the fuzz run of the HTTP parsing.
func TestChaos(t *testing.T) {
	began := time.Now()
	bin := buildIdgen(t, t.TempDir())
	sum := &summaries{}
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			for _, sc := range scenarios() {
				if sc.name == "db-restart" {
					t.Run("security", func(t *testing.T) { runSecurity(t, bin, db, sum) })
				}
				runOnDatabase(t, bin, db, sum, sc)
			}
		})
	}
	t.Run("negative-control", func(t *testing.T) { runNegativeControl(t, bin, sum) })
	t.Run("fuzz", func(t *testing.T) { runFuzz(t, sum) })
	sum.print(began)
}

// runOnDatabase runs sc as a subtest, on a fresh database of the server
// db ("postgres", "mysql") or a fresh SQLite file ("sqlite").
func runOnDatabase(t *testing.T, bin, db string, sum *summaries, sc scenario) {
	t.Run(sc.name, func(t *testing.T) {
		e := &env{t: t, bin: bin, db: freshDatabase(t, db), sum: sum}
		e.run(sc)
	})
}

// run runs one scenario and judges it.
func (e *env) run(sc scenario) {
	t := e.t
	began := time.Now()
	c, l, draws, out := sc.run(e)
	for _, n := range c.nodes {
		if p := n.unexpectedExit(); p != "" {
			out.problem("%s", p)
		}
	}
	out.problems = append(out.problems, c.stopAll()...)
	if l != nil {
		l.mu.Lock()
		out.problems = append(out.problems, l.problems...)
		if l.no503RA > 0 {
			out.problem("%d responses 503 without a Retry-After of at least 1 second", l.no503RA)
		}
		for code, body := range l.samples {
			if code != 503 {
				out.note("sample_%d=%q", code, body)
			}
		}
		l.mu.Unlock()
	}
	events, maxIDs := readHistory(t, e.db.dsn)
	rep := Check(Input{Draws: draws, Events: events, ClockOffsetMin: out.clockMin, MaxID: maxIDs, Strict: out.strict})
	if out.who {
		e.checkWho(draws, events, &out)
	}

	result := "PASS"
	if rep.Failed() || len(out.problems) > 0 {
		result = "FAIL"
	}
	recovery := "n/a"
	if out.recovery >= 0 {
		recovery = fmt.Sprintf("%.2fs", out.recovery.Seconds())
	}
	e.sum.add(fmt.Sprintf("chaos: scenario=%s db=%s attempted=%d acknowledged=%d duplicates=%d foreign=%d unavailable_503=%d recovery=%s result=%s",
		sc.name, e.db.name, rep.Attempted, rep.Acknowledged, rep.Duplicates, rep.Foreign, rep.Unavailable503, recovery, result))
	t.Logf("detail: requests=%d ok=%d transport_errors=%d other_status=%v no_tenure=%d outside_tenure=%d fence_overlap=%d uncommitted=%d ambiguous=%d strict_gaps=%d strict_missing=%d strict_unanswered=%d strict_order=%d lease_events=%d took=%s %s",
		rep.Requests, rep.OKRequests, rep.TransportErrors, rep.OtherStatus, rep.NoTenure, rep.OutsideTenure, rep.FenceOverlap,
		rep.Uncommitted, rep.Ambiguous, rep.StrictGaps, rep.StrictMissing, rep.StrictUnanswered, rep.StrictOrder, len(events), time.Since(began).Round(time.Millisecond),
		strings.Join(out.notes, " "))
	if rep.Failed() {
		t.Errorf("oracle: duplicates=%d foreign=%d strict_gaps=%d strict_order=%d; first violations:\n  %s",
			rep.Duplicates, rep.Foreign, rep.StrictGaps, rep.StrictOrder, strings.Join(rep.Examples, "\n  "))
	}
	for _, p := range out.problems {
		t.Errorf("%s", p)
	}
	if dir := os.Getenv("IDGEN_CHAOS_LOGS"); dir != "" {
		keepLogs(t, dir, e.db.name+"-"+sc.name, c)
	}
}

// keepLogs copies the nodes' logs to dir (set IDGEN_CHAOS_LOGS to keep them).
func keepLogs(t *testing.T, dir, prefix string, c *cluster) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep logs: %v", err)
		return
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(filepath.Join(dir, prefix+"-"+n.holder+".log"), []byte(n.log()), 0o644); err != nil {
			t.Logf("keep logs: %v", err)
		}
	}
}

// waitReady waits until the given nodes are ready; a node that is not is
// fatal, with its log.
func (c *cluster) waitReady(idx ...int) {
	c.t.Helper()
	for _, i := range idx {
		if !c.nodes[i].waitReady(20 * time.Second) {
			c.t.Fatalf("%s not ready within 20s:\n%s", c.nodes[i].holder, c.nodes[i].logTail(30))
		}
	}
}

func span(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// okCount counts the 200 responses of node to requests sent at or after
// from and answered before to.
func okCount(draws []Draw, node int, from, to time.Time) int {
	n := 0
	for _, d := range draws {
		if d.Node == node && d.Status == 200 && !d.Send.Before(from) && d.Recv.Before(to) {
			n++
		}
	}
	return n
}

// recoveryFrom sets o.recovery to the time from from to node's first 200
// (of namespace ns, "" for Snowflake) to a request sent at or after from;
// without one, missing is a problem of the scenario.
func (o *outcome) recoveryFrom(draws []Draw, node int, ns string, from time.Time, missing string) {
	if first, ok := FirstOK(draws, node, ns, from); ok {
		o.recovery = first.Sub(from)
	} else {
		o.problem("%s", missing)
	}
}

// tookOver reports whether holder took over a worker ID in [from, to],
// as the lease history of e's database says.
func (e *env) tookOver(holder string, from, to time.Time) bool {
	events, _ := readHistory(e.t, e.db.dsn)
	return takenOver(events, holder, from, to)
}

// takenOver reports whether holder took over a worker ID in [from, to].
func takenOver(events []allocator.LeaseEvent, holder string, from, to time.Time) bool {
	for _, ev := range events {
		if ev.Holder == holder && ev.Kind == allocator.EventTakeover && !ev.At.Before(from) && !ev.At.After(to) {
			return true
		}
	}
	return false
}

// 1. baseline: four nodes, no faults, at least a million IDs.
func scenarioBaseline(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	c := newCluster(e.t, e.bin, "0-3", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 2})
	const want = 1_000_000
	l.waitAcked(want+50_000, 90*time.Second)
	draws := l.stop()
	out := outcome{recovery: -1}
	if got := l.acked.Load(); got < want {
		out.problem("baseline acknowledged %d IDs, want at least %d", got, want)
	}
	return c, l, draws, out
}

// 2. pause: SIGSTOP a node past its lease while a spare takes its worker ID,
// then SIGCONT.
func scenarioPause(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	// Three worker IDs, three nodes holding them and a spare: the spare can
	// only get the paused node's worker ID.
	c := newCluster(e.t, e.bin, "0-2", []string{e.db.dsn}, 4)
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].start()
	}
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].waitUp(30 * time.Second)
	}
	c.waitReady(0, 1, 2)
	c.nodes[3].start()
	c.nodes[3].waitUp(30 * time.Second)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 2, Interval: 20 * time.Millisecond})
	out := outcome{recovery: -1, who: true}

	time.Sleep(2 * time.Second)
	paused := time.Now()
	c.nodes[0].signal(syscall.SIGSTOP)
	resumed, stale, draws := resumeAndJudge(e, c, l, &out, paused, "while node-0 was paused")
	out.note("paused=%s stale_200=%d", resumed.Sub(paused).Round(time.Millisecond), stale)
	return c, l, draws, out
}

// resumeAndJudge is the end of both pause scenarios, node-0 stopped at
// paused: the spare must become ready while node-0 stays stopped (what
// says how, in its problem line); node-0 is resumed into a full pool, the
// spare stopped to free a worker ID for it, and the draws judged: no 200
// from node-0 between the pause and the freeing, service from it after,
// and the spare's takeover on record. It returns when node-0 was resumed
// and how many stale 200s it answered.
func resumeAndJudge(e *env, c *cluster, l *load, out *outcome, paused time.Time, what string) (time.Time, int, []Draw) {
	// Past the lease, and until the spare has taken the worker ID over.
	time.Sleep(2 * leaseTTL)
	if !c.nodes[3].waitReady(10 * time.Second) {
		out.problem("the spare did not become ready %s", what)
	}
	resumed := time.Now()
	c.nodes[0].signal(syscall.SIGCONT)
	// The pool is full: the resumed node has nothing to issue with.
	time.Sleep(2 * time.Second)
	freed := time.Now()
	if code := c.nodes[3].stop(15 * time.Second); code != 0 {
		out.problem("spare exited with %d after SIGTERM, want 0", code)
	}
	time.Sleep(2*leaseTTL + time.Second)
	draws := l.stop()

	stale := okCount(draws, 0, paused.Add(10*time.Millisecond), freed)
	if stale > 0 {
		out.problem("node-0 answered 200 to %d requests sent while it was paused and answered before a worker ID was freed", stale)
	}
	out.recoveryFrom(draws, 0, "", freed, "node-0 served nothing after a worker ID was freed for it")
	if !e.tookOver("node-3", paused, resumed) {
		out.problem("the spare did not take over a worker ID while node-0 was paused")
	}
	return resumed, stale, draws
}

// 2b. pause-in-transaction: as pause, but node-0 is stopped in the middle
// of a heartbeat, after its UPDATE and before its COMMIT, as a pause does
// now and then by chance: the server keeps its session idle in the
// transaction with the lease row locked. Node-0 reaches the database
// through a proxy that delays every reply, so that its heartbeats spend
// much of their time inside a transaction, and it is stopped again until
// the server shows one of its sessions idle in a transaction with rows
// locked. The spare must still take the worker ID over while node-0 stays
// paused: the server ends the idle session (idgen's idle-in-transaction
// timeout) and its locks go with it.
func scenarioPauseInTransaction(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	proxy := newToxicProxy(e.t, "slow-replies", hostPort(e.t, e.db.dsn))
	c := newCluster(e.t, e.bin, "0-2", []string{withHost(e.t, e.db.dsn, proxy.addr), e.db.dsn}, 4)
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].start()
	}
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].waitUp(30 * time.Second)
	}
	c.waitReady(0, 1, 2)
	proxy.add(e.t, "slow", "latency", "downstream", `{"latency":100}`)
	c.nodes[3].start()
	c.nodes[3].waitUp(30 * time.Second)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 2, Interval: 20 * time.Millisecond})
	out := outcome{recovery: -1}

	time.Sleep(2 * time.Second)
	paused, tries, ok := pauseInTransaction(e, c.nodes[0])
	if !ok {
		out.problem("node-0 was never stopped inside a transaction in %d tries", tries)
	}
	resumed, _, draws := resumeAndJudge(e, c, l, &out, paused, "while node-0 was paused inside a transaction")
	out.note("paused=%s stop_tries=%d", resumed.Sub(paused).Round(time.Millisecond), tries)
	return c, l, draws, out
}

// pauseInTransaction stops n (which reaches the database through an
// in-process proxy, slowly) until the server shows one of its sessions
// idle inside a transaction that holds row locks, for at most 100 tries. It returns when
// n was stopped that last time, the tries, and whether it succeeded (n is
// then left stopped).
func pauseInTransaction(e *env, n *node) (time.Time, int, bool) {
	t := e.t
	idle := idleInTransaction(t, e.db)
	for try := 1; try <= 100; try++ {
		stopped := time.Now()
		n.signal(syscall.SIGSTOP)
		// Long enough for a reply in flight to arrive; n cannot act on it.
		time.Sleep(300 * time.Millisecond)
		if idle() {
			return stopped, try, true
		}
		n.signal(syscall.SIGCONT)
		time.Sleep(time.Duration(100+37*try%200) * time.Millisecond)
	}
	return time.Time{}, 100, false
}

// idleInTransaction returns a check of whether a session of the database
// server is idle inside a transaction that holds row locks, with its
// client connected through an in-process proxy. The server sees the
// proxy's connections, from this process: see proxyClientPorts.
func idleInTransaction(t *testing.T, db database) func() bool {
	t.Helper()
	server := hostPort(t, db.dsn)
	ctx := t.Context()
	switch db.name {
	case "mysql":
		conn, err := openMySQLServer(db.dsn)
		if err != nil {
			t.Fatalf("connect to the MySQL server: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return func() bool {
			rows, err := conn.QueryContext(ctx, `
				SELECT p.HOST FROM information_schema.INNODB_TRX t
				JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
				WHERE p.COMMAND = 'Sleep' AND t.trx_rows_locked > 0`)
			if err != nil {
				t.Fatalf("read the server's transactions: %v", err)
			}
			return anyFromProxy(t, rows, server)
		}
	case "postgres":
		conn, err := pgx.Connect(ctx, db.dsn)
		if err != nil {
			t.Fatalf("connect to PostgreSQL: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return func() bool {
			var ports []int
			rows, err := conn.Query(ctx, `
				SELECT a.client_port FROM pg_stat_activity a
				WHERE a.state = 'idle in transaction'
				  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'transactionid' AND l.granted)`)
			if err != nil {
				t.Fatalf("read the server's sessions: %v", err)
			}
			for rows.Next() {
				var p int
				if err := rows.Scan(&p); err != nil {
					t.Fatal(err)
				}
				ports = append(ports, p)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			mine := proxyClientPorts(t, server)
			for _, p := range ports {
				if mine[p] {
					return true
				}
			}
			return false
		}
	}
	t.Fatalf("no sessions to inspect on %s", db.name)
	return nil
}

// anyFromProxy reports whether one of rows' client addresses
// ("host:port") is a connection of this process to the server.
func anyFromProxy(t *testing.T, rows *sql.Rows, server string) bool {
	t.Helper()
	defer rows.Close()
	mine := proxyClientPorts(t, server)
	found := false
	for rows.Next() {
		var host string
		if err := rows.Scan(&host); err != nil {
			t.Fatal(err)
		}
		if _, port, err := net.SplitHostPort(host); err == nil {
			p, _ := strconv.Atoi(port)
			found = found || mine[p]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}

// proxyClientPorts returns the local ports of this process's TCP
// connections to server (host:port): the in-process proxies' upstream
// connections and the harness's own. Linux only: it matches the socket
// inodes of /proc/self/fd with /proc/net/tcp.
func proxyClientPorts(t *testing.T, server string) map[int]bool {
	t.Helper()
	_, sport, _ := net.SplitHostPort(server)
	serverPort, _ := strconv.Atoi(sport)
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list this process's files: %v", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if inode, ok := strings.CutPrefix(target, "socket:["); ok {
				inodes[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("read /proc/net/tcp: %v", err)
	}
	ports := map[int]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		_, local, _ := strings.Cut(f[1], ":")
		_, remote, _ := strings.Cut(f[2], ":")
		lp, err1 := strconv.ParseInt(local, 16, 32)
		rp, err2 := strconv.ParseInt(remote, 16, 32)
		if err1 == nil && err2 == nil && int(rp) == serverPort {
			ports[int(lp)] = true
		}
	}
	return ports
}

// 3. blackhole: node-0's database connections drop everything for 2 × ttl.
func scenarioBlackhole(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	proxy := newToxicProxy(e.t, "blackhole", hostPort(e.t, e.db.dsn))
	c := newCluster(e.t, e.bin, "0-2", []string{withHost(e.t, e.db.dsn, proxy.addr), e.db.dsn}, 4)
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].start()
	}
	for _, i := range []int{0, 1, 2} {
		c.nodes[i].waitUp(30 * time.Second)
	}
	c.waitReady(0, 1, 2)
	l := c.startLoad(loadSpec{Nodes: span(0, 2), Clients: 2, Interval: 20 * time.Millisecond})
	out := outcome{recovery: -1}

	time.Sleep(2 * time.Second)
	holed := time.Now()
	proxy.add(e.t, "hole_up", "timeout", "upstream", `{"timeout":0}`)
	proxy.add(e.t, "hole_down", "timeout", "downstream", `{"timeout":0}`)
	// The spare starts with the black hole, so that its claim retries are
	// still frequent when node-0's lease expires; the hole lasts 2 × ttl
	// and until the spare has taken the worker ID over.
	c.nodes[3].start()
	c.nodes[3].waitUp(30 * time.Second)
	spare := c.startLoad(loadSpec{Nodes: []int{3}, Clients: 2, Interval: 20 * time.Millisecond})
	time.Sleep(time.Until(holed.Add(2 * leaseTTL)))
	if !c.nodes[3].waitReady(10 * time.Second) {
		out.problem("the spare did not become ready during the black hole")
	}
	healed := time.Now()
	proxy.remove(e.t, "hole_up")
	proxy.remove(e.t, "hole_down")
	// The spare gives the worker ID back so that node-0 can recover.
	if code := c.nodes[3].stop(15 * time.Second); code != 0 {
		out.problem("spare exited with %d after SIGTERM, want 0", code)
	}
	time.Sleep(2*leaseTTL + 2*time.Second)
	draws := append(l.stop(), spare.stop()...)
	l.mu.Lock()
	l.problems = append(l.problems, spare.problems...)
	l.mu.Unlock()

	// The node's deadline is at most ttl after its last heartbeat, which
	// was sent before the black hole.
	late := okCount(draws, 0, holed.Add(leaseTTL), healed)
	if late > 0 {
		out.problem("node-0 answered 200 to %d requests sent more than a ttl into the black hole and answered before it healed", late)
	}
	first503 := time.Duration(-1)
	for _, d := range draws {
		if d.Node == 0 && d.Status == 503 && !d.Send.Before(holed) {
			if s := d.Recv.Sub(holed); first503 < 0 || s < first503 {
				first503 = s
			}
		}
	}
	switch {
	case first503 < 0:
		out.problem("node-0 never answered 503 during the black hole")
	case first503 > leaseTTL+time.Second:
		out.problem("node-0 first answered 503 %s into the black hole, past its lease deadline (ttl %s)", first503, leaseTTL)
	}
	out.recoveryFrom(draws, 0, "", healed, "node-0 served nothing after the black hole")
	if !e.tookOver("node-3", holed, healed) {
		out.problem("no worker ID was taken over by the spare during the black hole")
	}
	out.note("first_503_after=%s late_200=%d", first503.Round(time.Millisecond), late)
	return c, l, draws, out
}

// 4. latency: 1.5 s ± 0.5 s on everything node-0's database sends back, so
// its heartbeats land late or after the lease expired.
func scenarioLatency(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	proxy := newToxicProxy(e.t, "latency", hostPort(e.t, e.db.dsn))
	c := newCluster(e.t, e.bin, "0-4", []string{withHost(e.t, e.db.dsn, proxy.addr), e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Interval: 20 * time.Millisecond})
	out := outcome{recovery: -1}
	time.Sleep(2 * time.Second)
	proxy.add(e.t, "slow", "latency", "downstream", `{"latency":1500,"jitter":500}`)
	time.Sleep(20 * time.Second)
	cured := time.Now()
	proxy.remove(e.t, "slow")
	time.Sleep(2*leaseTTL + 2*time.Second)
	draws := l.stop()
	out.recoveryFrom(draws, 0, "", cured, "node-0 served nothing after the latency was removed")
	var during, during503 int
	for _, d := range draws {
		if d.Node == 0 && d.Send.After(cured.Add(-20*time.Second)) && d.Send.Before(cured) {
			during++
			if d.Status == 503 {
				during503++
			}
		}
	}
	out.note("node0_requests_under_latency=%d node0_503_under_latency=%d", during, during503)
	return c, l, draws, out
}

// 5. kill-restart: kill -9 a random node every 2 s for 60 s, restarting it
// at once.
func scenarioKillRestart(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	// One worker ID more than nodes: a restarted node takes the free one
	// or claims its own again and waits past its ceiling.
	c := newCluster(e.t, e.bin, "0-4", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Interval: 50 * time.Millisecond})
	out := outcome{recovery: -1}
	seed, restarts := killRandomly(len(c.nodes), 60*time.Second, func(i int) {
		c.nodes[i].kill9()
		c.nodes[i].start()
	})
	time.Sleep(2*leaseTTL + time.Second)
	draws := l.stop()
	worst, recovered := restartRecovery(draws, restarts, 0, "")
	out.recovery = worst
	out.note("seed=%d kills=%d recovered_before_next_kill=%d", seed, len(restarts), recovered)
	if recovered == 0 {
		out.problem("no restarted node served before it was killed again")
	}
	return c, l, draws, out
}

// restart is one kill -9 and restart of killRandomly.
type restart struct {
	idx int // of the process in its cluster
	at  time.Time
}

// killRandomly kills -9 one of n processes, picked at random, every 2 s
// for d, and restarts it at once (restartOne does both). It returns the
// seed of the random picks, for the detail line, and the restarts.
func killRandomly(n int, d time.Duration, restartOne func(i int)) (uint64, []restart) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	var restarts []restart
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(2 * time.Second)
		i := rng.IntN(n)
		restartOne(i)
		restarts = append(restarts, restart{i, time.Now()})
	}
	return seed, restarts
}

// restartRecovery counts the restarts the process survived long enough to
// serve after (a 200 to a draw of namespace ns, "" for Snowflake, before it
// was killed again) and returns the slowest of those recoveries. The draws
// of process i carry Draw.Node base+i.
func restartRecovery(draws []Draw, restarts []restart, base int, ns string) (worst time.Duration, recovered int) {
	for k, r := range restarts {
		next := time.Now()
		for _, later := range restarts[k+1:] {
			if later.idx == r.idx {
				next = later.at
				break
			}
		}
		if first, ok := FirstOK(draws, base+r.idx, ns, r.at); ok && first.Before(next) {
			recovered++
			worst = max(worst, first.Sub(r.at))
		}
	}
	return worst, recovered
}

// 6. restart-clock-back: kill -9 a node and restart it with its clock set
// back 2 s. The pool has no spare worker ID, so it must wait until its clock
// passes the old ceiling.
func scenarioRestartClockBack(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	c := newCluster(e.t, e.bin, "0-3", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 2, Interval: 20 * time.Millisecond})
	out := outcome{recovery: -1, clockMin: map[string]time.Duration{"node-1": -2 * time.Second}}
	time.Sleep(3 * time.Second)
	c.nodes[1].kill9()
	c.nodes[1].flags = []string{"--test-clock-offset", "-2s"}
	restarted := time.Now()
	c.nodes[1].start()
	time.Sleep(4 * leaseTTL)
	draws := l.stop()
	out.recoveryFrom(draws, 1, "", restarted, "node-1 served nothing after its restart with the clock set back")
	return c, l, draws, out
}

// 7. clock-jump: a node's clock jumps back 4 s while it runs, and forward
// again later.
func scenarioClockJump(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	c := newCluster(e.t, e.bin, "0-5", []string{e.db.dsn}, 4)
	clockFile := filepath.Join(c.dir, "node-2.clock")
	writeClock(e.t, clockFile, "0s")
	c.nodes[2].flags = []string{"--test-clock-file", clockFile}
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 2, Interval: 20 * time.Millisecond})
	// -4s: a large jump, yet within the default 5 s limit on the offset
	// from database time, so the node keeps going on another worker ID.
	out := outcome{recovery: -1, clockMin: map[string]time.Duration{"node-2": -4 * time.Second}}
	time.Sleep(3 * time.Second)
	jumped := time.Now()
	writeClock(e.t, clockFile, "-4s")
	time.Sleep(8 * time.Second)
	back := time.Now()
	writeClock(e.t, clockFile, "0s")
	time.Sleep(2*leaseTTL + time.Second)
	draws := l.stop()
	if first, ok := FirstOK(draws, 2, "", jumped.Add(150*time.Millisecond)); ok && first.Before(back) {
		out.recovery = first.Sub(jumped)
	} else {
		out.problem("node-2 served nothing between the backward jump and the clock's return")
	}
	if _, ok := FirstOK(draws, 2, "", back.Add(150*time.Millisecond)); !ok {
		out.problem("node-2 served nothing after its clock jumped forward again")
	}
	return c, l, draws, out
}

// writeClock replaces the content of a --test-clock-file atomically.
func writeClock(t *testing.T, path, offset string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(offset+"\n"), 0o644); err != nil {
		t.Fatalf("write clock file: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("write clock file: %v", err)
	}
}

// 8. db-restart: the database server restarts under load, first at once
// (pg_ctlcluster restart -m fast; MariaDB stopped and started), then after
// staying down for 2 × ttl, so that every lease expires meanwhile.
func scenarioDBRestart(e *env) (*cluster, *load, []Draw, outcome) {
	localServer(e.t, e.db.name)
	e.t.Cleanup(func() { ensureServer(e.t, e.db.name) })
	migrate(e.t, e.bin, e.db.dsn)
	createNamespace(e.t, e.bin, e.db.dsn, "orders", "--step", "1000")
	c := newCluster(e.t, e.bin, "0-3", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(
		loadSpec{Nodes: span(0, 3), Interval: 20 * time.Millisecond},
		loadSpec{Nodes: span(0, 3), Count: 100, Namespace: "orders", Interval: 20 * time.Millisecond},
	)
	out := outcome{recovery: -1}
	outages := storeOutages(&out, func(hold time.Duration) (time.Time, error) {
		if err := bounceServer(e.t, e.db.name, hold); err != nil {
			out.problem("restart %s: %v", e.db.name, err)
		}
		return waitServer(e.db.name, 2*time.Minute)
	})
	draws := l.stop()
	outageRecovery(c, draws, &out, outages, e.db.name, []string{"", "orders"})
	return c, l, draws, out
}

// 15. strict-kill-restart: four nodes draw a strict namespace, four clients
// each, so that draws waiting on one node share a fetch; a random node is
// killed -9 and restarted every 2 s for 20 s, then the database server
// restarts, at once and after 2 × ttl down (storeOutages), under the same
// load. Every answered strict draw must be
// above every draw answered before it was sent, and the namespace gap-free
// up to its committed max_id but for the IDs of requests that got no answer
// (a node killed, or a fetch whose commit the restart hid: their fetch may
// have committed, and its range is never handed out).
func scenarioStrictKillRestart(e *env) (*cluster, *load, []Draw, outcome) {
	localServer(e.t, e.db.name)
	e.t.Cleanup(func() { ensureServer(e.t, e.db.name) })
	migrate(e.t, e.bin, e.db.dsn)
	createNamespace(e.t, e.bin, e.db.dsn, "ledger", "--step", "1", "--mode", "strict")
	c := newCluster(e.t, e.bin, "0-4", []string{e.db.dsn}, 4)
	c.startAll()
	c.waitReady(0, 1, 2, 3)
	l := c.startLoad(loadSpec{Nodes: span(0, 3), Clients: 4, Count: 3, Namespace: "ledger", Interval: 5 * time.Millisecond})
	out := outcome{recovery: -1, strict: map[string]bool{"ledger": true}}
	seed, restarts := killRandomly(len(c.nodes), 20*time.Second, func(i int) {
		c.nodes[i].kill9()
		c.nodes[i].start()
	})
	outages := storeOutages(&out, func(hold time.Duration) (time.Time, error) {
		if err := bounceServer(e.t, e.db.name, hold); err != nil {
			out.problem("restart %s: %v", e.db.name, err)
		}
		return waitServer(e.db.name, 2*time.Minute)
	})
	draws := l.stop()
	worst, recovered := restartRecovery(draws, restarts, 0, "ledger")
	out.note("seed=%d kills=%d recovered_before_next_kill=%d kill_recovery=%s", seed, len(restarts), recovered, worst.Round(time.Millisecond))
	if recovered == 0 {
		out.problem("no restarted node served before it was killed again")
	}
	outageRecovery(c, draws, &out, outages, e.db.name, []string{"ledger"})
	return c, l, draws, out
}

// outage is one outage of the whole store under load: down for hold,
// from down until it answered again at back.
type outage struct {
	hold       time.Duration
	down, back time.Time
}

// storeOutages takes the store down twice, 3 s apart: first restarted at
// once, then kept down for 2 × ttl, so that every lease expires meanwhile.
// bounce takes it down, keeps it down for hold, starts it again and
// returns when it answered again; each outage is followed by 7 s of load.
func storeOutages(out *outcome, bounce func(hold time.Duration) (back time.Time, err error)) []*outage {
	outages := []*outage{{hold: 0}, {hold: 2 * leaseTTL}}
	for _, o := range outages {
		time.Sleep(3 * time.Second)
		o.down = time.Now()
		back, err := bounce(o.hold)
		if err != nil {
			out.problem("%v", err)
			back = time.Now()
		}
		o.back = back
		time.Sleep(7 * time.Second)
	}
	return outages
}

// outageRecovery measures the recovery from each outage: for each node and
// kind of draw (namespaces, "" for Snowflake), the first 200 to a request
// sent after the store (what) answered again; the slowest counts, and it
// must be at most 5 s. out.recovery is the slowest of all outages.
func outageRecovery(c *cluster, draws []Draw, out *outcome, outages []*outage, what string, namespaces []string) {
	var worst time.Duration
	for k, o := range outages {
		next := time.Now()
		if k+1 < len(outages) {
			next = outages[k+1].down
		}
		var slowest time.Duration
		for i := range c.nodes {
			for _, ns := range namespaces {
				first, ok := FirstOK(draws, i, ns, o.back)
				if !ok || first.After(next) {
					out.problem("node-%d served no %q draw between %s coming back and the next restart", i, ns, what)
					continue
				}
				slowest = max(slowest, first.Sub(o.back))
			}
		}
		worst = max(worst, slowest)
		out.note("phase%d_down_for=%s phase%d_recovery=%s", k+1, o.back.Sub(o.down).Round(time.Millisecond),
			k+1, slowest.Round(time.Millisecond))
	}
	out.recovery = worst
	if worst > 5*time.Second {
		out.problem("recovery took %s after %s answered again, want at most 5s", worst.Round(time.Millisecond), what)
	}
}

// 9. contention: eight nodes start at once on four worker IDs; four nodes
// draw one namespace with step 100 and a strict one.
func scenarioContention(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	createNamespace(e.t, e.bin, e.db.dsn, "shared", "--step", "100", "--max-step", "100")
	createNamespace(e.t, e.bin, e.db.dsn, "ledger", "--step", "1", "--mode", "strict")
	c := newCluster(e.t, e.bin, "0-3", []string{e.db.dsn}, 8)
	c.startAll()
	strict := c.startLoad(loadSpec{Nodes: span(0, 3), Count: 3, Namespace: "ledger", Interval: 10 * time.Millisecond, MaxRequests: 300})
	l := c.startLoad(
		loadSpec{Nodes: span(0, 7), Interval: 20 * time.Millisecond},
		loadSpec{Nodes: span(0, 3), Count: 50, Namespace: "shared", Interval: 5 * time.Millisecond},
	)
	time.Sleep(15 * time.Second)
	strict.wg.Wait() // bounded: every strict draw completes, so gaps would be real
	var retries float64
	var found bool
	for _, n := range c.nodes {
		if v, ok := n.metric("idgen_store_serialization_retries_total"); ok {
			retries += v
			found = true
		}
	}
	draws := append(l.stop(), strict.stop()...)
	out := outcome{recovery: -1, strict: map[string]bool{"ledger": true}}
	if !found {
		out.problem("no node exports idgen_store_serialization_retries_total")
	}
	serving := map[int]bool{}
	for _, d := range draws {
		if d.Status == 200 && d.Namespace == "" {
			serving[d.Node] = true
		}
	}
	out.note("serialization_retries=%.0f nodes_that_served_snowflake=%d", retries, len(serving))
	l.mu.Lock()
	l.problems = append(l.problems, strict.problems...)
	l.mu.Unlock()
	return c, l, draws, out
}

// 10. lost-commit-ack: node-0's database connections are reset when the
// database answers, in pulses, while it fetches small segments: the
// statement may have committed but node-0 never hears so.
func scenarioLostCommitAck(e *env) (*cluster, *load, []Draw, outcome) {
	migrate(e.t, e.bin, e.db.dsn)
	createNamespace(e.t, e.bin, e.db.dsn, "invoices", "--step", "10", "--max-step", "10")
	proxy := newToxicProxy(e.t, "reset", hostPort(e.t, e.db.dsn))
	c := newCluster(e.t, e.bin, "0-3", []string{withHost(e.t, e.db.dsn, proxy.addr), e.db.dsn}, 2)
	c.startAll()
	c.waitReady(0, 1)
	l := c.startLoad(
		loadSpec{Nodes: []int{0, 1}, Clients: 2, Count: 7, Namespace: "invoices", Interval: 5 * time.Millisecond},
		loadSpec{Nodes: []int{0, 1}, Interval: 50 * time.Millisecond},
	)
	out := outcome{recovery: -1}
	before, _ := c.nodes[0].metric("idgen_segment_fetch_errors_total")
	time.Sleep(2 * time.Second)
	var last time.Time
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		proxy.add(e.t, "reset", "reset_peer", "downstream", `{"timeout":0}`)
		time.Sleep(100 * time.Millisecond)
		proxy.remove(e.t, "reset")
		last = time.Now()
		time.Sleep(600 * time.Millisecond)
	}
	time.Sleep(2*leaseTTL + time.Second)
	after, ok := c.nodes[0].metric("idgen_segment_fetch_errors_total")
	draws := l.stop()
	if !ok {
		out.problem("node-0 exports no idgen_segment_fetch_errors_total")
	} else if after-before < 1 {
		out.problem("no segment fetch of node-0 failed: the resets never hit a fetch")
	}
	out.recoveryFrom(draws, 0, "invoices", last, "node-0 served no segment draw after the last reset")
	out.note("node0_fetch_errors=%.0f", after-before)
	return c, l, draws, out
}

// runNegativeControl shows that the harness catches a real violation end to
// end: two nodes whose lease tables differ (node-1 runs on a SQLite file of
// its own) both hold worker ID 0, a split brain. The oracle, reading the
// lease history of the PostgreSQL database, must report foreign IDs; the
// test fails if it does not.
func runNegativeControl(t *testing.T, bin string, sum *summaries) {
	db := freshDatabase(t, "postgres")
	migrate(t, bin, db.dsn)
	split := "sqlite:" + filepath.Join(t.TempDir(), "split-brain.db")
	c := newCluster(t, bin, "0-0", []string{db.dsn, split}, 2)
	c.startAll()
	c.waitReady(0, 1)
	l := c.startLoad(loadSpec{Nodes: []int{0, 1}, Clients: 2, Interval: 5 * time.Millisecond})
	time.Sleep(3 * time.Second)
	draws := l.stop()
	for _, p := range c.stopAll() {
		t.Errorf("%s", p)
	}
	events, maxIDs := readHistory(t, db.dsn)
	rep := Check(Input{Draws: draws, Events: events, MaxID: maxIDs})
	result := "PASS"
	if rep.Foreign == 0 {
		result = "FAIL"
		t.Errorf("the oracle saw no foreign ID from a node holding worker ID 0 in another database: the harness has no teeth")
	}
	sum.add(fmt.Sprintf("chaos: scenario=negative-control db=postgres+sqlite attempted=%d acknowledged=%d duplicates=%d foreign=%d expect=violations result=%s",
		rep.Attempted, rep.Acknowledged, rep.Duplicates, rep.Foreign, result))
}
