package docs_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestRateLimitMatchesSpec checks the 429 answers of a node with a rate
// limit against the spec: documented on each limited operation, with its
// Retry-After header and a problem body.
func TestRateLimitMatchesSpec(t *testing.T) {
	s := loadSpec(t)
	// One ID an hour, and one per request, so that the second is refused
	// whatever the test's pace.
	srv := testserver.MustStart(t, testserver.Options{
		AdminToken: adminToken,
		MaxCount:   1,
		RateLimit:  idgen.RateLimit{Rate: 1.0 / 3600, Burst: 1},
	})
	for _, ex := range []exchange{
		{"first ids", "GET", "/ids", "/ids", "", "", 200},
		{"ids past the limit", "GET", "/ids", "/ids", "", "", 429},
		{"decompose past the limit", "GET", "/ids/1", "/ids/{id}", "", "", 429},
		{"first admin call", "GET", "/admin/leases", "/admin/leases", "", adminToken, 200},
		{"admin past the limit", "GET", "/admin/namespaces", "/admin/namespaces", "", adminToken, 429},
		{"v1 ids past the limit", "GET", "/api/v1/ids?count=1", "/api/v1/ids", "", "", 429},
		{"v1 id past the limit", "POST", "/api/v1/id", "/api/v1/id", "", "", 429},
		{"Leaf segment past the limit", "GET", "/api/segment/get/orders", "/api/segment/get/{key}", "", "", 429},
		{"Leaf snowflake past the limit", "GET", "/api/snowflake/get/orders", "/api/snowflake/get/{key}", "", "", 429},
		{"tinyid simple past the limit", "GET", "/tinyid/id/nextIdSimple?bizType=orders", "/tinyid/id/nextIdSimple", "", "", 429},
		{"tinyid envelope past the limit", "GET", "/tinyid/id/nextId?bizType=orders", "/tinyid/id/nextId", "", "", 429},
		{"tinyid envelope POST past the limit", "POST", "/tinyid/id/nextId?bizType=orders", "/tinyid/id/nextId", "", "", 429},
		{"probes are not limited", "GET", "/healthz", "/healthz", "", "", 200},
	} {
		t.Run(ex.name, func(t *testing.T) {
			resp, data := send(t, srv.URL, ex) //nolint:bodyclose // send read and closed it
			if got := resp.Header.Get("Retry-After"); ex.want == 429 && got != "3600" {
				t.Errorf("Retry-After: got %q, want 3600", got)
			}
			checkResponse(t, s, ex, resp, data)
		})
	}
}

// send sends ex to base, a body as JSON, and returns the answer and its
// body, failing the test on a status other than ex.want.
func send(t *testing.T, base string, ex exchange) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if ex.body != "" {
		body = strings.NewReader(ex.body)
	}
	req, err := http.NewRequest(ex.method, base+ex.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ex.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if ex.token != "" {
		req.Header.Set("Authorization", "Bearer "+ex.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != ex.want {
		t.Fatalf("%s %s: got status %d, want %d: %s", ex.method, ex.path, resp.StatusCode, ex.want, data)
	}
	return resp, data
}
