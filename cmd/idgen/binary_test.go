package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/idgen-project/idgen/internal/testproc"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/internal/teststore"
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
	return testproc.MustBuild(t, t.TempDir(), "./cmd/idgen", "-tags", strings.Join(tags, ","))
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

// startBinary starts `idgen serve --listen 127.0.0.1:0 args…` in dir and
// waits until it has written the address it serves on to its --addr-file.
// The process is killed, if still running, when the test ends.
func startBinary(t *testing.T, bin, dir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, logs: &testserver.LogBuffer{}, waited: make(chan struct{}), addrFile: filepath.Join(t.TempDir(), "addr")}
	p.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", p.addrFile}, args...)...)
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
	for _, dialect := range teststore.Dialects {
		t.Run(dialect, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			dsn := "sqlite:" + filepath.Join(dir, "idgen.db") // where the default puts it
			if dialect != "sqlite" {
				dsn = teststore.DSN(t, dialect)
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
