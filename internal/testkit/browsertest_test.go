package testkit

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDumpDOMRunsScripts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><body><p id="x">static</p>
<script>document.getElementById("x").textContent = "from-" + "script";</script></body></html>`))
	}))
	defer srv.Close()
	dom := DumpDOM(t, srv.URL)
	if !strings.Contains(dom, "from-script") {
		t.Fatalf("the DOM does not show the script's change:\n%s", dom)
	}
}

// TestChromiumMissingReported: without Chromium the test is skipped and
// the skip goes to the run's report, so that make test's summary names it.
func TestChromiumMissingReported(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report")
	t.Setenv(EnvReport, report)
	t.Setenv(EnvRequire, "")
	t.Setenv(EnvRequireChromium, "")
	t.Setenv(EnvChromium, "")
	t.Setenv("PATH", t.TempDir()) // no Chromium on it
	r := &Recorder{TB: t}
	if got := Chromium(r); got != "" || !strings.Contains(r.SkipMsg, "apt-get install chromium") {
		t.Fatalf("Chromium without one: got %q, skip %q; want a skip saying how to install it", got, r.SkipMsg)
	}
	got, err := os.ReadFile(report)
	if want := "skip\tchromium\t" + t.Name() + "\tno Chromium found\n"; err != nil || string(got) != want {
		t.Errorf("report: got %q (%v), want %q", got, err, want)
	}
}
