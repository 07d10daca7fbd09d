package main

// End-to-end tests: idgen serve runs in-process through run, exactly as main
// calls it, on each database (the embedded SQLite default, PostgreSQL and
// MySQL/MariaDB, from internal/testkit), and is driven over HTTP and through
// the other commands. binary_test.go runs the built binary.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/migrations"
	"github.com/idgen-project/idgen/snowflake"
)

// Bounds on waiting for a node; generous, because a loaded CI machine may be
// slow. They bound waits only: no test passes or fails on how long anything took.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 60 * time.Second
)

// migrationFiles returns the names of idgen's migrations, in order, as
// migrate prints them (every dialect has the same ones).
func migrationFiles(t *testing.T) []string {
	t.Helper()
	fsys, err := migrations.FS(migrations.DialectSQLite)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: got %v, %v; want .sql files", files, err)
	}
	sort.Strings(files)
	return files
}

// migrationVersion returns the version of a migration file, the number its
// name starts with (00008_segments_stride.sql is 8). Versions may have
// gaps.
func migrationVersion(t *testing.T, file string) int64 {
	t.Helper()
	num, _, _ := strings.Cut(file, "_")
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		t.Fatalf("migration %s: no version: %v", file, err)
	}
	return v
}

// forEachDialect runs f on a fresh database of every dialect.
func forEachDialect(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, d := range testserver.Dialects {
		t.Run(d, func(t *testing.T) { f(t, testserver.StoreDSN(t, d)) })
	}
}

// waitAddrFile waits until idgen serve has written the address it serves on
// to path (--addr-file) and returns it. exited is closed if the process
// ends first.
func waitAddrFile(t *testing.T, path string, exited <-chan struct{}, logs fmt.Stringer) string {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			addr := strings.TrimSuffix(string(b), "\n")
			if _, _, err := net.SplitHostPort(addr); err != nil || strings.Contains(addr, "\n") {
				t.Fatalf("--addr-file holds %q, want host:port and a newline", b)
			}
			return addr
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("read --addr-file: %v", err)
		}
		select {
		case <-exited:
			t.Fatalf("idgen serve exited before writing --addr-file\nlogs:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("idgen serve did not write --addr-file within %s\nlogs:\n%s", startTimeout, logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// node is idgen serve running in-process.
type node struct {
	t      *testing.T
	addr   string
	logs   *testserver.LogBuffer
	cancel context.CancelFunc
	done   chan error
	client *http.Client

	stopOnce sync.Once
	stopErr  error
}

// startNode runs `idgen serve --listen 127.0.0.1:0 args…` and waits until it
// is serving and ready. The node is stopped when the test ends.
func startNode(t *testing.T, args ...string) *node {
	t.Helper()
	n := startNodeUnready(t, args...)
	n.waitReady()
	return n
}

func startNodeUnready(t *testing.T, args ...string) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{t: t, logs: &testserver.LogBuffer{}, cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Timeout: 30 * time.Second}}
	addrFile := filepath.Join(t.TempDir(), "addr")
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--drain-window", "0"}, args...)
	exited := make(chan struct{})
	go func() {
		err := run(ctx, argv, func(string) string { return "" }, io.Discard, n.logs)
		n.done <- err
		close(exited)
	}()
	t.Cleanup(func() { _ = n.stop() })
	n.addr = waitAddrFile(t, addrFile, exited, n.logs)
	return n
}

// stop cancels the node's context (what SIGTERM does in main) and returns
// run's error.
func (n *node) stop() error {
	n.stopOnce.Do(func() {
		n.cancel()
		select {
		case n.stopErr = <-n.done:
		case <-time.After(stopTimeout):
			n.stopErr = fmt.Errorf("idgen serve did not stop within %s", stopTimeout)
		}
		n.client.CloseIdleConnections()
	})
	return n.stopErr
}

// mustStop stops the node and fails the test unless run returned nil.
func (n *node) mustStop() {
	n.t.Helper()
	if err := n.stop(); err != nil {
		n.t.Fatalf("idgen serve: got %v, want a clean shutdown\nlogs:\n%s", err, n.logs)
	}
}

func (n *node) url(path string) string { return "http://" + n.addr + path }

// get returns the status, header and body of GET path.
func (n *node) get(path string) (int, http.Header, []byte) {
	n.t.Helper()
	return n.do(http.MethodGet, path, nil)
}

