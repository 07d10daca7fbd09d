// etcd: a key prefix of a test's own on a real three-member etcd cluster.
//
// EtcdDSN returns an idgen etcd DSN naming the three members and a fresh
// random key prefix, whose keys are deleted when the test ends:
//
//	etcd://127.0.0.1:<port>,127.0.0.1:<port>,127.0.0.1:<port>/idgen-test/<test>_<16 hex digits>
//
// The cluster is started once per test process, the first time a test asks
// for it: three etcd processes, each with its own loopback ports and data
// directory. A package that uses it stops them by calling EtcdMain from its
// TestMain; should the test process die first, the kernel kills them with it
// (they are started with a parent-death signal).
//
// Where etcd comes from, in order:
//
//   - IDGEN_TEST_ETCD_DSN names a running cluster (etcd://host:port,…); no
//     process is started and each test gets a prefix on it.
//   - IDGEN_TEST_ETCD_BIN names an etcd binary to start.
//   - Otherwise the etcd server pinned in ./etcdserver/go.mod (etcd v3.6, the
//     release line of idgen's client) is built with the go command from the
//     module proxy, once, into the user's cache directory.
//
// When none of these works the test is skipped with a message saying how to
// run it, or fails when IDGEN_TEST_REQUIRE_DB=1 (as in CI).

package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The environment variables the etcd fixture reads.
const (
	// EnvEtcdDSN names a running etcd cluster: etcd://host:port,host:port/.
	EnvEtcdDSN = "IDGEN_TEST_ETCD_DSN"
	// EnvEtcdBinary names an etcd binary to start the test cluster with.
	EnvEtcdBinary = "IDGEN_TEST_ETCD_BIN"
)

// EtcdMembers is the size of the test cluster.
const EtcdMembers = 3

// Time limits: building etcd may download its modules; a member starts in
// about a second.
const (
	etcdBuildTimeout = 10 * time.Minute
	startTimeout     = 60 * time.Second
)

// The cluster is the one piece of process-wide state of the etcd fixture: it is
// started at most once per test process, the first time a test needs it,
// and every later test reuses it. sync.OnceValues keeps the outcome, success
// or error, so a process without etcd tries only once. Main stops it.
var cluster = sync.OnceValues(startCluster)

// started is the cluster startCluster launched, for Main to stop; nil when
// none was (not needed yet, or named by EnvDSN).
var started atomic.Pointer[EtcdCluster]

// EtcdMain runs the tests of m and then stops the test cluster, if one was
// started, and returns the exit code for os.Exit. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testkit.EtcdMain(m)) }
func EtcdMain(m *testing.M) int {
	code := m.Run()
	// Calling cluster() here would start one; only stop what ran.
	if c := started.Swap(nil); c != nil {
		c.Stop()
	}
	return code
}

// EtcdDSN returns the EtcdDSN of a fresh, empty key prefix on the test cluster,
// whose keys are deleted when tb ends.
func EtcdDSN(tb testing.TB) string {
	tb.Helper()
	c, err := cluster()
	if err != nil {
		etcdUnavailable(tb, err)
	}
	prefix := "/idgen-test/" + UniqueName(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := c.deletePrefix(ctx, prefix+"/"); err != nil {
			tb.Errorf("etcdtest: delete prefix %s: %v", prefix, err)
		}
	})
	return c.dsn + prefix
}

// EtcdEndpoints returns the client addresses (host:port) of the test cluster's
// members, starting it if needed.
func EtcdEndpoints(tb testing.TB) []string {
	tb.Helper()
	c, err := cluster()
	if err != nil {
		etcdUnavailable(tb, err)
	}
	return append([]string(nil), c.endpoints...)
}

// etcdUnavailable skips tb, or fails it when EnvRequire is 1 (Server),
// saying how to give the tests an etcd.
func etcdUnavailable(tb testing.TB, cause error) {
	tb.Helper()
	MissingServer(tb, fmt.Sprintf("etcdtest: no etcd cluster for this test: set %s to an etcd binary "+
		"(Debian: apt-get install etcd-server, then %s=/usr/bin/etcd), set %s to a running cluster "+
		"(etcd://host:2379,host:2379), or let the test build the pinned server (needs the go command "+
		"and the module proxy): %v", EnvEtcdBinary, EnvEtcdBinary, EnvEtcdDSN, cause),
		func() { ReportSkip(tb, "etcd", "no etcd cluster: "+cause.Error()) })
}

