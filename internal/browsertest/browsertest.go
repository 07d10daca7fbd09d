// Package browsertest renders pages in headless Chromium for tests.
//
// It uses Debian's chromium package (/usr/bin/chromium) or the binary named
// by IDGEN_CHROMIUM. When none is installed the test is skipped with a
// message saying how to install it, and the skip is reported for the
// summary at the end of make test (missing.Report), or fails when
// IDGEN_TEST_REQUIRE_CHROMIUM=1 (as in CI).
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testdb/missing"
)

// The environment variables browsertest reads.
const (
	EnvChromium = "IDGEN_CHROMIUM"
	EnvRequire  = "IDGEN_TEST_REQUIRE_CHROMIUM"
)

// Chromium returns the path of the Chromium binary, skipping or failing the
// test when there is none.
func Chromium(tb testing.TB) string {
	tb.Helper()
	candidates := []string{os.Getenv(EnvChromium), "chromium", "chromium-browser", "google-chrome"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "no Chromium found: install Debian's chromium package (apt-get install chromium) or set " + EnvChromium
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatal(msg + " (" + EnvRequire + "=1)")
	}
	missing.ReportSkip(tb, "chromium", "no Chromium found")
	tb.Skip(msg)
	return ""
}

// flags start Chromium headless without touching the network or a profile
// other than a fresh one in the test's temporary directory.
func flags(tb testing.TB) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + tb.TempDir(),
	}
}

// DumpDOM loads url in headless Chromium and returns the DOM after the page
// ran its scripts.
func DumpDOM(tb testing.TB, url string) string {
	tb.Helper()
	bin := Chromium(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(flags(tb), "--dump-dom", url)...).Output()
	if err != nil {
		tb.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	return string(out)
}

// Screenshot loads url in headless Chromium and writes a PNG of it to path:
// the first 1200×900 pixels, what a laptop's screen shows.
func Screenshot(tb testing.TB, url, path string) {
	tb.Helper()
	ScreenshotSize(tb, url, path, 1200, 900)
}

// ScreenshotSize is Screenshot of the first width×height pixels.
func ScreenshotSize(tb testing.TB, url, path string, width, height int) {
	tb.Helper()
	bin := Chromium(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(flags(tb), fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+path, url)
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		tb.Fatalf("chromium --screenshot %s: %v\n%s", url, err, out)
	}
}
