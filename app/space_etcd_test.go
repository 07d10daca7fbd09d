package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// The space tests run strict load against an etcd cluster of their own
// whose backend quota is small, so that a few thousand segment fetches write several times the
// quota's worth of revisions. Each namespace carries the longest
// description allowed: every fetch rewrites the whole record, about 1.3 kB
// of value and 2 kB of backend a revision.
const (
	spaceQuota      = 4 << 20 // --quota-backend-bytes
	spaceNamespaces = 4
	spaceWorkers    = 8
	// spaceRevisions is how many fetches the load makes: about 19 MB of
	// backend writes, between four and five times the quota.
	spaceRevisions = 3 * spaceQuota / 1300
	// spaceLoadBound bounds the load in time, whatever the machine's
	// speed; a test that could not write its revisions within it fails.
	spaceLoadBound = 3 * time.Minute
)

// spaceNode is one idgen node of the space tests, serving over HTTP.
type spaceNode struct {
	a    *app.App
	base string
	logs *testserver.LogBuffer
}

func startSpaceNode(t *testing.T, dsn, holder string, worker int64, retention time.Duration) *spaceNode {
	t.Helper()
	logs := &testserver.LogBuffer{}
	a, err := app.Open(context.Background(), app.Config{
		DSN: dsn, Migrate: true, Listen: "127.0.0.1:0",
		Keeper: allocator.KeeperSettings{Holder: holder, TTL: 3 * time.Second,
			WorkerIDs: &allocator.WorkerRange{Min: worker, Max: worker}},
		EtcdCompactRetention: retention,
		SpaceInterval:        100 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("Open %s: %v", holder, err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		_ = a.Close(ctx)
		if err := <-serveErr; err != nil {
			t.Errorf("Serve of %s: %v", holder, err)
		}
	})
	n := &spaceNode{a: a, base: "http://" + a.Addr().String(), logs: logs}
	waitReady(t, n.base)
	return n
}

// createSpaceNamespaces creates the strict namespaces the load draws from.
func createSpaceNamespaces(t *testing.T, a *app.App) []string {
	t.Helper()
	var names []string
	for i := range spaceNamespaces {
		name := fmt.Sprintf("strict-%d", i)
		if _, err := a.Store().CreateNamespace(context.Background(), allocator.Namespace{
			Name: name, Step: 1, MinStep: 1, MaxStep: 1, Mode: allocator.ModeStrict, Fallback: allocator.FallbackNone,
			Description: strings.Repeat("d", allocator.MaxDescriptionLen),
		}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// idLedger records every ID handed out, by source, and counts duplicates.
type idLedger struct {
	mu    sync.Mutex
	seen  map[string]struct{}
	dups  int
	first []string // a few duplicates, for the message
}

func (l *idLedger) add(source string, ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]struct{}{}
	}
	for _, id := range ids {
		k := source + "/" + strconv.FormatInt(id, 10)
		if _, dup := l.seen[k]; dup {
			l.dups++
			if len(l.first) < 5 {
				l.first = append(l.first, k)
			}
		}
		l.seen[k] = struct{}{}
	}
}

func (l *idLedger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dups != 0 {
		t.Errorf("%d duplicate IDs across the run, e.g. %v; want 0", l.dups, l.first)
	}
	t.Logf("%d distinct IDs handed out across the run", len(l.seen))
}

// strictLoad makes n strict fetches, spread over the namespaces and the
// nodes, from spaceWorkers goroutines, until it has made them all or a
// draw fails (stopOnError) or the bound runs out. It returns the fetches
// that succeeded and the first error.
func strictLoad(ctx context.Context, nodes []*spaceNode, names []string, n int, ledger *idLedger, stopOnError bool) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, spaceLoadBound)
	defer cancel()
	var (
		next, done atomic.Int64
		firstErr   atomic.Pointer[error]
		wg         sync.WaitGroup
	)
	for w := range spaceWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out idgen.Drawn
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				node, ns := nodes[int(i)%len(nodes)], names[(int(i)/len(nodes)+w)%len(names)]
				err := node.a.Service().Draw(ctx, idgen.Caller{Name: "load"}, idgen.DrawRequest{Namespace: ns, Count: 1}, &out)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					if stopOnError {
						cancel()
						return
					}
					continue
				}
				ledger.add(ns, out.IDs)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return done.Load(), *p
	}
	if ctx.Err() != nil && next.Load() <= int64(n) {
		return done.Load(), fmt.Errorf("load cut short after %d of %d fetches: %w", done.Load(), n, ctx.Err())
	}
	return done.Load(), nil
}

