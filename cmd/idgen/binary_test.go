package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// proc is the idgen binary running as a process of its own.
type proc struct {
	t        *testing.T
	cmd      *exec.Cmd
	addr     string
	addrFile string // its --addr-file
	logs     *testserver.LogBuffer
	waited   chan struct{} // closed when cmd.Wait returned
	err      error         // cmd.Wait's result, set before waited is closed
}

// buildBinary builds idgen into a temporary directory, with the build tags
// given.
func buildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	return testkit.MustBuild(t, t.TempDir(), "./cmd/idgen", "-tags", strings.Join(tags, ","))
}

// runBinary runs the binary to completion and returns its exit code and output.
func runBinary(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s %q: %v", bin, args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// runBinaryBounded is runBinary with the process killed after bound, a
// bound on a hang.
func runBinaryBounded(t *testing.T, bound time.Duration, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s %q: %v", bin, args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// startBinary starts `idgen serve --listen 127.0.0.1:0 args…` in dir and
// waits until it has written the address it serves on to its --addr-file.
// The process is killed, if still running, when the test ends.
func startBinary(t *testing.T, bin, dir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, logs: &testserver.LogBuffer{}, waited: make(chan struct{}), addrFile: filepath.Join(t.TempDir(), "addr")}
	p.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", p.addrFile, "--drain-window", "0"}, args...)...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start idgen: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.waited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
	})
	p.addr = waitAddrFile(t, p.addrFile, p.waited, p.logs)
	return p
}

// terminate sends SIGTERM and waits for the process to exit; it returns the
// exit code.
func (p *proc) terminate() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.waited:
	case <-time.After(stopTimeout):
		p.t.Fatalf("idgen did not exit within %s of SIGTERM\n%s", stopTimeout, p.logs)
	}
	return p.cmd.ProcessState.ExitCode()
}

// node returns a node handle for HTTP calls to the process (it is never
// stopped through it).
func (p *proc) node() *node {
	n := &node{t: p.t, addr: p.addr, client: &http.Client{Timeout: 30 * time.Second}}
	n.stopOnce.Do(func() {}) // stopping is the process's business
	return n
}

