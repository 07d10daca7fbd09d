//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"errors"
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
)

// Lease settings of every node: short, so that each scenario sees several
// lease lifetimes in seconds.
const (
	leaseTTL  = 3 * time.Second
	heartbeat = 1 * time.Second
)

// adminToken is the admin token every node is started with.
const adminToken = "chaos-admin-token"

// moduleRoot returns the repository root: the test runs in test/chaos.
func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// buildIdgen builds cmd/idgen once into dir and returns the binary's path.
// It builds with the tag idgen_testclock, which gives idgen serve the
// --test-clock-offset and --test-clock-file flags the clock scenarios use;
// release builds have no such flags.
func buildIdgen(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "idgen")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "idgen_testclock", "-o", bin, "./cmd/idgen")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags idgen_testclock -o %s ./cmd/idgen: %v\n%s", bin, err, out)
	}
	return bin
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

// childEnv is the environment of every idgen process: no IDGEN_* variable
// of the harness's own environment leaks into a node.
func childEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "TZ=UTC"}
	return append(env, extra...)
}

// runIdgen runs a one-shot idgen command (migrate, namespaces) and returns
// its combined output.
func runIdgen(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
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
	c       *cluster
	idx     int
	holder  string
	addr    string
	dsn     string
	flags   []string // extra flags of every incarnation
	logPath string
	client  *http.Client

	mu      sync.Mutex
	proc    *proc
	starts  int
	expectd bool // the current incarnation is expected to exit (we stopped or killed it)
}

// proc is one running incarnation of a node; done closes when it exited.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
}

// newCluster prepares n nodes (not started), node i on dsns[i], or on the
// last DSN given when i is beyond the list, drawing worker IDs from workers.
func newCluster(t testing.TB, bin, workers string, dsns []string, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin, dir: t.TempDir(), workers: workers}
	for i := 0; i < n; i++ {
		dsn := dsns[min(i, len(dsns)-1)]
		c.nodes = append(c.nodes, &node{
			c: c, idx: i, holder: fmt.Sprintf("node-%d", i), addr: freeAddr(t), dsn: dsn,
			logPath: filepath.Join(c.dir, fmt.Sprintf("node-%d.log", i)),
			client:  newHTTPClient(),
		})
	}
	t.Cleanup(c.killAll)
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
	}
	return append(a, n.flags...)
}

// start starts a new incarnation; it does not wait for it to serve.
func (n *node) start() {
	t := n.c.t
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		select {
		case <-n.proc.done:
		default:
			t.Fatalf("%s: start while running", n.holder)
		}
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("%s: log: %v", n.holder, err)
	}
	n.starts++
	fmt.Fprintf(logf, "### harness: start #%d at %s: idgen %s\n", n.starts, time.Now().UTC().Format(time.RFC3339Nano),
		strings.Join(redactArgs(n.args()), " "))
	cmd := exec.Command(n.c.bin, n.args()...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Kill the node if the harness dies; one process group per node so a
	// stray signal to the harness does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("%s: start: %v", n.holder, err)
	}
	p := &proc{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	n.proc, n.expectd = p, false
	go func() { // owned by p: ends when the process exits, which killAll guarantees
		p.waitErr = cmd.Wait()
		p.state = cmd.ProcessState
		logf.Close()
		close(p.done)
	}()
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

func (n *node) current() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

func (n *node) running() bool {
	p := n.current()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
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
		select {
		case <-p.done:
			t.Fatalf("%s exited before serving (%v):\n%s", n.holder, p.waitErr, n.logTail(40))
		default:
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

// signal sends sig to the current incarnation.
func (n *node) signal(sig syscall.Signal) {
	t := n.c.t
	t.Helper()
	p := n.current()
	if p == nil {
		t.Fatalf("%s: signal %v: not started", n.holder, sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("%s: signal %v: %v", n.holder, sig, err)
	}
}

func (n *node) expectExit() {
	n.mu.Lock()
	n.expectd = true
	n.mu.Unlock()
}

// kill9 kills the current incarnation with SIGKILL and waits for it.
func (n *node) kill9() {
	n.expectExit()
	n.signal(syscall.SIGKILL)
	<-n.current().done
}

// stop sends SIGTERM and waits for a graceful exit; it reports the exit
// code (-1 if the node had to be killed after the grace period).
func (n *node) stop(grace time.Duration) int {
	p := n.current()
	if p == nil {
		return 0
	}
	n.expectExit()
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused node could not act on SIGTERM
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(grace):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return -1
	}
}

// unexpectedExit returns a description if the current incarnation exited
// without the harness stopping it.
func (n *node) unexpectedExit() string {
	n.mu.Lock()
	p, expected := n.proc, n.expectd
	n.mu.Unlock()
	if p == nil || expected {
		return ""
	}
	select {
	case <-p.done:
		return fmt.Sprintf("%s exited on its own (%v):\n%s", n.holder, p.waitErr, n.logTail(30))
	default:
		return ""
	}
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
func (n *node) logTail(lines int) string {
	all := strings.Split(strings.TrimRight(n.log(), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

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

// killAll kills whatever still runs; it is the cluster's cleanup.
func (c *cluster) killAll() {
	for _, n := range c.nodes {
		if p := n.current(); p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
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
