// Missing servers: what the fixtures do when a test needs a server they
// cannot give it (PostgreSQL, MySQL, etcd, Chromium): skip the test, unless
// EnvRequire forbids skipping, as CI does, where every test must run; and
// say so in the run's report (Report), which make test summarises at its
// end (scripts/testdb-report.sh).

package testkit

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvRequire, set to 1, makes a missing server fail the test instead of
// skipping it.
const EnvRequire = "IDGEN_TEST_REQUIRE_DB"

// EnvReport names a file to which the fixtures append a line for every
// test they skip and every container they start (Report); make test sets
// it and prints what the lines say when the run ends.
const EnvReport = "IDGEN_TEST_DB_REPORT"

// The events of the report, its lines' first field.
const (
	// EventSkip: a test was skipped; the fields after it are what was
	// missing ("postgres", "mysql", "etcd", "chromium"), the test's name
	// and why, in words.
	EventSkip = "skip"
	// EventContainer: a database container was started; then the database
	// and the image.
	EventContainer = "container"
)

// maxField bounds a field of the report: a driver's error can run to
// kilobytes, the summary wants its start.
const maxField = 240

// Report appends a line to the file EnvReport names, if any: event and the
// fields, separated by tabs, each with its tabs and newlines turned into
// spaces and cut to 240 bytes. Test processes run in parallel: each line
// is one write to a file opened for appending, so lines never interleave.
func Report(event string, fields ...string) error {
	path := os.Getenv(EnvReport)
	if path == "" {
		return nil
	}
	line := event
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for _, f := range fields {
		f = strings.Join(strings.Fields(clean.Replace(f)), " ")
		if len(f) > maxField {
			f = strings.ToValidUTF8(f[:maxField-3], "") + "..."
		}
		line += "\t" + f
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReportSkip reports that tb is skipped for want of what, and why; a
// report that cannot be written is logged on tb.
func ReportSkip(tb testing.TB, what, why string) {
	tb.Helper()
	if err := Report(EventSkip, what, tb.Name(), why); err != nil {
		tb.Logf("%s: %v", EnvReport, err)
	}
}

// MissingServer ends tb, whose server is missing; msg says which server and how
// to give the tests one. When EnvRequire is 1 it fails tb; else it runs
// onSkip (nil for nothing) and skips tb.
func MissingServer(tb testing.TB, msg string, onSkip func()) {
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
