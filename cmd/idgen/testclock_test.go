//go:build idgen_testclock

package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// The tests of the test clock run in a build with its tag:
//
//	go test -tags idgen_testclock ./cmd/idgen/

func TestParseServeTestClock(t *testing.T) {
	c, err := parseServe([]string{"--test-clock-offset", "-2s", "--test-clock-file", "/tmp/f"}, env{getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if c.clock.offset != -2*time.Second || c.clock.file != "/tmp/f" {
		t.Errorf("got %s %q, want -2s /tmp/f", c.clock.offset, c.clock.file)
	}
	vars := map[string]string{"IDGEN_TEST_CLOCK_OFFSET": "1h", "IDGEN_TEST_CLOCK_FILE": "/tmp/clock"}
	if c, err := parseServe(nil, env{getenv: func(k string) string { return vars[k] }}); err != nil || c.clock != (testClock{}) {
		t.Errorf("parseServe with IDGEN_TEST_CLOCK_*: got %+v, %v; want no test clock: the flags have no environment variable", c.clock, err)
	}
}

func TestClockWatcherRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	clock := snowflake.NewShiftedClock(nil, 0)
	// The watcher's goroutine is not started: read is called directly.
	w := &clockWatcher{clock: clock, path: path, log: newLogger(io.Discard, "text", 0)}
	steps := []struct {
		content string // "" removes the file
		want    time.Duration
	}{
		{"", 0}, // no file: unchanged
		{"2s\n", 2 * time.Second},
		{"-3s", -3 * time.Second},
		{"soon", -3 * time.Second}, // not a duration: unchanged
		{" ", -3 * time.Second},    // empty: unchanged
		{"", -3 * time.Second},     // removed: unchanged
		{"1500ms", 1500 * time.Millisecond},
		{"0s", 0},
	}
	for i, st := range steps {
		if st.content == "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(path, []byte(st.content), 0o600); err != nil {
			t.Fatal(err)
		}
		w.read()
		if got := clock.Offset(); got != st.want {
			t.Errorf("step %d (%q): got offset %s, want %s", i, st.content, got, st.want)
		}
	}
}

func TestClockWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(path, []byte("2s"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := snowflake.NewShiftedClock(nil, 0)
	w := startClockWatcher(clock, path, 5*time.Millisecond, newLogger(io.Discard, "text", 0))
	defer w.stop()
	if got := clock.Offset(); got != 2*time.Second {
		t.Fatalf("right after start: got offset %s, want the file's 2s", got)
	}
	if err := os.WriteFile(path, []byte("-3s"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for clock.Offset() != -3*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("got offset %s, want the file's new -3s", clock.Offset())
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.stop()
	w.stop() // a second stop returns at once
	select {
	case <-w.loop.Done():
	default:
		t.Fatal("stop returned before the watcher's goroutine ended")
	}
}

// testClockFileArgs returns the flags that make a node's clock follow the
// file path.
func testClockFileArgs(path string) []string { return []string{"--test-clock-file", path} }
