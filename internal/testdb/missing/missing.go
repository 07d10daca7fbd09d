// Package missing is what idgen's test fixtures do when a test needs a
// server they cannot give it (internal/testdb for PostgreSQL and MySQL,
// internal/etcdtest for etcd): skip the test, unless EnvRequire forbids
// skipping, as CI does, where every test must run. testdb and etcdtest
// share it; it imports neither, so etcdtest does not pull in testdb's
// containers.
package missing

import (
	"fmt"
	"os"
	"testing"
)

// EnvRequire, set to 1, makes a missing server fail the test instead of
// skipping it.
const EnvRequire = "IDGEN_TEST_REQUIRE_DB"

// Server ends tb, whose server is missing; msg says which server and how
// to give the tests one. When EnvRequire is 1 it fails tb; else it runs
// onSkip (nil for nothing) and skips tb.
func Server(tb testing.TB, msg string, onSkip func()) {
	tb.Helper()
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequire)
		return
	}
	if onSkip != nil {
		onSkip()
	}
	tb.Skip(msg)
}

// Recorder is a testing.TB that records how Server ended a test instead
// of ending it, for the fixtures' own tests. The embedded TB, which may be
// nil, serves the methods other than Helper, Skip and Fatalf.
type Recorder struct {
	testing.TB
	SkipMsg, FailMsg string // the messages of Skip and Fatalf
}

// Helper implements testing.TB; it does nothing.
func (r *Recorder) Helper() {}

// Skip records the message instead of skipping.
func (r *Recorder) Skip(args ...any) { r.SkipMsg = fmt.Sprint(args...) }

// Fatalf records the message instead of failing.
func (r *Recorder) Fatalf(format string, a ...any) { r.FailMsg = fmt.Sprintf(format, a...) }
