//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// The ClickHouse server of the audit outage (TestChaosAuditOutage): the
// one .ci/run starts, Debian's package run by its own user without
// systemd. The harness stops it by the pid in its pid file and starts it
// again with .ci/run's command.
const (
	clickhousePidFile = "/var/lib/clickhouse/clickhouse.pid"
	clickhouseStart   = "clickhouse-server --config-file=/etc/clickhouse-server/config.xml --daemon --pid-file=" + clickhousePidFile
)

// clickhouseServer returns IDGEN_TEST_CLICKHOUSE_URL (http://127.0.0.1:8123)
// once the server answers. Without it the test fails under
// IDGEN_TEST_REQUIRE_DB=1, as in CI, and skips otherwise; a server that
// is not on this machine, or does not answer, fails it.
func clickhouseServer(t *testing.T) *url.URL {
	t.Helper()
	u := testkit.ClickHouse(t)
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
	default:
		t.Fatalf("ClickHouse at %s is not local: the audit outage stops and restarts it on this machine", u.Hostname())
	}
	if err := pingClickHouse(u); err != nil {
		t.Fatalf("ClickHouse at %s does not answer: %v", u.Host, err)
	}
	if _, err := os.Stat(clickhousePidFile); err != nil {
		t.Fatalf("ClickHouse answers but its pid file is not where .ci/run puts it: %v", err)
	}
	return u
}

// pingClickHouse runs SELECT 1 on a fresh connection.
func pingClickHouse(u *url.URL) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Scheme+"://"+u.Host+"/?query=SELECT%201", nil)
	if err != nil {
		return err
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "1" {
		return fmt.Errorf("SELECT 1: HTTP %d: %q", resp.StatusCode, body)
	}
	return nil
}

// clickhousePid returns the pid in the server's pid file, 0 if none.
func clickhousePid() int {
	b, err := os.ReadFile(clickhousePidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}

// refused reports whether a connection to addr is refused (nothing
// listens).
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// stopClickHouse stops the server the way an operator would (SIGTERM to
// the pid in its pid file; SIGKILL if it still runs 60 s later) and
// returns when its port refused connections.
func stopClickHouse(u *url.URL) (time.Time, error) {
	pid := clickhousePid()
	if pid == 0 {
		return time.Time{}, fmt.Errorf("no pid in %s", clickhousePidFile)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return time.Time{}, fmt.Errorf("SIGTERM clickhouse-server %d: %w", pid, err)
	}
	killAt := time.Now().Add(60 * time.Second)
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		gone := errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
		if gone && refused(u.Host) {
			return time.Now(), nil
		}
		if !gone && time.Now().After(killAt) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killAt = deadline
		}
	}
	return time.Time{}, fmt.Errorf("clickhouse-server %d still runs or %s still accepts 90s after SIGTERM", pid, u.Host)
}

// startClickHouse starts the server as .ci/run does and returns when it
// answered SELECT 1. A pid file left by a killed server would stop the
// new one from starting: it goes first.
func startClickHouse(u *url.URL) (time.Time, error) {
	if pid := clickhousePid(); pid != 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		_ = os.Remove(clickhousePidFile)
	}
	if err := runCmd(2*time.Minute, "su", "-s", "/bin/sh", "clickhouse", "-c", clickhouseStart); err != nil {
		return time.Time{}, err
	}
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		if err = pingClickHouse(u); err == nil {
			return time.Now(), nil
		}
	}
	return time.Time{}, fmt.Errorf("ClickHouse did not answer within 2m of its start: %w", err)
}

// ensureClickHouse starts the server again unless it answers: the
// cleanup of every test that stops it, so that it always runs after them.
func ensureClickHouse(t *testing.T, u *url.URL) {
	t.Helper()
	if pingClickHouse(u) == nil {
		return
	}
	if _, err := startClickHouse(u); err != nil {
		t.Errorf("start ClickHouse again: %v", err)
	}
}