// EtcdCluster is a running etcd cluster the tests use: the one DSN and
// Endpoints give, or one of a test's own from Start.
type EtcdCluster struct {
	dsn       string   // etcd://host:port,…  without a prefix
	endpoints []string // host:port of each member's client URL
	cli       *clientv3.Client
	members   []*member // nil for a cluster named by EnvDSN
	dir       string    // parent of the members' data directories
}

// member is one etcd process of a cluster the package started, which may
// be killed and started again on the same ports and data directory.
type member struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu    sync.Mutex // guards cmd and doneC
	cmd   *exec.Cmd
	doneC chan struct{} // closed when the process has exited
}

// startCluster returns the cluster named by EnvDSN, or starts one.
func startCluster() (*EtcdCluster, error) {
	if dsn := os.Getenv(EnvEtcdDSN); dsn != "" {
		eps, err := endpointsOf(dsn)
		if err != nil {
			return nil, err
		}
		c := &EtcdCluster{dsn: "etcd://" + strings.Join(eps, ","), endpoints: eps}
		if err := c.connect(); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvEtcdDSN, err)
		}
		return c, nil
	}
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	c, err := launch(bin, EtcdOptions{})
	if err != nil {
		return nil, err
	}
	started.Store(c)
	return c, nil
}

// endpointsOf returns the host:port list of an etcd:// DSN.
func endpointsOf(dsn string) ([]string, error) {
	rest, ok := strings.CutPrefix(dsn, "etcd://")
	if !ok {
		return nil, fmt.Errorf("%s is not an etcd:// DSN", EnvEtcdDSN)
	}
	hosts, _, _ := strings.Cut(rest, "/")
	if hosts == "" || strings.Contains(hosts, "@") || strings.Contains(hosts, "?") {
		return nil, fmt.Errorf("%s: want etcd://host:port,host:port/ without user or parameters", EnvEtcdDSN)
	}
	return strings.Split(hosts, ","), nil
}

// binary returns the etcd binary to start: EnvBinary, or the pinned server
// built into the cache directory.
func binary() (string, error) {
	if bin := os.Getenv(EnvEtcdBinary); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", EnvEtcdBinary, err)
		}
		return bin, nil
	}
	return BuildEtcd(context.Background())
}

// BuildEtcd builds the etcd server pinned in etcdserver/go.mod into
// the user's cache directory, unless a build of the same sources is there
// already, and returns the binary's path. It needs the go command and the
// module proxy (or a module cache holding etcd's modules).
func BuildEtcd(ctx context.Context) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the etcd fixture's sources")
	}
	src := filepath.Join(filepath.Dir(self), "etcdserver")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("etcd server sources: %w", err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "idgen", "etcd-"+hex.EncodeToString(h.Sum(nil))[:16], "etcd")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build etcd: no go command in PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, etcdBuildTimeout)
	defer cancel()
	// Build next to the target and rename, so that concurrent test
	// processes never start a half-written binary.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("build etcd from %s: %w\n%s", src, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. Another process
// may take one before etcd binds it; launch then fails and says so.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// EtcdOptions are the settings of a cluster of a test's own (Start).
type EtcdOptions struct {
	// Members is the number of members; default Members.
	Members int
	// Flags are added to every member's command line, e.g.
	// "--unsafe-no-fsync".
	Flags []string
}

// StartEtcd starts an etcd cluster of tb's own, for tests that stop, kill or
// pause members, and stops it when tb ends. It skips or fails tb like DSN
// when no etcd binary can be had (a cluster named by EnvDSN is no use here:
// the test needs the processes).
func StartEtcd(tb testing.TB, opts EtcdOptions) *EtcdCluster {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		etcdUnavailable(tb, err)
	}
	c, err := launch(bin, opts)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// launch starts a cluster of etcd processes on loopback ports and waits