func (n *node) do(method, path string, header http.Header) (int, http.Header, []byte) {
	n.t.Helper()
	req, err := http.NewRequest(method, n.url(path), nil)
	if err != nil {
		n.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := n.client.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, body
}

// getJSON GETs path, requires status want and decodes the body into v.
func (n *node) getJSON(path string, want int, v any) {
	n.t.Helper()
	code, h, body := n.get(path)
	if code != want {
		n.t.Fatalf("GET %s: got status %d, want %d; body %s", path, code, want, body)
	}
	wantType := "application/json"
	if code >= 400 {
		wantType = "application/problem+json"
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, wantType) {
		n.t.Errorf("GET %s: got Content-Type %q, want %s", path, ct, wantType)
	}
	if err := json.Unmarshal(body, v); err != nil {
		n.t.Fatalf("GET %s: decode %s: %v", path, body, err)
	}
}

// waitReady polls /readyz until the node can prove its lease.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		code, _, body := n.get("/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node not ready within %s: last /readyz %d %s\nlogs:\n%s", startTimeout, code, body, n.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The JSON documents of the API (see docs/openapi.yaml).
type (
	idsResponse struct {
		IDs       []string      `json:"ids"`
		Source    string        `json:"source"`
		Namespace string        `json:"namespace"`
		Ranges    []rangeJSON   `json:"ranges"`
		Explain   []explainJSON `json:"explain"`
	}
	rangeJSON struct {
		First string `json:"first"`
		Last  string `json:"last"`
	}
	explainJSON struct {
		ID          string `json:"id"`
		Time        string `json:"time"`
		TimestampMS int64  `json:"timestamp_ms"`
		Datacenter  int64  `json:"datacenter"`
		Worker      int64  `json:"worker"`
		Sequence    int64  `json:"sequence"`
	}
	readyResponse struct {
		Ready  bool   `json:"ready"`
		Reason string `json:"reason"`
		Lease  struct {
			Datacenter     int64  `json:"datacenter"`
			Worker         int64  `json:"worker"`
			FencingVersion int64  `json:"fencing_version"`
			Holder         string `json:"holder"`
		} `json:"lease"`
		Database struct {
			Reachable bool `json:"reachable"`
		} `json:"database"`
	}
	problem struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
)

// ints parses decimal ID strings.
func ints(t *testing.T, ids []string) []int64 {
	t.Helper()
	out := make([]int64, len(ids))
	for i, s := range ids {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ID %q is not a decimal int64: %v", s, err)
		}
		out[i] = v
	}
	return out
}

