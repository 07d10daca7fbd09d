//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/audit"
)

// The audit trail's outage: ClickHouse, the audit sink, stopped for 30 s
// and started again while a node serves GET /ids to a bounded loop of
// clients and two generators hold leases through its lease API (their
// heartbeats and blocks are audit events too).
//
//	go test -tags chaos -count=1 -v -run TestChaosAuditOutage ./test/chaos/
//
// It stops the shared ClickHouse server of this machine (the one .ci/run
// starts, IDGEN_TEST_CLICKHOUSE_URL), so it lives in the fault harness,
// whose run comes last in CI, and always starts it again.

// auditOutage is ClickHouse's time down in TestChaosAuditOutage.
const auditOutage = 30 * time.Second

// auditPhase is one run of the outage.
type auditPhase struct {
	name   string
	buffer int  // --audit-buffer
	drops  bool // the buffer is too small for the outage's events
}

// TestChaosAuditOutage runs the outage twice on PostgreSQL: with a buffer
// that holds every event of the outage (nothing is lost: every event the
// node recorded is in ClickHouse exactly once after deduplication, and
// the block records add up to the IDs served), and with a buffer of 40
// (events are dropped, and the drop counter equals the events missing
// from ClickHouse). In both, every ID request succeeds, and requests are
// served in every second of the outage.
func TestChaosAuditOutage(t *testing.T) {
	began := time.Now()
	chURL := clickhouseServer(t)
	t.Cleanup(func() { ensureClickHouse(t, chURL) })
	bin := buildIdgen(t, t.TempDir())
	sum := &summaries{}
	for _, ph := range []auditPhase{{"buffer-holds", 20_000, false}, {"buffer-overflows", 40, true}} {
		t.Run(ph.name, func(t *testing.T) {
			e := &env{t: t, bin: bin, db: freshDatabase(t, "postgres"), sum: sum}
			runAuditOutage(e, chURL, ph)
		})
	}
	sum.print(began)
}

// auditStats are a node's audit counters, read from /metrics.
type auditStats struct {
	recorded, sent, dropped, failures, queued int64
}

func (n *node) auditStats() (auditStats, bool) {
	var s auditStats
	for _, m := range []struct {
		name string
		v    *int64
	}{{"idgen_audit_events_total", &s.recorded}, {"idgen_audit_sent_total", &s.sent}, {"idgen_audit_dropped_total", &s.dropped},
		{"idgen_audit_send_failures_total", &s.failures}, {"idgen_audit_queued", &s.queued}} {
		v, ok := n.metric(m.name)
		if !ok {
			return s, false
		}
		*m.v = int64(v)
	}
	return s, true
}

// chCount is a row of the outage's counting queries.
type chCount struct {
	Rows     int64 `json:"rows,string"`
	Distinct int64 `json:"uniq,string"`
}

