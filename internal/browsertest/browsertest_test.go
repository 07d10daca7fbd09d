package browsertest

import (
	"net/http"
	"net/http/httptest"
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