// readyz is the part of /readyz the space tests read.
type readyz struct {
	Ready    bool   `json:"ready"`
	Reason   string `json:"reason"`
	Database struct {
		Reachable bool   `json:"reachable"`
		Alarm     string `json:"alarm"`
		Space     *struct {
			SizeBytes  int64    `json:"size_bytes"`
			QuotaBytes int64    `json:"quota_bytes"`
			Alarms     []string `json:"alarms"`
			Compaction string   `json:"compaction"`
		} `json:"space"`
	} `json:"database"`
}

func getReadyz(t *testing.T, base string) (int, readyz) {
	t.Helper()
	code, body := get(t, base+"/readyz")
	var r readyz
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET /readyz: %v in %s", err, body)
	}
	return code, r
}

// metricValue returns the value of the metric line that starts with
// series on base's /metrics, and whether there is one.
func metricValue(t *testing.T, base, series string) (float64, bool) {
	t.Helper()
	_, body := get(t, base+"/metrics")
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// clusterSpace returns the largest member's backend size and the cluster's
// alarms, as etcd itself reports them.
func clusterSpace(t *testing.T, c *testkit.EtcdCluster) (int64, []*etcdserverpb.AlarmMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var size int64
	for _, ep := range c.Endpoints() {
		st, err := c.Client().Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", ep, err)
		}
		size = max(size, st.DbSize)
	}
	alarms, err := c.Client().AlarmList(ctx)
	if err != nil {
		t.Fatalf("alarm list: %v", err)
	}
	return size, alarms.Alarms
}

// TestEtcdCompactionBoundsSpace: under strict load that writes several
// times the backend quota's worth of revisions, nodes that compact the
// history keep the backend below the quota: no alarm, the nodes ready
// throughout, every ID distinct. One member: the load runs fastest there,
// which leaves the compaction the least time, and the test short.
func TestEtcdCompactionBoundsSpace(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1, Flags: []string{"--quota-backend-bytes", strconv.Itoa(spaceQuota)}})
	dsn := c.DSN("/idgen-space/")
	nodes := []*spaceNode{
		startSpaceNode(t, dsn, "space-a", 1, time.Second),
		startSpaceNode(t, dsn, "space-b", 2, time.Second),
	}
	names := createSpaceNamespaces(t, nodes[0].a)
	ledger := &idLedger{}

	stopSizes := make(chan struct{})
	sizesDone := make(chan []string)
	go func() { // owned here: stopped by closing stopSizes, waited for on sizesDone
		var lines []string
		start := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSizes:
				sizesDone <- lines
				return
			case <-tick.C:
				r, _ := nodes[0].a.Space()
				lines = append(lines, fmt.Sprintf("%3.0fs size %d in use %d revision %d", time.Since(start).Seconds(), r.Size, r.InUse, r.Revision))
			}
		}
	}()
	start := time.Now()
	done, err := strictLoad(context.Background(), nodes, names, spaceRevisions, ledger, true)
	elapsed := time.Since(start)
	close(stopSizes)
	sizes := <-sizesDone
	t.Logf("%d strict fetches in %s (%.0f/s), quota %d bytes; backend over time:\n%s",
		done, elapsed.Round(time.Millisecond), float64(done)/elapsed.Seconds(), spaceQuota, strings.Join(sizes, "\n"))
	if err != nil {
		t.Fatalf("strict load with compaction on: %v after %d fetches", err, done)
	}

	size, alarms := clusterSpace(t, c)
	if len(alarms) != 0 {
		t.Errorf("alarms after the load with compaction on: %v, want none", alarms)
	}
	if size >= spaceQuota {
		t.Errorf("backend %d bytes after the load, want below the quota %d", size, spaceQuota)
	}
	for _, n := range nodes {
		code, r := getReadyz(t, n.base)
		if code != http.StatusOK || r.Database.Alarm != "" || r.Database.Space == nil || len(r.Database.Space.Alarms) != 0 {
			t.Errorf("%s/readyz after the load: got %d %+v, want 200 without an alarm", n.base, code, r)
		}
		if r.Database.Space != nil && !strings.HasPrefix(r.Database.Space.Compaction, "by idgen") {
			t.Errorf("%s/readyz compaction: got %q, want by idgen", n.base, r.Database.Space.Compaction)
		}
		if v, ok := metricValue(t, n.base, `idgen_database_alarm{alarm="NOSPACE"}`); !ok || v != 0 {
			t.Errorf("%s idgen_database_alarm{alarm=NOSPACE}: got %v (present %v), want 0", n.base, v, ok)
		}
		if v, ok := metricValue(t, n.base, "idgen_etcd_compactions_total"); !ok || v < 1 {
			t.Errorf("%s idgen_etcd_compactions_total: got %v (present %v), want at least 1", n.base, v, ok)
		}
	}
	ledger.check(t)
}

