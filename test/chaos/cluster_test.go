//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// Lease settings of every node: short, so that each scenario sees several
// lease lifetimes in seconds.
const (
	leaseTTL  = 3 * time.Second
	heartbeat = 1 * time.Second
)

// adminToken is the admin token every node is started with.
const adminToken = "chaos-admin-token"

// buildIdgen builds cmd/idgen once into dir and returns the binary's path.
// It builds with the tag idgen_testclock, which gives idgen serve the
// --test-clock-offset and --test-clock-file flags the clock scenarios use;
// release builds have no such flags.
func buildIdgen(t testing.TB, dir string) string {
	t.Helper()
	return testkit.MustBuild(t, dir, "./cmd/idgen", "-tags", "idgen_testclock")
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runIdgen runs a one-shot idgen command (migrate, namespaces) and returns
// its combined output.
func runIdgen(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testkit.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cluster is a set of `idgen serve` processes sharing one database.
type cluster struct {
	t       testing.TB
	bin     string
	dir     string
	workers string // --worker-ids, "A-B"
	nodes   []*node
}

// node is one `idgen serve` of a cluster, restartable. Every incarnation
// writes stdout and stderr to the same log file.
type node struct {
	restartable
	c      *cluster
	idx    int
	holder string
	addr   string
	dsn    string
	flags  []string // extra flags of every incarnation
	client *http.Client
}

// restartable is a process of the harness that runs again and again under
// one name, a node or a generator. Every incarnation appends to one log;
// the harness notes when it stops or kills the current one, so that an
// exit it did not cause is reported as a problem of the scenario.
type restartable struct {
	t       testing.TB
	name    string // in failures: a node's holder, a generator's name
	logPath string

	mu      sync.Mutex
	proc    *testkit.Proc // the current incarnation
	starts  int
	expectd bool // the current incarnation is expected to exit (we stopped or killed it)
}

// launch starts a new incarnation of bin; it does not wait for it to
// serve. marked writes a line into the log first, naming the incarnation
// and its command line (the DSN's password hidden).
func (r *restartable) launch(bin string, args, env []string, marked bool) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil && !r.proc.Exited() {
		r.t.Fatalf("%s: start while running", r.name)
	}
	r.starts++
	var mark string
	if marked {
		mark = fmt.Sprintf("### harness: start #%d at %s: %s %s", r.starts, time.Now().UTC().Format(time.RFC3339Nano),
			filepath.Base(bin), strings.Join(redactArgs(args), " "))
	}
	r.proc = testkit.Start(r.t, testkit.Spec{Name: r.name, Bin: bin, Args: args, Env: env, Log: r.logPath, Mark: mark})
	r.expectd = false
}

func (r *restartable) current() *testkit.Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *restartable) running() bool {
	p := r.current()
	return p != nil && !p.Exited()
}

// signal sends sig to the current incarnation.
func (r *restartable) signal(sig syscall.Signal) {
	r.t.Helper()
	p := r.current()
	if p == nil {
		r.t.Fatalf("%s: signal %v: not started", r.name, sig)
	}
	p.Signal(r.t, sig)
}

func (r *restartable) expectExit() {
	r.mu.Lock()
	r.expectd = true
	r.mu.Unlock()
}

// kill9 kills the current incarnation with SIGKILL and waits for it.
func (r *restartable) kill9() {
	r.t.Helper()
	r.expectExit()
	r.signal(syscall.SIGKILL)
	<-r.current().Done()
}

// stop sends SIGTERM and waits for a graceful exit; it reports the exit
// code (-1 if the process had to be killed after the grace period).
func (r *restartable) stop(grace time.Duration) int {
	p := r.current()
	if p == nil {
		return 0
	}
	r.expectExit()
	return p.Stop(grace)
}

// exitedOnItsOwn returns the current incarnation if it exited without the
// harness stopping it.
func (r *restartable) exitedOnItsOwn() (*testkit.Proc, bool) {
	r.mu.Lock()
	p, expected := r.proc, r.expectd
	r.mu.Unlock()
	if p == nil || expected || !p.Exited() {
		return nil, false
	}
	return p, true
}

