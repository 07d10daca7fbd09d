// Chromium: renders pages in headless Chromium for tests. It uses Debian's
// chromium package (/usr/bin/chromium) or the binary named by
// IDGEN_CHROMIUM; when none is installed the test is skipped (reported for
// the summary of make test), or fails when IDGEN_TEST_REQUIRE_CHROMIUM=1 (as
// in CI).

package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The environment variables the Chromium fixture reads.
const (
	EnvChromium        = "IDGEN_CHROMIUM"
	EnvRequireChromium = "IDGEN_TEST_REQUIRE_CHROMIUM"
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
	if os.Getenv(EnvRequireChromium) == "1" {
		tb.Fatal(msg + " (" + EnvRequireChromium + "=1)")
	}
	ReportSkip(tb, "chromium", "no Chromium found")
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
