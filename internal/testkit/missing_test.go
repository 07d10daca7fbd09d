package testkit

import (
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
