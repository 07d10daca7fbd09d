package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "module github.com/idgen-project/idgen\n") {
		t.Errorf("%s/go.mod: got %.60q, want the idgen module", root, b)
	}
}

// startShell starts sh -c script, its log in a fresh directory.
func startShell(t *testing.T, script string) *Proc {
	t.Helper()
	return Start(t, Spec{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", script}, Env: Env(),
		Log: filepath.Join(t.TempDir(), "sh.log"), Mark: "### start"})
}

// waitLog waits until the process's log has want as its last line.
func waitLog(t *testing.T, p *Proc, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.Tail(1) != want {
		if time.Now().After(deadline) {
			t.Fatalf("log: got %q, want %q as its last line", p.Tail(5), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStop(t *testing.T) {
	p := startShell(t, `trap 'echo term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	if p.Exited() {
		t.Fatal("Exited: got true while it runs")
	}
	if code := p.Stop(10 * time.Second); code != 3 {
		t.Errorf("Stop: got exit code %d, want 3", code)
	}
	if !p.Exited() {
		t.Error("Exited: got false after Stop")
	}
	if got, want := p.Tail(10), "### start\nready\nterm"; got != want {
		t.Errorf("Tail: got %q, want %q", got, want)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := startShell(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	if code := p.Stop(200 * time.Millisecond); code != -1 {
		t.Errorf("Stop of a process ignoring SIGTERM: got %d, want -1", code)
	}
}

func TestKill9(t *testing.T) {
	p := startShell(t, `echo ready; exec sleep 60`)
	waitLog(t, p, "ready")
	p.Kill9(t)
	if !p.Exited() || p.Err() == nil {
		t.Errorf("after Kill9: Exited %v, Err %v; want true and the signal", p.Exited(), p.Err())
	}
	p.Signal(t, syscall.SIGTERM) // to a process that has exited: no failure
}

func TestEnv(t *testing.T) {
	t.Setenv("IDGEN_DSN", "postgres://leaked")
	for _, kv := range Env("EXTRA=1") {
		if strings.HasPrefix(kv, "IDGEN_") {
			t.Errorf("Env: %q leaked into a child's environment", kv)
		}
	}
	if got := Env("EXTRA=1"); got[len(got)-1] != "EXTRA=1" {
		t.Errorf("Env: got %q, want EXTRA=1 last", got)
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{1: "c", 2: "b\nc", 5: "a\nb\nc"} {
		if got := Tail(path, n); got != want {
			t.Errorf("Tail(%d): got %q, want %q", n, got, want)
		}
	}
	if got := Tail(filepath.Join(t.TempDir(), "none"), 3); got != "" {
		t.Errorf("Tail of a missing file: got %q, want \"\"", got)
	}
}