func runAuditOutage(e *env, chURL *url.URL, ph auditPhase) {
	t := e.t
	ctx := context.Background()
	migrate(t, e.bin, e.db.dsn)
	sinkURL := url.URL{Scheme: "clickhouse", User: chURL.User, Host: chURL.Host, Path: "/idgen_chaos",
		RawQuery: "table=" + fmt.Sprintf("outage_%d", time.Now().UnixNano())}
	sink := sinkURL.String()
	ch, err := audit.NewClickHouse(sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pingClickHouse(chURL) == nil {
			_, _ = ch.Exec(context.Background(), "DROP TABLE IF EXISTS "+ch.Table(), nil)
		}
	})

	// One node on worker IDs 0-1 whose lease API grants 2-3 to two
	// generators. A ttl of 10 s: a heartbeat stalled on a loaded machine
	// must not cost the node its lease; this test is about the audit.
	gc := newGenCluster(e, "0-1", "2-3", 1)
	nd := gc.nodes[0]
	nd.flags = append(nd.flags, "--lease-ttl", "10s", "--audit-sink", sink, "--audit-buffer", strconv.Itoa(ph.buffer),
		"--audit-batch", strconv.Itoa(min(ph.buffer, 100)), "--audit-flush-interval", "250ms")
	gc.startAll()
	gc.waitReady(0)
	gc.startGens(2)
	l := gc.startLoad(loadSpec{Nodes: []int{0}, Clients: 2, Count: 10, Interval: 5 * time.Millisecond, Token: genSecret})
	out := outcome{recovery: -1}

	// The sink works before the outage: the table exists, events arrive.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if s, ok := nd.auditStats(); ok && s.sent > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node sent no audit event to ClickHouse within 30s:\n%s", nd.logTail(30))
		}
	}
	time.Sleep(2 * time.Second)
	stopping := time.Now()
	down, err := stopClickHouse(chURL)
	if err != nil {
		t.Fatalf("stop ClickHouse: %v", err)
	}
	// The node's counters once a second while the server is down.
	var peakQueued int64
	var during auditStats
	for time.Now().Before(down.Add(auditOutage)) {
		time.Sleep(min(time.Second, time.Until(down.Add(auditOutage))))
		if s, ok := nd.auditStats(); ok {
			peakQueued, during = max(peakQueued, s.queued), s
		}
	}
	starting := time.Now()
	back, err := startClickHouse(chURL)
	if err != nil {
		t.Fatalf("start ClickHouse: %v", err)
	}
	if refused(chURL.Host) {
		t.Fatalf("ClickHouse answers and refuses at once")
	}
	time.Sleep(3 * time.Second) // load goes on after the restart
	// Every request in flight is answered: the block records count its IDs.
	draws := l.finish()
	out.problems = append(out.problems, gc.stopGens()...) // their releases are events too
	gens := gc.collect(&out)
	time.Sleep(2 * time.Second) // the node's next heartbeat reports its last block

	// The buffer drains. A consistent reading: nothing queued, and the
	// node sent nothing between two readings around ClickHouse's count.
	var st auditStats
	var got chCount
	settled := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !settled; time.Sleep(50 * time.Millisecond) {
		s1, ok := nd.auditStats()
		if !ok || s1.queued != 0 {
			continue
		}
		rows, err := audit.Query[chCount](ctx, ch, "SELECT count() AS rows, uniqExact(event_id) AS uniq FROM "+ch.Table()+" FINAL")
		if err != nil || len(rows) != 1 {
			continue
		}
		s2, ok := nd.auditStats()
		if ok && s2 == s1 {
			st, got, settled = s1, rows[0], true
		}
	}
	if !settled {
		s, _ := nd.auditStats()
		t.Fatalf("the audit buffer did not drain within 60s of ClickHouse's return (last counters %+v):\n%s", s, nd.logTail(30))
	}
	raw, err := audit.Query[chCount](ctx, ch, "SELECT count() AS rows, uniqExact(event_id) AS uniq FROM "+ch.Table())
	if err != nil || len(raw) != 1 {
		t.Fatalf("count the raw rows: %v", err)
	}

	// ID issuance: no request failed, every second of the outage served.
	var failed, served, servedIDs int64
	var maxLatency, maxLatencyOutage time.Duration
	seconds := int(back.Sub(down) / time.Second)
	perSecond := make([]int, seconds+1)
	for _, d := range draws {
		lat := d.Recv.Sub(d.Send)
		maxLatency = max(maxLatency, lat)
		if d.Status != 200 {
			failed++
			continue
		}
		if !d.Recv.Before(down) && d.Send.Before(back) {
			maxLatencyOutage = max(maxLatencyOutage, lat)
		}
		if !d.Recv.Before(down) && d.Recv.Before(back) {
			served++
			servedIDs += int64(len(d.IDs))
			perSecond[int(d.Recv.Sub(down)/time.Second)]++
		}
	}
	if failed > 0 {
		out.problem("%d of %d ID requests failed (want 0): the audit outage must not touch issuance", failed, len(draws))
	}
	minPerSecond := -1
	for i, n := range perSecond {
		if i == seconds && back.Sub(down)%time.Second < 100*time.Millisecond {
			continue // a sliver of a second at the end
		}
		if n == 0 {
			out.problem("no ID request was answered in second %d of the outage", i)
		}
		if minPerSecond < 0 || n < minPerSecond {
			minPerSecond = n
		}
	}

	// The audit trail.
	if st.failures == 0 {
		out.problem("no write to ClickHouse failed: the outage was not seen (counters %+v)", st)
	}
	if during.queued == 0 || during.sent >= st.sent {
		out.problem("nothing waited in the buffer during the outage (at its end %+v, after %+v)", during, st)
	}
	if got.Rows != got.Distinct {
		out.problem("ClickHouse holds %d rows for %d event IDs after FINAL: an event twice", got.Rows, got.Distinct)
	}
	if st.recorded != st.sent {
		out.problem("recorded %d events, sent %d with nothing queued", st.recorded, st.sent)
	}
	// Every event the node accepted into its buffer is in ClickHouse once;
	// those it dropped are the ones missing.
	if got.Distinct != st.recorded {
		out.problem("ClickHouse holds %d distinct events, the node recorded %d", got.Distinct, st.recorded)
	}
	if missing := st.recorded + st.dropped - got.Distinct; missing != st.dropped {
		out.problem("%d events missing from ClickHouse (%d made, %d there), the drop counter says %d", missing, st.recorded+st.dropped, got.Distinct, st.dropped)
	}
	outageEvents := countOutageEvents(t, ch, down, back)
	var blockNote string
	if ph.drops {
		if st.dropped == 0 {
			out.problem("a buffer of %d dropped nothing in a %s outage", ph.buffer, auditOutage)
		}
		if !strings.Contains(nd.log(), "audit buffer full") {
			out.problem("the node did not log that its audit buffer was full")
		}
	} else {
		if st.dropped != 0 {
			out.problem("a buffer of %d dropped %d events in a %s outage (peak queued %d)", ph.buffer, st.dropped, auditOutage, peakQueued)
		}
		if outageEvents["heartbeat"] == 0 || outageEvents["block"] == 0 {
			out.problem("ClickHouse holds no heartbeat or block recorded during the outage: %v", outageEvents)
		}
		blockNote = checkBlockSums(ch, &out, draws, gens, nd.holder, gc)
	}

	var acked int64
	for _, d := range draws {
		acked += int64(len(d.IDs))
	}
	out.note("clickhouse_stop_took=%s clickhouse_start_took=%s", down.Sub(stopping).Round(time.Millisecond), back.Sub(starting).Round(time.Millisecond))
	out.note("outage=%s ids_during_outage=%d requests_during_outage=%d min_requests_per_second=%d max_latency=%s max_latency_outage=%s "+
		"events_made=%d recorded=%d sent=%d dropped=%d send_failures=%d peak_queued=%d clickhouse_rows_raw=%d clickhouse_events_final=%d outage_events=%v %s",
		back.Sub(down).Round(time.Millisecond), servedIDs, served, minPerSecond, maxLatency.Round(time.Millisecond), maxLatencyOutage.Round(time.Millisecond),
		st.recorded+st.dropped, st.recorded, st.sent, st.dropped, st.failures, peakQueued, raw[0].Rows, got.Distinct, outageEvents, blockNote)
	result := "PASS"
	if len(out.problems) > 0 {
		result = "FAIL"
	}
	e.sum.add(fmt.Sprintf("chaos: scenario=audit-outage/%s db=postgres requests=%d failed=%d ids=%d buffer=%d result=%s",
		ph.name, len(draws), failed, acked, ph.buffer, result))
	t.Logf("detail: %s", strings.Join(out.notes, " "))
	if dir := os.Getenv("IDGEN_CHAOS_LOGS"); dir != "" {
		keepLogs(t, dir, "audit-outage-"+ph.name, gc.cluster)
		gc.keepGenLogs(e, "audit-outage-"+ph.name)
	}
	for _, p := range append(out.problems, gc.stopAll()...) {
		t.Errorf("%s", p)
	}
}

