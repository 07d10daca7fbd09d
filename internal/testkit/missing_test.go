package testkit

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	t.Run("unset", func(t *testing.T) {
		t.Setenv(EnvReport, "")
		if err := Report(EventSkip, "mysql", "TestX", "why"); err != nil {
			t.Errorf("got %v, want nothing done", err)
		}
	})
	t.Run("appends", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report")
		t.Setenv(EnvReport, path)
		long := strings.Repeat("x", 1000)
		for _, ev := range [][]string{
			{EventContainer, "postgres", "postgres:15"},
			{EventSkip, "mysql", "TestA/with\ttab", "line one\nline two"},
			{EventSkip, "chromium", "TestC", long},
		} {
			if err := Report(ev[0], ev[1:]...); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		want := "container\tpostgres\tpostgres:15\nskip\tmysql\tTestA/with tab\tline one line two\n" +
			"skip\tchromium\tTestC\t" + long[:maxField-3] + "...\n"
		if err != nil || string(got) != want {
			t.Errorf("got %q (%v), want %q", got, err, want)
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		t.Setenv(EnvReport, filepath.Join(t.TempDir(), "missing", "report"))
		if err := Report(EventSkip, "mysql", "TestX", "why"); err == nil {
			t.Error("got no error for a file in a missing directory")
		}
	})
}

// TestUnavailable checks what the database and etcd fixtures do without a
// server: skip, reported with why for make test's summary, unless
// EnvRequire is 1; then fail, unreported (the run fails anyway). Either
// way the message says how to give the tests one.
func TestUnavailable(t *testing.T) {
	for _, fx := range []struct {
		name       string
		call       func(tb testing.TB)
		mentions   []string
		reportLine string // after "skip\t", with the test's name in the middle
	}{{
		name: "postgres",
		call: func(tb testing.TB) {
			dbUnavailable(tb, "postgres", EnvPostgres, "postgres://postgres@127.0.0.1:5432/postgres", fmt.Errorf("%w: %w", errNoDocker, sql.ErrConnDone))
		},
		mentions:   []string{EnvPostgres, "Docker", "PostgreSQL"},
		reportLine: "postgres\t%s\tno Docker engine answering\n",
	}, {
		name:       "etcd",
		call:       func(tb testing.TB) { etcdUnavailable(tb, errors.New("no etcd here")) },
		mentions:   []string{EnvEtcdBinary, EnvEtcdDSN, "etcd-server", "no etcd here"},
		reportLine: "etcd\t%s\tno etcd cluster: no etcd here\n",
	}} {
		for _, tc := range []struct {
			require  string
			wantSkip bool
		}{{"", true}, {"0", true}, {"1", false}} {
			t.Run(fx.name+"/require="+tc.require, func(t *testing.T) {
				t.Setenv(EnvRequire, tc.require)
				report := filepath.Join(t.TempDir(), "report")
				t.Setenv(EnvReport, report)
				f := &Recorder{TB: t}
				fx.call(f)
				if (f.SkipMsg != "") != tc.wantSkip || (f.FailMsg != "") == tc.wantSkip {
					t.Fatalf("skipped %q, failed %q; want skip = %v", f.SkipMsg, f.FailMsg, tc.wantSkip)
				}
				msg := f.SkipMsg + f.FailMsg
				for _, want := range fx.mentions {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not mention %q", msg, want)
					}
				}
				got, _ := os.ReadFile(report)
				want := ""
				if tc.wantSkip {
					want = "skip\t" + fmt.Sprintf(fx.reportLine, t.Name())
				}
				if string(got) != want {
					t.Errorf("report file holds %q, want %q", got, want)
				}
			})
		}
	}
}