// TestEtcdNoSpaceAndRecovery: the same load on nodes that do not compact
// fills the backend until etcd raises NOSPACE. /readyz, the status page,
// the metrics and the problem answers name it. After the operator's three
// commands (compact, defragment, disarm) the same nodes serve again,
// without a restart, and no ID was handed out twice in the whole run.
func TestEtcdNoSpaceAndRecovery(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Members: testkit.EtcdMembers, Flags: []string{"--quota-backend-bytes", strconv.Itoa(spaceQuota)}})
	dsn := c.DSN("/idgen-space/")
	nodes := []*spaceNode{
		startSpaceNode(t, dsn, "space-a", 1, app.NoEtcdCompaction),
		startSpaceNode(t, dsn, "space-b", 2, app.NoEtcdCompaction),
	}
	names := createSpaceNamespaces(t, nodes[0].a)
	ledger := &idLedger{}
	ctx := context.Background()

	// Snowflake IDs before: the nodes serve both sources.
	drawSnowflakes(t, nodes, ledger)
	done, err := strictLoad(ctx, nodes, names, 2*spaceRevisions, ledger, true)
	t.Logf("%d strict fetches before the first refusal: %v", done, err)
	if err == nil {
		t.Fatalf("%d strict fetches with compaction off and a quota of %d bytes: got no refusal, want NOSPACE", done, spaceQuota)
	}
	var ie *idgen.Error
	if !errors.As(err, &ie) || ie.Code != idgen.StorageFull || !strings.Contains(ie.Detail, "NOSPACE") {
		t.Fatalf("the refusal: got %v, want code %s naming NOSPACE", err, idgen.StorageFull)
	}
	if _, alarms := clusterSpace(t, c); len(alarms) == 0 || alarms[0].Alarm != etcdserverpb.AlarmType_NOSPACE {
		t.Fatalf("etcd's alarms after the refusal: %v, want NOSPACE", alarms)
	}

	// Every node says so: /readyz, the status page, the metrics, the
	// problem answers of both sources (the lease cannot be renewed).
	for _, n := range nodes {
		waitFor(t, n.base+": /readyz naming NOSPACE and not ready", func() (bool, string) {
			code, r := getReadyz(t, n.base)
			ok := code == http.StatusServiceUnavailable && strings.Contains(r.Database.Alarm, "NOSPACE") &&
				strings.Contains(r.Reason, "out of space") && r.Database.Space != nil && len(r.Database.Space.Alarms) == 1
			return ok, fmt.Sprintf("%d %+v", code, r)
		})
		code, page := get(t, n.base+"/")
		if code != http.StatusOK || !strings.Contains(string(page), "Database out of space: etcd raised the NOSPACE alarm") ||
			!strings.Contains(string(page), "etcdctl alarm disarm") {
			t.Errorf("%s/ status page: got %d without the NOSPACE notice", n.base, code)
		}
		if v, ok := metricValue(t, n.base, `idgen_database_alarm{alarm="NOSPACE"}`); !ok || v != 1 {
			t.Errorf("%s idgen_database_alarm{alarm=NOSPACE}: got %v (present %v), want 1", n.base, v, ok)
		}
		if v, ok := metricValue(t, n.base, "idgen_database_quota_bytes"); !ok || v != spaceQuota {
			t.Errorf("%s idgen_database_quota_bytes: got %v (present %v), want %d", n.base, v, ok, spaceQuota)
		}
		for _, path := range []string{"/ids?namespace=" + names[0], "/ids"} {
			code, body := get(t, n.base+path)
			var p struct{ Code, Detail string }
			_ = json.Unmarshal(body, &p)
			if code != http.StatusInsufficientStorage || p.Code != string(idgen.StorageFull) || !strings.Contains(p.Detail, "NOSPACE") {
				t.Errorf("GET %s%s: got %d %s, want 507 %s naming NOSPACE", n.base, path, code, body, idgen.StorageFull)
			}
		}
		if !strings.Contains(n.logs.String(), "NOSPACE") {
			t.Errorf("%s: the log does not name NOSPACE", n.base)
		}
	}

	// The operator's three commands: compact, defragment, disarm.
	operatorRecovers(t, c)

	for _, n := range nodes {
		waitReady(t, n.base)
		waitFor(t, n.base+": /readyz without an alarm", func() (bool, string) {
			code, r := getReadyz(t, n.base)
			return code == http.StatusOK && r.Database.Alarm == "", fmt.Sprintf("%d %+v", code, r)
		})
		if v, ok := metricValue(t, n.base, `idgen_database_alarm{alarm="NOSPACE"}`); !ok || v != 0 {
			t.Errorf("%s idgen_database_alarm{alarm=NOSPACE} after the recovery: got %v (present %v), want 0", n.base, v, ok)
		}
	}
	drawSnowflakes(t, nodes, ledger)
	if done, err := strictLoad(ctx, nodes, names, 200, ledger, true); err != nil {
		t.Fatalf("strict fetches after the recovery: %v after %d", err, done)
	}
	ledger.check(t)
}