// until it answers a linearizable read.
func launch(bin string, opts EtcdOptions) (*EtcdCluster, error) {
	n := opts.Members
	if n == 0 {
		n = EtcdMembers
	}
	dir, err := os.MkdirTemp("", "idgen-etcdtest-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &EtcdCluster{dir: dir}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
		c.endpoints = append(c.endpoints, fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
	}
	token := "idgen-etcdtest-" + filepath.Base(dir)
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		client := "http://" + c.endpoints[i]
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m := &member{
			name: name, bin: bin, logPath: filepath.Join(dir, name+".log"),
			args: append([]string{
				"--name", name,
				"--data-dir", filepath.Join(dir, name),
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new",
				"--initial-cluster-token", token,
				"--log-level", "warn",
			}, opts.Flags...),
		}
		c.members = append(c.members, m)
		if err := m.start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	c.dsn = "etcd://" + strings.Join(c.endpoints, ",")
	if err := c.connect(); err != nil {
		logs := c.tailLogs()
		c.Stop()
		return nil, fmt.Errorf("etcd cluster did not come up: %w\n%s", err, logs)
	}
	return c, nil
}

// start starts the member's process, appending to its log. A member
// started again keeps its data directory: it rejoins the cluster.
func (m *member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.doneC != nil {
		select {
		case <-m.doneC:
		default:
			return fmt.Errorf("etcd member %s runs already", m.name)
		}
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the test process die without stopping the member, the kernel
	// kills the member with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start etcd member %s (%s): %w", m.name, m.bin, err)
	}
	doneC := make(chan struct{})
	go func() { // owned by the member: ends when the process exits, which kill guarantees
		_ = cmd.Wait()
		_ = logf.Close()
		close(doneC)
	}()
	m.cmd, m.doneC = cmd, doneC
	return nil
}

// current returns the member's process and its done channel; nil before
// the first start.
func (m *member) current() (*exec.Cmd, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd, m.doneC
}

// kill kills the member's process (resuming it first, should it be
// stopped) and waits until it has exited.
func (m *member) kill() {
	cmd, doneC := m.current()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-doneC
}

// Endpoints returns the client addresses (host:port) of the members.
func (c *EtcdCluster) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// DSN returns an etcd:// DSN naming every member and prefix.
func (c *EtcdCluster) DSN(prefix string) string {
	return c.dsn + "/" + strings.TrimPrefix(prefix, "/")
}

// Client returns a client of every member, owned by the cluster.
func (c *EtcdCluster) Client() *clientv3.Client { return c.cli }

// Kill kills member i with SIGKILL and waits until it has exited.
func (c *EtcdCluster) Kill(i int) { c.members[i].kill() }

// Restart starts member i again after Kill, on its ports and data
// directory; it does not wait for the member to rejoin.
func (c *EtcdCluster) Restart(i int) error { return c.members[i].start() }

// Signal sends sig to member i (SIGSTOP and SIGCONT pause and resume it).
func (c *EtcdCluster) Signal(i int, sig syscall.Signal) error {
	cmd, _ := c.members[i].current()
	if cmd == nil {
		return fmt.Errorf("etcd member %s never started", c.members[i].name)
	}
	return cmd.Process.Signal(sig)
}

// Leader returns the index of the member that leads, asking each member
// (for at most a second each) until one names a leader.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	status := func(ep string) (*clientv3.StatusResponse, error) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.cli.Status(sctx, ep)
	}
	ids := make([]uint64, len(c.endpoints))
	var (
		leader uint64
		errs   []error
	)
	for i, ep := range c.endpoints {
		st, err := status(ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		ids[i] = st.Header.MemberId
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	for i, id := range ids {
		if id != 0 && id == leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no member that answers leads: %w", errors.Join(errs...))
}

// WaitReady waits until the cluster answers a linearizable read, or ctx
// ends.
func (c *EtcdCluster) WaitReady(ctx context.Context) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.cli.Get(rctx, "/idgen-test/ping")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not ready: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// connect opens the cluster's client and waits for a linearizable read to
// succeed, which needs an elected leader.
func (c *EtcdCluster) connect() error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = cli.Get(ctx, "/idgen-test/ping")
		cancel()
		if err == nil {
			c.cli = cli
			return nil
		}
		if time.Now().After(deadline) || c.exited() != "" {
			_ = cli.Close()
			if name := c.exited(); name != "" {
				return fmt.Errorf("member %s exited: %w", name, err)
			}
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited returns the name of a member process that has exited, or "".
func (c *EtcdCluster) exited() string {
	for _, m := range c.members {
		_, doneC := m.current()
		select {
		case <-doneC:
			return m.name
		default:
		}
	}
	return ""
}

// tailLogs returns the end of each member's log, for an error message.
func (c *EtcdCluster) tailLogs() string {
	var b strings.Builder
	for _, m := range c.members {
		data, _ := os.ReadFile(m.logPath)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s:\n%s\n", m.name, data)
	}
	return b.String()
}

// deletePrefix deletes every key under prefix.
func (c *EtcdCluster) deletePrefix(ctx context.Context, prefix string) error {
	_, err := c.cli.Delete(ctx, prefix, clientv3.WithPrefix())
	return err
}

// Stop kills the member processes the package started, waits for them and
// removes their data directories. A cluster named by EnvDSN is left alone.
func (c *EtcdCluster) Stop() {
	if c.cli != nil {
		_ = c.cli.Close()
	}
	for _, m := range c.members {
		m.kill()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
