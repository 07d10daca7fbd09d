//go:build !idgen_testclock

package main

import (
	"strings"
	"testing"
)

// testClockFileArgs returns no flag: the default build has no test clock.
func testClockFileArgs(string) []string { return nil }

// TestNoTestClockFlags checks that the default build refuses the test
// clock's flags as unknown: no setting can shift a production node's clock.
func TestNoTestClockFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--test-clock-offset", "-2s"},
		{"serve", "--test-clock-file", "/tmp/clock"},
	} {
		r := cli(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "flag provided but not defined: -"+strings.TrimPrefix(args[1], "--")) {
			t.Errorf("idgen %q: got exit code %d, stderr %q; want 2 and an unknown flag", args, r.code, r.stderr)
		}
	}
	if strings.Contains(usageOf("serve"), "test-clock") {
		t.Errorf("serve --help mentions the test clock")
	}
}