// TestBinary builds idgen and runs it as a process on every database: on
// SQLite with no --dsn at all (the embedded default, idgen.db in the working
// directory), on PostgreSQL and MySQL with IDGEN_DSN. It sends SIGTERM while
// clients are drawing IDs and checks that every answer the clients got was a
// success (requests in flight are finished before the allocators close), that
// the process exits 0 after returning its segment tail and releasing its
// lease, and that a restart continues right after the last namespace ID.
func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			dsn := "sqlite:" + filepath.Join(dir, "idgen.db") // where the default puts it
			if dialect != "sqlite" {
				dsn = testserver.StoreDSN(t, dialect)
				env = append(env, "IDGEN_DSN="+dsn)
			}
			p := startBinary(t, bin, dir, env, "--holder", "binary-test")
			n := p.node()
			n.waitReady()
			if code, _, stderr := runBinary(t, bin, dir, env, "namespaces", "create", "orders", "--step", "40"); code != 0 {
				t.Fatalf("namespaces create: exit code %d, %s", code, stderr)
			}
			var ready readyResponse
			n.getJSON("/readyz", http.StatusOK, &ready)

			// Clients draw until the server goes away; SIGTERM arrives while
			// they are drawing.
			var (
				mu       sync.Mutex
				statuses = map[int]int{}
				nsIDs    = map[int64]int{}
				sfIDs    = map[int64]int{}
				wg       sync.WaitGroup
			)
			const maxRequests = 5000 // per client, a bound on the loop
			for c := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Timeout: 30 * time.Second}
					defer client.CloseIdleConnections()
					path := "/ids?count=10"
					if c%2 == 0 {
						path = "/ids?count=3&namespace=orders"
					}
					for range maxRequests {
						resp, err := client.Get(n.url(path))
						if err != nil {
							return // the server has gone
						}
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						var got idsResponse
						mu.Lock()
						statuses[resp.StatusCode]++
						if err == nil && json.Unmarshal(body, &got) == nil {
							for _, s := range got.IDs {
								id, _ := strconv.ParseInt(s, 10, 64)
								if got.Namespace != "" {
									nsIDs[id]++
								} else {
									sfIDs[id]++
								}
							}
						}
						mu.Unlock()
					}
				}()
			}
			// SIGTERM once both kinds of request have been answered a few times.
			deadline := time.Now().Add(startTimeout)
			for {
				mu.Lock()
				enough := len(nsIDs) >= 30 && len(sfIDs) >= 100
				seen := fmt.Sprint(statuses)
				mu.Unlock()
				if enough {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("clients got too few answers: %s\n%s", seen, p.logs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			code := p.terminate()
			wg.Wait()
			logs := p.logs.String()
			if code != 0 {
				t.Fatalf("got exit code %d after SIGTERM, want 0\n%s", code, logs)
			}

			for status, count := range statuses {
				if status != http.StatusOK {
					t.Errorf("clients got %d answers with status %d, want only 200", count, status)
				}
			}
			var lastNS int64
			for id, c := range nsIDs {
				lastNS = max(lastNS, id)
				if c > 1 {
					t.Errorf("namespace ID %d handed out %d times", id, c)
				}
			}
			for id, c := range sfIDs {
				if c > 1 {
					t.Errorf("Snowflake ID %d handed out %d times", id, c)
				}
			}
			if len(nsIDs) == 0 || len(sfIDs) == 0 {
				t.Fatalf("got %d namespace and %d Snowflake IDs, want some of each", len(nsIDs), len(sfIDs))
			}

			// The shutdown steps ran in order.
			order := []string{`msg="shutting down`, `msg="http server stopped"`,
				`msg="segment allocator stopped"`, `msg="lease keeper stopped"`, `msg="idgen stopped"`}
			at := -1
			for _, step := range order {
				i := strings.Index(logs, step)
				if i <= at {
					t.Errorf("log line %s missing or out of order\n%s", step, logs)
					break
				}
				at = i
			}
			if _, err := os.Stat(p.addrFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--addr-file after a graceful exit: got %v, want it removed", err)
			}
			checkReleased(t, dsn, ready.Lease.Datacenter, ready.Lease.Worker)
			code, out, stderr := runBinary(t, bin, dir, env, "leases")
			if code != 0 || !strings.Contains(out, "RELEASED") {
				t.Errorf("idgen leases: got exit code %d, %q %q", code, out, stderr)
			}

			// A restart continues after the last namespace ID, unless a
			// range fetch was cut short by the shutdown: its outcome is
			// unknown and its range is skipped (never reused).
			p2 := startBinary(t, bin, dir, env)
			n2 := p2.node()
			n2.waitReady()
			var seg idsResponse
			n2.getJSON("/ids?count=1&namespace=orders", http.StatusOK, &seg)
			first := ints(t, seg.IDs)[0]
			if first <= lastNS {
				t.Errorf("after restart: got namespace ID %d, want above the last one handed out, %d", first, lastNS)
			}
			if first != lastNS+1 {
				t.Logf("after restart: namespace continues at %d, %d IDs after the last one handed out (a fetch in flight at shutdown was skipped)", first, first-lastNS-1)
			}
			if code := p2.terminate(); code != 0 {
				t.Errorf("second run: got exit code %d after SIGTERM, want 0\n%s", code, p2.logs)
			}
			if dialect == "sqlite" {
				if _, err := os.Stat(filepath.Join(dir, "idgen.db")); err != nil {
					t.Errorf("the default DSN did not create idgen.db in the working directory: %v", err)
				}
			}
			t.Logf("%d namespace and %d Snowflake IDs drawn, statuses %v", len(nsIDs), len(sfIDs), statuses)
		})
	}
}

