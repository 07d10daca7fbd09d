package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// checkDraining checks, in this order, that n's /readyz turns 503 saying
// the node shuts down, that /ids still answers 200 and that the node has
// not exited (exited is closed when it has).
func checkDraining(t *testing.T, n *node, exited <-chan struct{}) {
	t.Helper()
	testkit.WaitFor(t, stopTimeout, "/readyz 503 after the first signal", func() bool {
		code, _, _ := n.get("/readyz")
		return code == http.StatusServiceUnavailable
	})
	if code, _, body := n.get("/readyz"); !strings.Contains(string(body), "shutting down") {
		t.Errorf("/readyz while draining: got %d %s, want the reason: shutting down", code, body)
	}
	for range 3 {
		if code, _, body := n.get("/ids?count=5"); code != http.StatusOK {
			t.Errorf("GET /ids while draining: got %d %s, want 200", code, body)
		}
	}
	select {
	case <-exited:
		t.Fatal("the node exited inside its drain window")
	default:
	}
}

// checkShutdownOrder checks that the log has the drain, its early end, the
// shutdown and the lease release, in this order.
func checkShutdownOrder(t *testing.T, logs string) {
	t.Helper()
	at := -1
	for _, step := range []string{`draining: not ready`, `drain window cut short`, `shutting down`, `lease released`, `idgen stopped`} {
		i := strings.Index(logs, step)
		if i <= at {
			t.Fatalf("log line %q missing or out of order:\n%s", step, logs)
		}
		at = i
	}
}

// TestServeDrainsUntilSecondSignal: in-process, the context's end (the
// first SIGTERM) starts the drain window of a minute; hurry's end (the
// second) cuts it short, and the node shuts down cleanly. Nothing here
// depends on how long a step takes: the window only ends by the second
// signal.
func TestServeDrainsUntilSecondSignal(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry, cutShort := context.WithCancel(context.Background())
	defer cutShort()
	logs := &testserver.LogBuffer{}
	addrFile := filepath.Join(dir, "addr")
	exited, runErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(exited)
		runErr <- runEnv(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
			"--dsn", "sqlite:" + filepath.Join(dir, "idgen.db"), "--drain-window", "1m"}, env{
			getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: logs,
			hurry: hurry,
		})
	}()
	n := &node{t: t, logs: logs, addr: waitAddrFile(t, addrFile, exited, logs), client: &http.Client{Timeout: 30 * time.Second}}
	n.stopOnce.Do(func() {})
	n.waitReady()

	cancel()
	checkDraining(t, n, exited)
	cutShort()
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		t.Fatalf("idgen serve did not stop within %s of the second signal\n%s", stopTimeout, logs)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("idgen serve: got %v, want a clean shutdown\n%s", err, logs)
	}
	checkShutdownOrder(t, logs.String())
}

// TestBinaryDrain: the binary keeps serving, not ready, after a SIGTERM
// and stops at a second one, exiting 0 with its lease released.
func TestBinaryDrain(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startBinary(t, bin, dir, testkit.Env(), "--dsn", "sqlite:"+filepath.Join(dir, "idgen.db"), "--drain-window", "1m")
	n := p.node()
	n.waitReady()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	checkDraining(t, n, p.waited)
	if code := p.terminate(); code != 0 {
		t.Fatalf("exit code after the second SIGTERM: got %d, want 0\n%s", code, p.logs)
	}
	checkShutdownOrder(t, p.logs.String())
}