// newCluster prepares n nodes (not started), node i on dsns[i], or on the
// last DSN given when i is beyond the list, drawing worker IDs from workers.
func newCluster(t testing.TB, bin, workers string, dsns []string, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: t.TempDir(), workers: workers}
	for i := 0; i < n; i++ {
		dsn := dsns[min(i, len(dsns)-1)]
		holder := fmt.Sprintf("node-%d", i)
		c.nodes = append(c.nodes, &node{
			restartable: restartable{t: t, name: holder, logPath: filepath.Join(c.dir, holder+".log")},
			c:           c, idx: i, holder: holder, addr: freeAddr(t), dsn: dsn,
			client: newHTTPClient(),
		})
	}
	t.Cleanup(c.closeClients)
	return c
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConns: 16, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second,
			DisableCompression: true, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		},
	}
}

// args are the command line of one incarnation.
func (n *node) args() []string {
	a := []string{"serve",
		"--listen", n.addr, "--dsn", n.dsn, "--holder", n.holder,
		"--lease-ttl", leaseTTL.String(), "--heartbeat", heartbeat.String(),
		"--worker-ids", n.c.workers, "--admin-token", adminToken, "--log-level", "info",
		"--drain-window", "0", // the scenarios time their faults from the SIGTERM
	}
	return append(a, n.flags...)
}

// start starts a new incarnation; it does not wait for it to serve.
func (n *node) start() {
	n.t.Helper()
	n.launch(n.c.bin, n.args(), testkit.Env(), true)
}

// redactArgs hides the DSN's password in what the harness writes.
func redactArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "--dsn" {
			out[i] = "<dsn>"
		}
	}
	return out
}

func (n *node) url(path string) string { return "http://" + n.addr + path }

// get does one GET with a short timeout and returns status and body.
func (n *node) get(ctx context.Context, path string, header http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url(path), nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// waitUp waits until the node answers /healthz, failing if it exits first.
func (n *node) waitUp(timeout time.Duration) {
	t := n.c.t
	t.Helper()
	p := n.current()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Exited() {
			t.Fatalf("%s exited before serving (%v):\n%s", n.holder, p.Err(), n.logTail(40))
		}
		if code, _, err := n.get(context.Background(), "/healthz", nil); err == nil && code == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: /healthz did not answer 200 within %s:\n%s", n.holder, timeout, n.logTail(40))
}

// waitReady waits until /readyz answers 200 and reports whether it did.
func (n *node) waitReady(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if code, _, err := n.get(context.Background(), "/readyz", nil); err == nil && code == 200 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// unexpectedExit returns a description if the current incarnation exited
// without the harness stopping it.
func (n *node) unexpectedExit() string {
	if p, ok := n.exitedOnItsOwn(); ok {
		return fmt.Sprintf("%s exited on its own (%v):\n%s", n.holder, p.Err(), n.logTail(30))
	}
	return ""
}

// log returns everything the node's incarnations wrote.
func (n *node) log() string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// logTail returns the last lines of the node's log.
func (n *node) logTail(lines int) string { return testkit.Tail(n.logPath, lines) }

// startAll starts every node and waits until each answers /healthz.
func (c *cluster) startAll() {
	c.t.Helper()
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		n.waitUp(30 * time.Second)
	}
}

// stopAll stops every running node gracefully and returns a problem for
// each one that did not exit with status 0.
func (c *cluster) stopAll() []string {
	var problems []string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := n.stop(15 * time.Second); code != 0 {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: exit status %d after SIGTERM (want 0):\n%s", n.holder, code, n.logTail(15)))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return problems
}

// closeClients closes the nodes' idle connections; it is the cluster's
// cleanup, which runs after testkit's have killed whatever still ran.
func (c *cluster) closeClients() {
	for _, n := range c.nodes {
		n.client.CloseIdleConnections()
	}
}

// metric scrapes /metrics of a node and returns the sum over all series of
// the metric name.
func (n *node) metric(name string) (float64, bool) {
	code, body, err := n.get(context.Background(), "/metrics", nil)
	if err != nil || code != 200 {
		return 0, false
	}
	var sum float64
	var found bool
	for _, line := range bytes.Split(body, []byte("\n")) {
		s := string(line)
		if !strings.HasPrefix(s, name) {
			continue
		}
		rest := s[len(name):]
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // another metric whose name starts with name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}