// seq returns first, first+1, … (n IDs).
func seq(first int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// increasing reports whether ids strictly increase.
func increasing(ids []int64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// leaseRows runs `idgen leases` and returns its rows as maps from the header's
// column names to the cells.
func leaseRows(t *testing.T, dsn string) []map[string]string {
	t.Helper()
	r := cli(t, nil, "leases", "--dsn", dsn)
	if r.code != 0 {
		t.Fatalf("idgen leases: got exit code %d, stderr %q", r.code, r.stderr)
	}
	ls := lines(r.stdout)
	header := strings.Fields(ls[0])
	want := []string{"DC", "WORKER", "HOLDER", "OWNER", "VERSION", "ACQUIRED", "HEARTBEAT", "EXPIRES", "RELEASED", "CEILING"}
	if !slices.Equal(header, want) {
		t.Fatalf("idgen leases: got header %q, want %q", header, want)
	}
	var rows []map[string]string
	for _, l := range ls[1:] {
		if strings.HasPrefix(l, "(") {
			break // the count of rows not shown
		}
		cells := strings.Fields(l)
		if len(cells) < len(header) {
			t.Fatalf("idgen leases: row %q has fewer cells than the header", l)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// checkReleased checks in `idgen leases` and in the store that the lease on
// (dc, worker) was released: holder NULL, released_at set.
func checkReleased(t *testing.T, dsn string, dc, worker int64) {
	t.Helper()
	found := false
	for _, row := range leaseRows(t, dsn) {
		if row["DC"] != strconv.FormatInt(dc, 10) || row["WORKER"] != strconv.FormatInt(worker, 10) {
			continue
		}
		found = true
		if row["HOLDER"] != "-" || row["RELEASED"] == "-" {
			t.Errorf("idgen leases: got holder %q, released %q for %d/%d; want \"-\" and a time",
				row["HOLDER"], row["RELEASED"], dc, worker)
		}
	}
	if !found {
		t.Errorf("idgen leases: no row for datacenter %d worker %d", dc, worker)
	}
	ctx := context.Background()
	s, err := stores.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer s.Close()
	leases, err := s.ListLeases(ctx)
	if err != nil {
		t.Fatalf("list leases: %v", err)
	}
	for _, l := range leases {
		if l.DatacenterID == dc && l.WorkerID == worker &&
			(l.Holder != "" || l.ReleasedAt.IsZero() || l.FencingVersion < 1) {
			t.Errorf("store: got lease %+v, want holder \"\", released_at set, fencing version >= 1", l)
		}
	}
}

// nextID returns the NEXT ID column of namespace name in `idgen namespaces list`.
func nextID(t *testing.T, dsn, name string) int64 {
	t.Helper()
	r := cli(t, nil, "namespaces", "list", "--dsn", dsn)
	if r.code != 0 {
		t.Fatalf("idgen namespaces list: got exit code %d, stderr %q", r.code, r.stderr)
	}
	ls := lines(r.stdout)
	if !strings.HasPrefix(ls[0], "NAME ") || !strings.Contains(ls[0], "NEXT ID") {
		t.Fatalf("idgen namespaces list: got header %q", ls[0])
	}
	for _, l := range ls[1:] {
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == name {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("idgen namespaces list: NEXT ID %q: %v", f[1], err)
			}
			return v
		}
	}
	t.Fatalf("idgen namespaces list: no row for %s in %q", name, r.stdout)
	return 0
}

// mustCLI runs idgen and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("idgen %q: got exit code %d, stderr %q", args, r.code, r.stderr)
	}
	return r.stdout
}

// TestServe walks through the service on every database: migrations and a
// namespace created with the CLI, the happy paths over HTTP, a table of bad
// requests, and a graceful shutdown that returns the namespace's tail and
// releases the lease.
func TestServe(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		files := migrationFiles(t)
		out := mustCLI(t, "migrate", "status", "--dsn", dsn)
		if got := strings.Count(out, " pending "); got != len(files) {
			t.Errorf("migrate status before up: got %d pending migrations, want %d:\n%s", got, len(files), out)
		}
		out = mustCLI(t, "migrate", "up", "--dsn", dsn)
		for _, f := range files {
			if want := "applied " + f; !strings.Contains(out, want) {
				t.Errorf("migrate up: got %q, want %q", out, want)
			}
		}
		out = mustCLI(t, "migrate", "up", "--dsn", dsn)
		if want := fmt.Sprintf("database is up to date at version %d\n", migrationVersion(t, files[len(files)-1])); out != want {
			t.Errorf("second migrate up: got %q, want %q", out, want)
		}
		out = mustCLI(t, "namespaces", "create", "orders", "--start", "1000", "--step", "100", "--dsn", dsn)
		if want := "created namespace orders: first ID 1000, step 100 (100 to 10000), mode buffered, fallback none\n"; out != want {
			t.Errorf("namespaces create: got %q, want %q", out, want)
		}
		if r := cli(t, nil, "namespaces", "create", "orders", "--dsn", dsn); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
			t.Errorf("second namespaces create: got exit code %d, stderr %q; want 1 and \"already exists\"", r.code, r.stderr)
		}

		n := startNode(t, "--dsn", dsn, "--datacenter", "3", "--worker-ids", "4-6", "--holder", "e2e-node")

		var health struct{ Status string }
		n.getJSON("/healthz", http.StatusOK, &health)
		if health.Status != "ok" {
			t.Errorf("/healthz: got status %q, want ok", health.Status)
		}
		var ready readyResponse
		n.getJSON("/readyz", http.StatusOK, &ready)
		worker := ready.Lease.Worker
		if !ready.Ready || ready.Lease.Datacenter != 3 || worker < 4 || worker > 6 ||
			ready.Lease.Holder != "e2e-node" || ready.Lease.FencingVersion < 1 || !ready.Database.Reachable {
			t.Errorf("/readyz: got %+v, want ready, datacenter 3, a worker in 4-6, holder e2e-node, database reachable", ready)
		}

		layout := snowflake.DefaultLayout()
		var got idsResponse
		n.getJSON("/ids?count=3", http.StatusOK, &got)
		ids := ints(t, got.IDs)
		if len(ids) != 3 || !increasing(ids) || got.Source != "snowflake" {
			t.Fatalf("/ids?count=3: got %+v, want 3 increasing Snowflake IDs", got)
		}
		for _, id := range ids {
			if p := layout.Decompose(snowflake.ID(id)); p.Datacenter != 3 || p.Worker != worker {
				t.Errorf("ID %d: got datacenter %d worker %d, want 3 and %d", id, p.Datacenter, p.Worker, worker)
			}
		}

		var ex idsResponse
		n.getJSON("/ids?count=3&explain=true", http.StatusOK, &ex)
		exIDs := ints(t, ex.IDs)
		if len(exIDs) != 3 || len(ex.Explain) != 3 || exIDs[0] <= ids[2] || !increasing(exIDs) {
			t.Fatalf("/ids?count=3&explain=true: got %+v, want 3 explained IDs above %d", ex, ids[2])
		}
		for i, e := range ex.Explain {
			p := layout.Decompose(snowflake.ID(exIDs[i]))
			tm, err := time.Parse(time.RFC3339Nano, e.Time)
			if e.ID != ex.IDs[i] || e.TimestampMS != p.Time.UnixMilli() || e.Datacenter != 3 || e.Worker != worker ||
				e.Sequence != p.Sequence || err != nil || !tm.Equal(p.Time) {
				t.Errorf("explain[%d]: got %+v, want %+v of ID %s", i, e, p, ex.IDs[i])
			}
		}

		var parts explainJSON
		n.getJSON("/ids/"+ex.IDs[0], http.StatusOK, &parts)
		if parts != ex.Explain[0] {
			t.Errorf("/ids/%s: got %+v, want %+v", ex.IDs[0], parts, ex.Explain[0])
		}

		var seg idsResponse
		n.getJSON("/ids?count=5&namespace=orders", http.StatusOK, &seg)
		if got, want := ints(t, seg.IDs), seq(1000, 5); !slices.Equal(got, want) || seg.Source != "segment" ||
			seg.Namespace != "orders" || len(seg.Ranges) != 1 || seg.Ranges[0] != (rangeJSON{"1000", "1004"}) {
			t.Errorf("/ids?count=5&namespace=orders: got %+v, want IDs %v from segment orders in range 1000-1004", seg, want)
		}
		n.getJSON("/ids?count=2&namespace=orders", http.StatusOK, &seg)
		if got, want := ints(t, seg.IDs), seq(1005, 2); !slices.Equal(got, want) {
			t.Errorf("second draw from orders: got %v, want %v", got, want)
		}

		t.Run("bad requests", func(t *testing.T) {
			badRequests(t, n)
		})

		n.mustStop()
		logs := n.logs.String()
		for _, want := range []string{`msg="segment tail returned"`, `msg="segment allocator stopped"`, `msg="lease released"`, `msg="lease keeper stopped"`, `msg="idgen stopped"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
		checkReleased(t, dsn, 3, worker)
		short, all := mustCLI(t, "leases", "--dsn", dsn), mustCLI(t, "leases", "--all", "--dsn", dsn)
		if strings.Contains(all, "never claimed") || len(lines(all)) <= len(lines(short)) {
			t.Errorf("leases --all: got %q, want every row of the table and no note (leases without it: %q)", all, short)
		}
		if got := nextID(t, dsn, "orders"); got != 1007 {
			t.Errorf("after shutdown: got next ID %d of orders, want 1007 (the tail returned)", got)
		}
	})
}

// badRequests checks the statuses of malformed and unknown requests.
func badRequests(t *testing.T, n *node) {
	tests := []struct {
		path string
		want int
		code string // problem code, "" for a successful answer
	}{
		{"/ids?count=0", 400, "invalid"},
		{"/ids?count=-1", 400, "invalid"},
		{"/ids?count=1e3", 400, "invalid"},
		{"/ids?count=10001", 400, "invalid"},
		{"/ids?count=abc", 400, "invalid"},
		{"/ids?count=", 400, "invalid"},
		{"/ids?count=%2B5", 400, "invalid"},
		{"/ids?count=99999999999999999999", 400, "invalid"},
		{"/ids?count=1&count=2", 400, "invalid"},
		{"/ids?foo=1", 400, "invalid"},
		{"/ids?count=1&Count=1", 400, "invalid"},
		{"/ids?explain=maybe", 400, "invalid"},
		{"/ids?namespace=orders&explain=true", 400, "invalid"},
		{"/ids?namespace=Orders", 400, "invalid"},
		{"/ids?namespace=" + url.QueryEscape("a b"), 400, "invalid"},
		{"/ids?namespace=" + strings.Repeat("a", 65), 400, "invalid"},
		{"/ids?namespace=", 400, "invalid"},
		{"/ids?namespace=orders&namespace=orders", 400, "invalid"},
		{"/ids?namespace=nosuch", 404, "not_found"},
		{"/ids/abc", 400, "invalid"},
		{"/ids/-1", 400, "invalid"},
		{"/ids/1.5", 400, "invalid"},
		{"/ids/99999999999999999999", 400, "invalid"},
		{"/nope", 404, "not_found"},
		{"/admin/leases", 404, "not_found"}, // no --admin-token: the admin API is off
		// The boundaries that are allowed.
		{"/ids?count=10000", 200, ""},
		{"/ids?count=1", 200, ""},
		{"/ids", 200, ""},
		{"/ids?explain=false", 200, ""},
		{"/ids/0", 200, ""},
	}
	for _, tt := range tests {
		code, h, body := n.get(tt.path)
		if code != tt.want {
			t.Errorf("GET %s: got status %d, want %d; body %s", tt.path, code, tt.want, body)
			continue
		}
		if tt.code == "" {
			continue
		}
		var p problem
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("GET %s: got Content-Type %q, want application/problem+json", tt.path, ct)
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Status != tt.want || p.Code != tt.code ||
			p.Type != "https://idgen.dev/problems/"+tt.code || p.Title == "" {
			t.Errorf("GET %s: got problem %s (%v), want status %d code %s", tt.path, body, err, tt.want, tt.code)
		}
	}
}

// TestRestart checks that no ID repeats across a restart, for Snowflake IDs
// and a namespace, and that the namespace continues right after the last ID
// drawn: the tail is returned on shutdown. The first node migrates a fresh
// database itself, and the namespace is created while it runs.
func TestRestart(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		seen := map[int64]int{}
		// draw takes 1500 Snowflake IDs from n, counts each in seen, and
		// returns the smallest and the largest.
		draw := func(n *node) (first, last int64) {
			first = int64(1 << 62)
			for range 3 {
				var got idsResponse
				n.getJSON("/ids?count=500", http.StatusOK, &got)
				for _, id := range ints(t, got.IDs) {
					seen[id]++
					first, last = min(first, id), max(last, id)
				}
			}
			return first, last
		}

		const token = "restart-test-token"
		n1 := startNode(t, "--dsn", dsn, "--admin-token", token)
		mustCLI(t, "namespaces", "create", "inv", "--step", "50", "--dsn", dsn)
		_, last1 := draw(n1)
		var seg idsResponse
		n1.getJSON("/ids?count=7&namespace=inv", http.StatusOK, &seg)
		if got, want := ints(t, seg.IDs), seq(1, 7); !slices.Equal(got, want) {
			t.Fatalf("first node, inv: got %v, want %v", got, want)
		}
		// 7 of 50 IDs is past the 10% threshold: the node loads the next
		// range in the background. Wait for that fetch to complete, so that
		// both ranges are held at shutdown and the tail returned spans them.
		waitFetches(t, n1, token, "inv", 2)
		n1.mustStop()

		n2 := startNode(t, "--dsn", dsn)
		first2, _ := draw(n2)
		n2.getJSON("/ids?count=3&namespace=inv", http.StatusOK, &seg)
		if got, want := ints(t, seg.IDs), seq(8, 3); !slices.Equal(got, want) {
			t.Errorf("second node, inv: got %v, want %v (right after the first node's last ID)", got, want)
		}
		n2.mustStop()

		if len(seen) != 3000 {
			for id, c := range seen {
				if c > 1 {
					t.Errorf("Snowflake ID %d issued %d times", id, c)
				}
			}
			t.Fatalf("got %d distinct Snowflake IDs from two runs, want 3000", len(seen))
		}
		if first2 <= last1 {
			t.Errorf("second run's smallest ID %d is not above the first run's largest %d", first2, last1)
		}
		if got := nextID(t, dsn, "inv"); got != 11 {
			t.Errorf("after the second shutdown: got next ID %d of inv, want 11", got)
		}
	})
}

// waitFetches waits until the node has completed at least want fetches for
// namespace name, as its admin API reports.
func waitFetches(t *testing.T, n *node, token, name string, want int64) {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}}
	deadline := time.Now().Add(startTimeout)
	for {
		code, _, body := n.do(http.MethodGet, "/admin/namespaces/"+name, h)
		var ns struct {
			Buffer *struct {
				Fetches int64 `json:"fetches"`
			} `json:"buffer"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &ns) != nil {
			t.Fatalf("GET /admin/namespaces/%s: got %d %s", name, code, body)
		}
		if ns.Buffer != nil && ns.Buffer.Fetches >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s: got %s, want %d fetches done", name, body, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMigrate rolls the schema down and up again with idgen migrate.
func TestMigrate(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		files := migrationFiles(t)
		// status returns the states of the migrations from migrate status.
		status := func() string {
			t.Helper()
			ls := lines(mustCLI(t, "migrate", "status", "--dsn", dsn))
			if got := strings.Fields(ls[0]); !slices.Equal(got, []string{"VERSION", "STATE", "APPLIED", "AT", "MIGRATION"}) {
				t.Fatalf("migrate status: got header %q", ls[0])
			}
			var states []string
			for i, l := range ls[1:] {
				f := strings.Fields(l)
				if len(f) != 4 || i >= len(files) || f[0] != strconv.FormatInt(migrationVersion(t, files[i]), 10) || (f[1] == "applied") == (f[2] == "-") {
					t.Fatalf("migrate status: got row %q", l)
				}
				states = append(states, f[1])
			}
			return strings.Join(states, " ")
		}
		// states returns the states of the migrations when the first
		// applied ones are applied and the rest pending.
		n := len(files)
		states := func(applied int) string {
			st := make([]string, n)
			for i := range st {
				st[i] = "pending"
				if i < applied {
					st[i] = "applied"
				}
			}
			return strings.Join(st, " ")
		}
		type step struct {
			cmd        string
			want       string // in the output
			wantStatus string // the states of the migrations after it
		}
		steps := []step{{"up", "applied " + files[0], states(n)}}
		for i := n - 1; i >= 0; i-- {
			steps = append(steps, step{"down", "rolled back " + files[i], states(i)})
		}
		steps = append(steps,
			step{"down", "no migration to roll back\n", states(0)},
			step{"up", "applied " + files[n-1], states(n)},
			step{"up", fmt.Sprintf("database is up to date at version %d\n", migrationVersion(t, files[n-1])), states(n)})
		if got, want := status(), states(0); got != want {
			t.Errorf("fresh database: got states %q, want %q", got, want)
		}
		for _, args := range [][]string{{"leases"}, {"namespaces", "list"}, {"namespaces", "create", "x"}} {
			r := cli(t, nil, append(args, "--dsn", dsn)...)
			if want := fmt.Sprintf("the database has %d pending migrations: run 'idgen migrate up'", n); r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("idgen %q on a fresh database: got exit code %d, stderr %q; want 1 and %q", args, r.code, r.stderr, want)
			}
		}
		for _, st := range steps {
			out := mustCLI(t, "migrate", st.cmd, "--dsn", dsn)
			if !strings.Contains(out, st.want) {
				t.Errorf("migrate %s: got %q, want %q in it", st.cmd, out, st.want)
			}
			if got := status(); got != st.wantStatus {
				t.Errorf("after migrate %s: got states %q, want %q", st.cmd, got, st.wantStatus)
			}
		}
	})
}