// TestBinaryTestClock builds idgen with the tag idgen_testclock, as the
// fault harness does, and checks that --test-clock-offset moves the time
// in its IDs; the default build refuses the flag (TestNoTestClockFlags).
func TestBinaryTestClock(t *testing.T) {
	bin := buildBinary(t, "idgen_testclock")
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	const offset = 3 * time.Second // within the 5 s the node may be off database time
	p := startBinary(t, bin, dir, env, "--test-clock-offset", offset.String())
	n := p.node()
	n.waitReady()
	before := time.Now()
	var got idsResponse
	n.getJSON("/ids?count=1&explain=true", http.StatusOK, &got)
	after := time.Now()
	if len(got.Explain) != 1 {
		t.Fatalf("/ids?count=1&explain=true: got %+v", got)
	}
	at := time.UnixMilli(got.Explain[0].TimestampMS)
	if lo, hi := before.Add(offset-time.Second), after.Add(offset+time.Second); at.Before(lo) || at.After(hi) {
		t.Errorf("ID time %s: want the clock %s ahead, between %s and %s", at, offset, lo, hi)
	}
	if !strings.Contains(p.logs.String(), "test clock in use") {
		t.Errorf("the node did not warn that its clock is shifted:\n%s", p.logs)
	}
	if code := p.terminate(); code != 0 {
		t.Errorf("got exit code %d after SIGTERM, want 0\n%s", code, p.logs)
	}
}

