// Processes: runs this repository's programs as child processes of a test.
// Build compiles one (idgen, or the lease holder of client/internal/holder);
// Start runs it with stdout and stderr appended to a log file, in a process
// group of its own so that a signal meant for the test does not reach it,
// and killed when the test process dies or the test ends.

package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildTimeout bounds one go build; a cold build cache on a loaded
// machine takes minutes.
const buildTimeout = 5 * time.Minute

// ModuleRoot returns the idgen module's root, the first directory upward
// from the working directory (a test's package directory) that holds a
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testproc: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build runs `go build flags… -o out pkg` in the module root, pkg being a
// package path relative to it ("./cmd/idgen"). The error carries go
// build's output.
func Build(ctx context.Context, out, pkg string, flags ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// MustBuild builds pkg as Build does into dir, under the package's last
// path element as its name, and returns the binary's path; it fails the
// test if go build fails.
func MustBuild(tb testing.TB, dir, pkg string, flags ...string) string {
	tb.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	if err := Build(tb.Context(), out, pkg, flags...); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Env is the whole environment of a child process, PATH, HOME and TZ=UTC
// and extra: no IDGEN_* variable of the test's own environment leaks into
// it.
func Env(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "TZ=UTC"}
	return append(env, extra...)
}

// Spec is a process to start.
type Spec struct {
	Name string   // what failures call it
	Bin  string   // the program
	Args []string // its arguments
	Env  []string // its whole environment (see Env)
	Log  string   // the file its stdout and stderr are appended to
	Mark string   // when not empty, a line written to Log before the start
}

// Proc is a started process.
type Proc struct {
	Name    string
	Log     string
	Started time.Time

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returned
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts s. The process is killed when the test ends if it still
// runs, and by the kernel if the test process dies first.
func Start(tb testing.TB, s Spec) *Proc {
	tb.Helper()
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatalf("%s: log: %v", s.Name, err)
	}
	if s.Mark != "" {
		fmt.Fprintln(logf, s.Mark)
	}
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Env = s.Env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		tb.Fatalf("%s: start: %v", s.Name, err)
	}
	p := &Proc{Name: s.Name, Log: s.Log, Started: time.Now(), cmd: cmd, done: make(chan struct{})}
	go func() { // owned by p: ends when the process exits, which the cleanup guarantees
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	tb.Cleanup(p.Kill)
	return p
}

// Done is closed when the process has exited and its log is closed.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned; valid once Done is
// closed.
func (p *Proc) Err() error { return p.err }

// Signal sends sig, failing the test unless it was sent or the process had
// already exited.
func (p *Proc) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Fatalf("%s: signal %v: %v", p.Name, sig, err)
	}
}

// Kill9 kills the process with SIGKILL and waits for it.
func (p *Proc) Kill9(tb testing.TB) {
	tb.Helper()
	p.Signal(tb, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, after SIGCONT (a paused process could not act on
// it), and returns the exit code; -1 if the process had to be killed after
// grace.
func (p *Proc) Stop(grace time.Duration) int {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(grace):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return -1
	}
}

// Kill kills the process, paused or not, if it still runs, and waits for
// it: the cleanup Start registers.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Tail returns the last n lines of the process's log, with whatever an
// earlier process appended to the same file before it.
func (p *Proc) Tail(n int) string { return Tail(p.Log, n) }

// Tail returns the last n lines of the file at path, all of a file that
// has fewer, "" if it cannot be read.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
