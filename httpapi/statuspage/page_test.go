package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi/statuspage"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

const adminToken = "s3cret-admin-token-for-statuspage-tests"

// config returns a page Config on the parts of node s.
func config(s *testserver.Server) statuspage.Config {
	return statuspage.Config{Service: s.Service(), Auth: s.Authorizer(), Lease: s.Keeper(), Segments: s.Segments(),
		Store: s.Store(), Database: s.Store(), Version: "test-version"}
}

// newPage returns the page of cfg.
func newPage(t *testing.T, cfg statuspage.Config) *statuspage.Page {
	t.Helper()
	p, err := statuspage.New(cfg)
	if err != nil {
		t.Fatalf("statuspage.New: %v", err)
	}
	return p
}

// render serves GET / from p with the header pairs given, and returns the
// page, failing the test unless it is 200 HTML.
func render(t *testing.T, p *statuspage.Page, header ...string) string {
	t.Helper()
	req := httptest.NewRequest("GET", "/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	if err := p.Serve(rec, req); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=UTF-8" {
		t.Fatalf("GET /: got %d %q, want 200 text/html", rec.Code, rec.Header().Get("Content-Type"))
	}
	return rec.Body.String()
}

func TestNewRefusesBadConfig(t *testing.T) {
	s := testserver.MustStart(t, testserver.Options{})
	for _, tc := range []struct {
		name   string
		change func(*statuspage.Config)
	}{
		{"no Service", func(c *statuspage.Config) { c.Service = nil }},
		{"no Auth", func(c *statuspage.Config) { c.Auth = nil }},
		{"no Lease", func(c *statuspage.Config) { c.Lease = nil }},
		{"no Segments", func(c *statuspage.Config) { c.Segments = nil }},
		{"no Store", func(c *statuspage.Config) { c.Store = nil }},
		{"no Database", func(c *statuspage.Config) { c.Database = nil }},
		{"a window of more than MaxHistorySamples intervals", func(c *statuspage.Config) {
			c.HistoryInterval, c.HistoryWindow = time.Millisecond, time.Hour
		}},
	} {
		cfg := config(s)
		tc.change(&cfg)
		if _, err := statuspage.New(cfg); err == nil {
			t.Errorf("%s: New returned no error", tc.name)
		}
	}
}

// TestPolicyShown: the page shows Config.Policy as a table, and leaves the
// table out without one.
func TestPolicyShown(t *testing.T) {
	s := testserver.MustStart(t, testserver.Options{})
	for _, tc := range []struct {
		name   string
		policy []statuspage.PolicySetting
		want   []string
	}{
		{"none", nil, nil},
		{"two settings", []statuspage.PolicySetting{
			{Name: "Lease margin before the deadline", Value: "3s", Flag: "lease-margin"},
			{Name: "Random sequence start", Value: "on", Flag: "random-sequence-start"},
		}, []string{
			`<tr data-setting="lease-margin"><td>Lease margin before the deadline</td><td class="value">3s</td><td class="muted">--lease-margin</td></tr>`,
			`<tr data-setting="random-sequence-start"><td>Random sequence start</td><td class="value">on</td><td class="muted">--random-sequence-start</td></tr>`,
		}},
	} {
		cfg := config(s)
		cfg.Policy = tc.policy
		page := render(t, newPage(t, cfg))
		if has := strings.Contains(page, `<table id="policy">`); has != (tc.policy != nil) {
			t.Errorf("%s: got a policy table %v, want %v", tc.name, has, tc.policy != nil)
		}
		for _, row := range tc.want {
			if !strings.Contains(page, row) {
				t.Errorf("%s: status page lacks the row %s", tc.name, row)
			}
		}
	}
}

// TestDurabilityShown: the page shows the durability found at start, in
// red unless it is "ok", and no row without one.
func TestDurabilityShown(t *testing.T) {
	s := testserver.MustStart(t, testserver.Options{})
	for _, tc := range []struct {
		durability string
		class      string // of the span; "" for no row
	}{
		{"unsafe: synchronous_commit=off (overridden)", "bad"},
		{"ok", "ok"},
		{"ok (warning: synchronous_standby_names='')", "bad"},
		{"", ""},
	} {
		cfg := config(s)
		cfg.Durability = tc.durability
		page := render(t, newPage(t, cfg))
		row := `<dd class="durability"><span class="` + tc.class + `">` + strings.ReplaceAll(tc.durability, "'", "&#39;") + `</span></dd>`
		if tc.class == "" {
			if strings.Contains(page, `class="durability"`) {
				t.Errorf("status page shows a durability row for an empty Durability")
			}
		} else if !strings.Contains(page, row) {
			t.Errorf("Durability %q: status page lacks %s", tc.durability, row)
		}
	}
}

// TestPublicDetails: with PublicDetails, a request without a token sees the
// holders, fencing versions and namespaces; without, only the admin scope
// does.
func TestPublicDetails(t *testing.T) {
	s := testserver.MustStart(t, testserver.Options{AdminToken: adminToken})
	s.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Description: "order numbers"})
	details := []string{`id="leases"`, `data-namespace="orders"`, s.Keeper().Holder(), `class="fencing-version"`}
	for _, tc := range []struct {
		name   string
		public bool
		header []string
		want   bool
	}{
		{"public, no token", true, nil, true},
		{"not public, no token", false, nil, false},
		{"not public, a wrong token", false, []string{"Authorization", "Bearer not-" + adminToken}, false},
		{"not public, the admin token", false, []string{"Authorization", "Bearer " + adminToken}, true},
	} {
		cfg := config(s)
		cfg.PublicDetails = tc.public
		page := render(t, newPage(t, cfg), tc.header...)
		for _, d := range details {
			if got := strings.Contains(page, d); got != tc.want {
				t.Errorf("%s: page shows %q %v, want %v", tc.name, d, got, tc.want)
			}
		}
	}
}

// stepClock is a clock that moves only when the test steps it.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time        { return c.t }
func (c *stepClock) Sleep(d time.Duration) { c.t = c.t.Add(d) }

// TestChartCountsEveryTransport: IDs drawn over gRPC show on the IDs
// chart beside those drawn over HTTP, and its caption says that it counts
// every transport.
func TestChartCountsEveryTransport(t *testing.T) {
	s := testserver.MustStart(t, testserver.Options{})
	clock := &stepClock{t: time.Now()}
	cfg := config(s)
	cfg.Clock = clock
	p := newPage(t, cfg)
	p.History().Sample()

	ctx := context.Background()
	c := idgenv1connect.NewIdServiceClient(http.DefaultClient, s.URL)
	if _, err := c.NextIds(ctx, connect.NewRequest(&idgenv1.NextIdsRequest{Count: 70})); err != nil {
		t.Fatalf("NextIds: %v", err)
	}
	resp, err := http.Get(s.URL + "/ids?count=30")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := s.Service().Issued(idgen.SourceSnowflake); got != 100 {
		t.Fatalf("the core counts %d Snowflake IDs, want 100", got)
	}
	clock.Sleep(5 * time.Second)
	p.History().Sample()

	m := regexp.MustCompile(`(?s)<figcaption>IDs handed out [^<]*</figcaption>`).FindString(render(t, p))
	for _, want := range []string{"over every transport", "snowflake: 20/s at the last sample, peak 20/s, 100 IDs in all"} {
		if !strings.Contains(m, want) {
			t.Errorf("IDs chart caption %q lacks %q", m, want)
		}
	}
}