// TestBinaryDSNNotEncoded runs every command of the built binary that takes
// a DSN with one whose password holds an '@' (or a '/' or '#') not
// percent-encoded, given as a flag and in the environment: each exits 2 with
// one line saying to write '@' as %40, before touching any database, and
// no part of the password shows. The drivers and idgen's masker would split
// such a DSN at different '@' signs (pgx looked up the host
// "SECRETTAIL@127.0.0.1" and said so).
func TestBinaryDSNNotEncoded(t *testing.T) {
	const tail = "SECRETTAIL"
	bin := buildBinary(t)
	dir := t.TempDir()
	port := closedPort(t)
	good := "mysql://root@127.0.0.1:" + port + "/leaf"
	bad := []string{
		"postgres://alice:abc@" + tail + "@127.0.0.1:" + port + "/x",
		"mysql://alice:abc@" + tail + "@127.0.0.1:" + port + "/x",
		"etcd://alice:abc@" + tail + "@127.0.0.1:" + port + "/x",
		"etcd://alice:abc/" + tail + "@127.0.0.1:" + port + "/x",
		"postgres://alice:abc#" + tail + "@127.0.0.1:" + port + "/x",
	}
	commands := [][]string{
		{"serve", "--listen", "127.0.0.1:0"},
		{"migrate", "up"},
		{"migrate", "status"},
		{"leases"},
		{"leases", "events"},
		{"leases", "evict", "0", "1"},
		{"namespaces", "list"},
		{"namespaces", "create", "orders"},
		{"namespaces", "delete", "orders"},
		{"namespaces", "import", "leaf", "--from", good},
		{"sequences", "list"},
	}
	for _, dsn := range bad {
		var runs [][]string
		if !strings.HasPrefix(dsn, "etcd") { // --from is postgres:// or mysql://
			runs = append(runs, []string{"namespaces", "import", "leaf", "--dsn", "sqlite:" + filepath.Join(dir, "idgen.db"), "--from", dsn})
		}
		for _, args := range commands {
			runs = append(runs, append(slices.Clone(args), "--dsn", dsn), append(slices.Clone(args), "IDGEN_DSN="+dsn))
		}
		for _, args := range runs {
			env := testkit.Env()
			if last := args[len(args)-1]; strings.HasPrefix(last, "IDGEN_DSN=") {
				args, env = args[:len(args)-1], append(env, last)
			}
			code, stdout, stderr := runBinaryBounded(t, 2*app.DefaultOpenTimeout, bin, dir, env, args...)
			ls := lines(stderr)
			if code != 2 || len(ls) != 2 || !strings.Contains(ls[0], "as %40") {
				t.Errorf("idgen %q (%s): got exit code %d, stderr %q; want 2 and one line saying to write @ as %%40",
					args, env[len(env)-1], code, stderr)
			}
			if strings.Contains(stdout+stderr, tail) {
				t.Errorf("idgen %q: the password shows: stdout %q, stderr %q", args, stdout, stderr)
			}
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("a refused DSN touched a database: %s holds %v (%v)", dir, entries, err)
	}
}

// TestBinaryPortTaken runs the built binary's serve on an address another
// socket holds: it exits 1 with one line naming the address, and leaves the
// database as it found it: a SQLite file is not even created (no
// migration), and a migrated PostgreSQL database gets no lease and no lease
// event (before, the node migrated, claimed a lease and released it, and
// only then failed to listen).
func TestBinaryPortTaken(t *testing.T) {
	bin := buildBinary(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	dir := t.TempDir()
	sqliteFile := filepath.Join(dir, "idgen.db")
	pg := testserver.StoreDSN(t, "postgres")
	if code, _, stderr := runBinaryBounded(t, 2*app.DefaultOpenTimeout, bin, dir, testkit.Env(), "migrate", "up", "--dsn", pg); code != 0 {
		t.Fatalf("migrate up: exit code %d, %s", code, stderr)
	}
	for _, dsn := range []string{"sqlite:" + sqliteFile, pg} {
		code, stdout, stderr := runBinaryBounded(t, 2*app.DefaultOpenTimeout, bin, dir, testkit.Env("IDGEN_DSN="+dsn), "serve", "--listen", addr)
		ls := lines(stderr)
		last := ls[len(ls)-1]
		if code != 1 || !strings.HasPrefix(last, "idgen: ") || !strings.Contains(last, addr) || !strings.Contains(last, "address already in use") {
			t.Errorf("serve on the taken %s (%s): got exit code %d, last line %q; want 1 and the listen error", addr, dsn[:6], code, last)
		}
		if stdout != "" || strings.Contains(stderr, "database migrated") || strings.Contains(stderr, "msg=\"lease") {
			t.Errorf("serve on a taken address did more than fail: stdout %q, stderr:\n%s", stdout, stderr)
		}
	}
	if _, err := os.Stat(sqliteFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve on a taken address created the SQLite database: stat: %v", err)
	}
	store := testserver.OpenStoreDSN(t, pg)
	leases, err := store.ListLeases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	events, err := store.ListLeaseEvents(t.Context(), allocator.LeaseEventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 0 || len(events) != 0 {
		t.Errorf("serve on a taken address wrote to PostgreSQL: leases %+v, events %+v; want none", leases, events)
	}
}

// TestBinaryStoreInternalsNotShown runs the built binary on an etcd
// cluster of its own with an admin token, kills the cluster, and checks
// that /readyz and the status page tell a request without a token
// "database unreachable" and not the store's address or key prefix, nor
// the node's holder; a request with the admin token sees the store's
// error; the log has it once, however many probes found it.
func TestBinaryStoreInternalsNotShown(t *testing.T) {
	const token = "Admin7okenOfTheBinaryTest"
	cluster := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1})
	const prefix = "internals-prefix-of-the-test"
	dsn := cluster.DSN(prefix)
	endpoint := cluster.Endpoints()[0]
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startBinary(t, bin, dir, testkit.Env("IDGEN_DSN="+dsn, "IDGEN_ADMIN_TOKEN="+token), "--holder", "internals-node")
	n := p.node()
	n.waitReady()
	cluster.Kill(0)

	type readiness struct {
		Database struct {
			Reachable bool   `json:"reachable"`
			Error     string `json:"error"`
		} `json:"database"`
	}
	deadline := time.Now().Add(startTimeout) // a bound on a hang: etcd's client notices the loss within seconds
	var body []byte
	for probes := 0; ; probes++ {
		var code int
		code, _, body = n.get("/readyz")
		var r readiness
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %d %s: %v", code, body, err)
		}
		if !r.Database.Reachable && probes >= 3 {
			if r.Database.Error != "database unreachable" && r.Database.Error != "the database did not answer in time" {
				t.Errorf("/readyz without a token, etcd down: got database.error %q, want it in words", r.Database.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still finds etcd reachable %s after it was killed: %s", startTimeout, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	_, _, page := n.get("/")
	for what, b := range map[string][]byte{"/readyz": body, "/": page} {
		for _, leak := range []string{endpoint, prefix, "internals-node", "etcd://"} {
			if strings.Contains(string(b), leak) {
				t.Errorf("%s without a token shows %q:\n%s", what, leak, b)
			}
		}
	}
	_, _, admin := n.do(http.MethodGet, "/readyz", http.Header{"Authorization": {"Bearer " + token}})
	if !strings.Contains(string(admin), prefix) || !strings.Contains(string(admin), "internals-node") {
		t.Errorf("/readyz with the admin token: got %s, want the store's error and the holder", admin)
	}
	if got := strings.Count(p.logs.String(), `msg="database ping failed"`); got != 1 {
		t.Errorf("log: got %d lines saying the ping failed, want 1:\n%s", got, p.logs)
	}
}