// drawSnowflakes draws a batch of Snowflake IDs from every node.
func drawSnowflakes(t *testing.T, nodes []*spaceNode, ledger *idLedger) {
	t.Helper()
	for _, n := range nodes {
		var out idgen.Drawn
		if err := n.a.Service().Draw(context.Background(), idgen.Caller{Name: "load"}, idgen.DrawRequest{Count: 1000}, &out); err != nil {
			t.Fatalf("Snowflake IDs from %s: %v", n.base, err)
		}
		ledger.add("snowflake", out.IDs)
	}
}

// operatorRecovers runs what docs/operations.md tells an operator to run
// after NOSPACE: etcdctl compact <current revision>, etcdctl defrag
// --cluster, etcdctl alarm disarm.
func operatorRecovers(t *testing.T, c *testkit.EtcdCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	cli := c.Client()
	st, err := cli.Status(ctx, c.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, ep := range c.Endpoints() {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			t.Fatalf("defragment %s: %v", ep, err)
		}
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatalf("disarm: %v", err)
	}
	size, alarms := clusterSpace(t, c)
	t.Logf("after compact, defrag and disarm: backend %d bytes, alarms %v", size, alarms)
}

// waitFor polls cond until it holds, failing the test after waitBound
// with cond's last description.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, waitBound, desc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