// TestLayoutMismatch checks that a node configured with another layout than
// the one the database records refuses to start, saying what differs.
func TestLayoutMismatch(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		n := startNode(t, "--dsn", dsn, "--layout", "41/5/5/12")
		n.mustStop()
		r := cli(t, nil, "serve", "--listen", "127.0.0.1:0", "--dsn", dsn, "--layout", "41/5/6/11")
		if r.code != 1 || !errors.Is(r.err, allocator.ErrLayoutMismatch) {
			t.Fatalf("got exit code %d, error %v; want 1 and ErrLayoutMismatch", r.code, r.err)
		}
		ls := lines(r.stderr)
		last := ls[len(ls)-1]
		for _, want := range []string{"idgen: ", "layout differs", "worker bits 6 != 5", "sequence bits 11 != 12"} {
			if !strings.Contains(last, want) {
				t.Errorf("got last stderr line %q, want it to contain %q", last, want)
			}
		}
		if strings.Contains(last, "time bits") || strings.Contains(last, "epoch") {
			t.Errorf("got %q, want only the fields that differ", last)
		}
		if strings.Contains(r.stderr, "idgen serving") {
			t.Errorf("the node served despite the mismatch:\n%s", r.stderr)
		}
	})
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// withPassword returns dsn with its password set to pw.
func withPassword(t *testing.T, dsn, pw string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

// TestSecretsNeverShown runs every command that opens a database with DSNs
// carrying a canary password, well-formed and pointing at a closed port, or
// malformed, and checks the canary never shows in the output or the error.
func TestSecretsNeverShown(t *testing.T) {
	const canary = "Canary5ecretPw"
	port := closedPort(t)
	dsns := []string{
		"postgres://idgen:" + canary + "@127.0.0.1:" + port + "/idgen?sslmode=disable",
		"postgresql://idgen:" + canary + "@127.0.0.1:" + port + "/idgen?sslmode=disable",
		"mysql://root:" + canary + "@127.0.0.1:" + port + "/test",
		"postgres://idgen@127.0.0.1:" + port + "/idgen?sslmode=disable&password=" + canary,
		// Malformed.
		"postgres://idgen:" + canary + "@127.0.0.1:notaport/idgen",
		"postgres://idgen:" + canary + "@[::1/idgen",
		"postgres://idgen:" + canary + "@127.0.0.1:" + port + "/idgen?sslmode=bogus",
		"postgres://idgen:" + canary + "@127.0.0.1:" + port + "/idgen?%zz",
		"mysql://root:" + canary + "@127.0.0.1:notaport/test",
		"mysql://root:" + canary + "@127.0.0.1:" + port + "/test?readTimeout=banana",
		"mysql://root:" + canary + "@127.0.0.1:" + port + "/te%zzst",
		"mysql:root:" + canary + "@tcp(127.0.0.1:3306)/test",
		"postgres:idgen:" + canary + "@127.0.0.1/idgen",
		"root:" + canary + "@tcp(127.0.0.1:3306)/test",
	}
	commands := [][]string{
		{"serve", "--listen", "127.0.0.1:0"},
		{"migrate", "up"},
		{"migrate", "status"},
		{"leases"},
		{"namespaces", "list"},
		{"namespaces", "create", "orders"},
	}
	for _, dsn := range dsns {
		for _, args := range commands {
			for _, viaEnv := range []bool{false, true} {
				argv, vars := append([]string{}, args...), map[string]string{}
				if viaEnv {
					vars["IDGEN_DSN"] = dsn
				} else {
					argv = append(argv, "--dsn", dsn)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*app.DefaultOpenTimeout)
				r := cliCtx(ctx, t, vars, argv...)
				cancel()
				if r.code == 0 {
					t.Errorf("idgen %q with DSN %s: got exit code 0, want an error", args, dburl.Redact(dsn))
					continue
				}
				for what, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "error": fmt.Sprint(r.err)} {
					if strings.Contains(s, canary) {
						t.Errorf("idgen %q (env %v): the password shows in %s: %q", args, viaEnv, what, s)
					}
				}
				if ls := lines(r.stderr); !strings.HasPrefix(ls[len(ls)-1], "idgen: ") && !strings.HasPrefix(ls[len(ls)-1], "Run 'idgen") {
					t.Errorf("idgen %q: got stderr %q, want it to end with the error", args, r.stderr)
				}
			}
		}
	}
}

