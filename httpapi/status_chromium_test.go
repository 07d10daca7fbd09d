package httpapi_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/browsertest"
)

// TestStatusPageInChromium renders the status page in headless Chromium and
// checks that an operator sees this node's lease, the lease table and a
// namespace with its buffer. Set IDGEN_STATUS_SCREENSHOT=path.png to keep a
// screenshot of the page.
func TestStatusPageInChromium(t *testing.T) {
	browsertest.Chromium(t) // skip or fail early when there is none
	e := newEnv(t, envOptions{workers: &allocator.WorkerRange{Min: 7, Max: 7}, holder: "chromium-node"})
	e.createNamespace(allocator.Namespace{Name: "orders", MaxID: 999, Step: 100, MinStep: 100, MaxStep: 1000,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone})
	if rec := e.do("GET", "/ids?count=5&namespace=orders", ""); rec.Code != 200 {
		t.Fatalf("draw from orders: %d %s", rec.Code, rec.Body)
	}
	srv := httptest.NewServer(e.h)
	defer srv.Close()

	dom := browsertest.DumpDOM(t, srv.URL+"/")
	section := func(id string) string {
		m := regexp.MustCompile(`(?s)id="` + id + `".*?</(section|table|div)>`).FindString(dom)
		if m == "" {
			t.Fatalf("the rendered page has no element with id %q:\n%s", id, dom)
		}
		return m
	}
	st := e.keeper.Status()
	lease := section("lease")
	for _, want := range []string{"7", "chromium-node", strconv.FormatInt(st.Lease.FencingVersion, 10)} {
		if !strings.Contains(lease, want) {
			t.Errorf("this node's lease section lacks %q:\n%s", want, lease)
		}
	}
	if leases := section("leases"); !strings.Contains(leases, "chromium-node") {
		t.Errorf("the lease table lacks the holder:\n%s", leases)
	}
	row := regexp.MustCompile(`(?s)<tr[^>]*data-namespace="orders".*?</tr>`).FindString(dom)
	if row == "" {
		t.Fatalf("no row for namespace orders in:\n%s", section("namespaces"))
	}
	// 1000..1099 fetched, 5 drawn: 95 left in this node's buffer.
	if !strings.Contains(row, "95") {
		t.Errorf("the orders row does not show the runway 95:\n%s", row)
	}
	if path := os.Getenv("IDGEN_STATUS_SCREENSHOT"); path != "" {
		abs, _ := filepath.Abs(path)
		browsertest.Screenshot(t, srv.URL+"/", abs)
		t.Logf("screenshot written to %s", abs)
	}
}