// countOutageEvents counts, by kind, the events ClickHouse holds that the
// node recorded while the server was down.
func countOutageEvents(t *testing.T, ch *audit.ClickHouse, down, back time.Time) map[string]int64 {
	t.Helper()
	type row struct {
		Kind string `json:"kind"`
		N    int64  `json:"n,string"`
	}
	rows, err := audit.Query[row](context.Background(), ch, fmt.Sprintf("SELECT kind, count() AS n FROM %s FINAL WHERE event_ms >= %d AND event_ms < %d GROUP BY kind",
		ch.Table(), down.UnixMilli(), back.UnixMilli()))
	if err != nil {
		t.Fatalf("count the outage's events: %v", err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Kind] = r.N
	}
	return m
}

// checkBlockSums checks that the block records in ClickHouse add up, per
// holder, to the IDs it issued: the node's to those its clients received,
// each generator's to those it wrote out. It returns a note of the sums.
func checkBlockSums(ch *audit.ClickHouse, out *outcome, draws, gens []Draw, node string, gc *genCluster) string {
	type row struct {
		Holder string `json:"holder"`
		N      int64  `json:"n,string"`
	}
	rows, err := audit.Query[row](context.Background(), ch, "SELECT holder, sum(count) AS n FROM "+ch.Table()+" FINAL WHERE kind = 'block' GROUP BY holder")
	if err != nil {
		out.problem("sum the block records: %v", err)
		return ""
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Holder] = r.N
	}
	want := map[string]int64{}
	for _, d := range draws {
		want[node] += int64(len(d.IDs))
	}
	for _, d := range gens {
		want[d.Holder] += int64(len(d.IDs))
	}
	for _, g := range gc.gens {
		if want[g.holder()] == 0 {
			out.problem("%s issued no ID", g.name)
		}
	}
	for h, n := range want {
		if got[h] != n {
			// What the logs say of the reports: a heartbeat that failed
			// on its way, a block the node refused.
			var why []string
			logs := map[string]string{node: gc.nodes[0].log()}
			for _, g := range gc.gens {
				b, _ := os.ReadFile(g.logPath)
				logs[g.name] = string(b)
			}
			for name, text := range logs {
				for _, line := range strings.Split(text, "\n") {
					if strings.Contains(line, "heartbeat failed") || strings.Contains(line, "block not recorded") ||
						strings.Contains(line, "release") && strings.Contains(line, "level=WARN") {
						why = append(why, name+": "+line)
					}
				}
			}
			out.problem("%s: block records add up to %d IDs, it issued %d; the logs:\n%s", h, got[h], n, strings.Join(why, "\n"))
		}
	}
	return fmt.Sprintf("block_sums=%v issued=%v", got, want)
}