// TestSecretsNotLogged runs a node whose DSN carries a password and which has
// an admin token, with debug logging, uses the admin API, and checks that
// neither secret shows in the logs or the answers. The PostgreSQL server of
// the tests is expected to ignore the password (trust authentication, as
// here) unless its DSN has one, which then is the secret checked.
func TestSecretsNotLogged(t *testing.T) {
	const token = "Canary7okenValue"
	dsn := testkit.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, has := u.User.Password()
	if !has {
		password = "Canary5ecretPw"
		dsn = withPassword(t, dsn, password)
	}
	n := startNode(t, "--dsn", dsn, "--admin-token", token, "--log-format", "json", "--log-level", "debug")
	var answers []string
	for _, tt := range []struct {
		path, auth string
		want       int
	}{
		{"/ids?count=2", "", 200},
		{"/readyz", "", 200},
		{"/", "", 200},
		{"/metrics", "", 200},
		{"/admin/leases", "Bearer " + token, 200},
		{"/admin/namespaces", "Bearer " + token, 200},
		{"/admin/leases", "Bearer wrong-" + token, 403},
		{"/admin/leases", "", 401},
	} {
		h := http.Header{}
		if tt.auth != "" {
			h.Set("Authorization", tt.auth)
		}
		code, hdr, body := n.do(http.MethodGet, tt.path, h)
		if code != tt.want {
			t.Errorf("GET %s: got status %d, want %d; body %s", tt.path, code, tt.want, body)
		}
		answers = append(answers, fmt.Sprint(hdr), string(body))
	}
	n.mustStop()
	logs := n.logs.String()
	if !strings.Contains(logs, `"msg":"idgen serving"`) {
		t.Errorf("JSON logs lack the serving line:\n%s", logs)
	}
	for _, secret := range []string{password, token} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret shows in the logs:\n%s", logs)
		}
		for _, a := range answers {
			if strings.Contains(a, secret) {
				t.Errorf("a secret shows in an answer: %s", a)
			}
		}
	}
	// The failure path: a wrong password on the MySQL server.
	mdsn := withPassword(t, testkit.MySQL(t), password+"-wrong")
	r := cli(t, nil, "serve", "--listen", "127.0.0.1:0", "--dsn", mdsn)
	if r.code != 1 || strings.Contains(r.stderr, password) || strings.Contains(fmt.Sprint(r.err), password) {
		t.Errorf("serve with a wrong MySQL password: got exit code %d, stderr %q; want 1 and no password", r.code, r.stderr)
	}
}

// TestNoGoroutineLeft checks that serve stops every goroutine it started
// (keeper, segment loads, HTTP server, and in a build with the tag
// idgen_testclock the test clock watcher) before run returns, on every
// database.
func TestNoGoroutineLeft(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		clockFile := filepath.Join(t.TempDir(), "clock")
		if err := os.WriteFile(clockFile, []byte("0s"), 0o600); err != nil {
			t.Fatal(err)
		}
		n := startNode(t, append([]string{"--dsn", dsn}, testClockFileArgs(clockFile)...)...)
		mustCLI(t, "namespaces", "create", "leak", "--step", "10", "--dsn", dsn)
		for range 3 {
			var got idsResponse
			n.getJSON("/ids?count=5&namespace=leak", http.StatusOK, &got) // past the threshold: background loads
			n.getJSON("/ids?count=5", http.StatusOK, &got)
		}
		n.mustStop()
		// Goroutines wind down as run returns; wait a bounded while for the
		// last ones to be scheduled out.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := idgenGoroutines()
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("goroutines of idgen still running after serve returned:\n%s", strings.Join(left, "\n\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// idgenGoroutines returns the stacks of the goroutines running idgen code,
// other than the calling test's.
func idgenGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/idgen-project/idgen/") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// TestNamespacesCreate checks the defaults and the settings of idgen
// namespaces create as the store recorded them.
func TestNamespacesCreate(t *testing.T) {
	dsn := testkit.SQLite(t)
	mustCLI(t, "migrate", "up", "--dsn", dsn)
	tests := []struct {
		args []string
		want allocator.Namespace
	}{
		{[]string{"a"}, allocator.Namespace{MaxID: 0, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: "buffered", Fallback: "none"}},
		{[]string{"b", "--start", "500", "--step", "10", "--mode", "strict", "--fallback", "snowflake", "--description", "invoice numbers"},
			allocator.Namespace{MaxID: 499, Step: 10, MinStep: 10, MaxStep: 1000, Mode: "strict", Fallback: "snowflake", Description: "invoice numbers"}},
		{[]string{"--min-step", "5000", "c"}, allocator.Namespace{Step: 5000, MinStep: 5000, MaxStep: 500000, Mode: "buffered", Fallback: "none"}},
		{[]string{"d", "--max-step", "10"}, allocator.Namespace{Step: 10, MinStep: 10, MaxStep: 10, Mode: "buffered", Fallback: "none"}},
		{[]string{"e", "--step", "20000000"}, allocator.Namespace{Step: 20000000, MinStep: 20000000, MaxStep: 1 << 30, Mode: "buffered", Fallback: "none"}},
		{[]string{"f", "--step", "100", "--min-step", "10", "--max-step", "200"}, allocator.Namespace{Step: 100, MinStep: 10, MaxStep: 200, Mode: "buffered", Fallback: "none"}},
		{[]string{"--stride", "4", "--offset", "3", "--start", "10", "g"},
			allocator.Namespace{MaxID: 9, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: "buffered", Fallback: "none", Stride: 4, Offset: 3}},
	}
	ctx := context.Background()
	s, err := stores.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	layout := snowflake.DefaultLayout()
	for _, tt := range tests {
		before := int64(layout.SmallestID(time.Now()))
		out := mustCLI(t, append([]string{"namespaces", "create", "--dsn", dsn}, tt.args...)...)
		after := int64(layout.SmallestID(time.Now()))
		var name string
		for _, a := range tt.args {
			if len(a) == 1 {
				name = a
			}
		}
		got, err := s.GetNamespace(ctx, name)
		if err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		want := tt.want
		want.Name, want.Version, want.CreatedAt, want.UpdatedAt = name, got.Version, got.CreatedAt, got.UpdatedAt
		if want.Stride == 0 {
			want.Stride = 1 // the default, left out of the rows above
		}
		if want.Fallback == allocator.FallbackSnowflake {
			// The counter stops below the Snowflake IDs of the moment of
			// creation, by the default layout.
			if got.MaxIDLimit < before-1 || got.MaxIDLimit > after-1 {
				t.Errorf("idgen namespaces create %q: max_id_limit %d, want %d to %d", tt.args, got.MaxIDLimit, before-1, after-1)
			}
			want.MaxIDLimit = got.MaxIDLimit
		}
		if got != want {
			t.Errorf("idgen namespaces create %q: got %+v, want %+v", tt.args, got, want)
		}
		if !strings.HasPrefix(out, "created namespace "+name+": first ID "+strconv.FormatInt(want.IDOf(want.MaxID+1), 10)+",") {
			t.Errorf("idgen namespaces create %q: got %q", tt.args, out)
		}
	}
}

// TestNamespacesCreateFallback checks idgen namespaces create with the
// Snowflake fallback: the namespace's counter must lie below the smallest
// Snowflake ID of now (else a usage error that says so, and nothing
// created), and the limit is computed with the layout the database
// records, which a different --layout may not contradict.
func TestNamespacesCreateFallback(t *testing.T) {
	dsn := testkit.SQLite(t)
	mustCLI(t, "migrate", "up", "--dsn", dsn)
	high := strconv.FormatInt(int64(snowflake.DefaultLayout().SmallestID(time.Now().Add(time.Hour))), 10)

	r := cli(t, nil, "namespaces", "create", "high", "--fallback", "snowflake", "--start", high, "--dsn", dsn)
	if r.code != 2 || !strings.Contains(r.stderr, "invalid --fallback snowflake: want a counter below the smallest Snowflake ID now") {
		t.Errorf("fallback with a counter above the Snowflake IDs: got exit code %d, stderr %q; want 2 and a message", r.code, r.stderr)
	}
	// Without the fallback the same counter is fine.
	mustCLI(t, "namespaces", "create", "high", "--start", high, "--dsn", dsn)

	out := mustCLI(t, "namespaces", "create", "fb", "--fallback", "snowflake", "--dsn", dsn)
	if !strings.Contains(out, ", last ID ") {
		t.Errorf("create with the fallback: got %q, want the last ID the counter can reach", out)
	}
	r = cli(t, nil, "namespaces", "create", "fb2", "--fallback", "snowflake", "--layout", "41/4/6/12", "--dsn", dsn)
	if r.code != 1 || !strings.Contains(r.stderr, "snowflake layout differs") {
		t.Errorf("fallback with another layout than the database's: got exit code %d, stderr %q; want 1 and a layout mismatch", r.code, r.stderr)
	}
	list := mustCLI(t, "namespaces", "list", "--dsn", dsn)
	if strings.Contains(list, "fb2") || !strings.Contains(list, "LIMIT") {
		t.Errorf("namespaces list: got\n%s\nwant a LIMIT column and no fb2", list)
	}
}
