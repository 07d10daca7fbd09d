package statuspage_test

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestStatusPageInChromium runs a few seconds of requests against a node
// on SQLite with one namespace, renders the status page in headless
// Chromium and checks what an operator sees: the sections in the order
// that puts problems first, this node's lease, the charts drawn from the
// load (in the DOM, and visible in the first screenful), the namespace, and
// the free worker IDs summarised. Set IDGEN_STATUS_SCREENSHOT=path.png to
// keep the screenshot (docs/status-page.png is made so).
func TestStatusPageInChromium(t *testing.T) {
	testkit.Chromium(t) // skip or fail early when there is none
	// A heartbeat a second, several in the window; a ttl long enough that
	// heartbeats stalled on a loaded machine do not lose the lease (the
	// page would then show a second worker ID held).
	const ttl = 10 * time.Second
	s := testserver.MustStart(t, testserver.Options{Keeper: allocator.KeeperSettings{Holder: "chromium-node", TTL: ttl, Heartbeat: time.Second}})
	if _, err := s.Store().CreateNamespace(context.Background(), allocator.Namespace{Name: "orders", MaxID: 999, Step: 100,
		MinStep: 100, MaxStep: 20000, Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone, Description: "order numbers"}); err != nil {
		t.Fatal(err)
	}

	// A page of its own over the node, sampling ten times a second over an
	// 8 s window, so that a few seconds of load fill the charts. Its clock
	// stops when the load ends, so that the pages rendered afterwards show
	// the same window however slowly Chromium starts.
	clock := &freezableClock{}
	cfg := config(s)
	cfg.Durability = "ok"
	cfg.PublicDetails = true // the page as docs/status-page.png shows it, details and all
	// The Policy table as idgen serve fills it, from the node's settings.
	policy, err := app.Config{DSN: "sqlite:" + filepath.Join(t.TempDir(), "policy.db"), Keeper: allocator.KeeperSettings{TTL: ttl, Heartbeat: time.Second}}.Policy()
	if err != nil {
		t.Fatal(err)
	}
	cfg.HistoryInterval, cfg.HistoryWindow, cfg.Clock = 100*time.Millisecond, 8*time.Second, clock
	cfg.LeaseTTL, cfg.MaxClockOffset, cfg.Policy = ttl, allocator.DefaultMaxClockOffset, policy
	page := newPage(t, cfg)
	history := page.History()
	history.Start()
	t.Cleanup(func() { _ = history.Close(context.Background()) }) // if the test ends early
	// The page at /, the node's routes around it, on loopback.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			s.Handler().ServeHTTP(w, r)
		} else if err := page.Serve(w, r); err != nil {
			t.Errorf("GET /: %v", err)
		}
	}))
	defer srv.Close()

	// Bounded load, one request at a time: Snowflake IDs, then both, then
	// segment IDs, then nothing.
	phases := []struct {
		d       time.Duration
		targets []string
	}{
		{2 * time.Second, []string{"/ids?count=100"}},
		{2 * time.Second, []string{"/ids?count=40", "/ids?count=50&namespace=orders"}},
		{2 * time.Second, []string{"/ids?count=200&namespace=orders"}},
		{time.Second, nil},
	}
	client := srv.Client()
	for _, ph := range phases {
		end := time.Now().Add(ph.d)
		for i := 0; time.Now().Before(end); i++ {
			if len(ph.targets) == 0 {
				time.Sleep(ph.d)
				break
			}
			get(t, client, srv.URL+ph.targets[i%len(ph.targets)])
			time.Sleep(2 * time.Millisecond)
		}
	}

	if err := history.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.freeze()
	if path := os.Getenv("IDGEN_STATUS_SCREENSHOT"); path != "" {
		// The whole page, for people to look at, first: the lease part of
		// the page is live, and the sooner it is taken the closer it is to
		// the stopped clock.
		testkit.ScreenshotSize(t, srv.URL+"/", path, 1200, 1180)
		t.Logf("screenshot written to %s", path)
	}

	dom := testkit.DumpDOM(t, srv.URL+"/")
	section := func(id string) string {
		m := regexp.MustCompile(`(?s)id="` + id + `".*?</(section|table|div)>`).FindString(dom)
		if m == "" {
			t.Fatalf("the rendered page has no element with id %q:\n%s", id, dom)
		}
		return m
	}
	// Problems first, then this node, the charts, the namespaces, the
	// worker leases, and last the settings, which do not change.
	at := -1
	for _, id := range []string{"attention", "lease", "charts", "namespaces", "workers", "leases", "policy"} {
		i := strings.Index(dom, `id="`+id+`"`)
		if i <= at {
			t.Errorf("section %q missing or out of order (at %d, after %d)", id, i, at)
		}
		at = i
	}

	st := s.Keeper().Status()
	lease := section("lease")
	for _, want := range []string{
		`<dd class="worker">` + strconv.FormatInt(st.Lease.WorkerID, 10) + `</dd>`,
		"chromium-node",
		`<dd class="fencing-version">` + strconv.FormatInt(st.Lease.FencingVersion, 10) + `</dd>`,
	} {
		if !strings.Contains(lease, want) {
			t.Errorf("this node's lease section lacks %q:\n%s", want, lease)
		}
	}
	if p := section("policy"); !strings.Contains(p, "Lease TTL") || !strings.Contains(p, ttl.String()) ||
		!strings.Contains(p, "max-clock-offset") {
		t.Errorf("the policy table lacks the lease TTL %s or the clock offset's flag:\n%s", ttl, p)
	}
	// The default pool is every worker ID of the layout: 32, one held.
	if workers := section("workers"); !strings.Contains(workers, "31 of 32 free") {
		t.Errorf("the worker leases do not summarise the free worker IDs as 31 of 32:\n%s", workers)
	}
	if leases := section("leases"); !strings.Contains(leases, "chromium-node") || strings.Count(leases, "<tr") != 2 {
		t.Errorf("the lease table: want the header and the one row held, by chromium-node:\n%s", leases)
	}
	row := regexp.MustCompile(`(?s)<tr[^>]*data-namespace="orders".*?</tr>`).FindString(dom)
	if !strings.Contains(row, "order numbers") || !strings.Contains(row, "(0 failed)") {
		t.Errorf("the orders row lacks its description or its fetches:\n%s", row)
	}

	// The charts, drawn from the load.
	chart := func(id string) string {
		m := regexp.MustCompile(`(?s)<svg[^>]*id="chart-` + id + `".*?</svg>`).FindString(dom)
		if m == "" {
			t.Fatalf("no chart %q in the page:\n%s", id, section("charts"))
		}
		for _, want := range []string{"<title", "<desc", `role="img"`} {
			if !strings.Contains(m, want) {
				t.Errorf("chart %s lacks %s", id, want)
			}
		}
		if strings.Contains(m, "NaN") || strings.Contains(m, "Inf") {
			t.Errorf("chart %s has NaN or Inf coordinates", id)
		}
		return m
	}
	ids := chart("ids")
	for _, series := range []string{"snowflake", "segment"} {
		m := regexp.MustCompile(`data-series="`+series+`" points="([^"]*)"`).FindAllStringSubmatch(ids, -1)
		points := 0
		for _, pl := range m {
			points += len(strings.Fields(pl[1]))
		}
		if points < 5 {
			t.Errorf("the IDs chart draws %d points of %s, want at least 5 from two seconds of load", points, series)
		}
	}
	if !strings.Contains(chart("refills"), `class="bar"`) {
		t.Errorf("the refills chart has no bar, after ranges were fetched")
	}
	if lc := chart("lease"); !strings.Contains(lc, `class="mark"`) || !strings.Contains(lc, `data-series="ceiling lead"`) {
		t.Errorf("the lease timeline lacks heartbeat marks or the ceiling lead")
	}
	chart("offset")
	if caption := section("charts"); !strings.Contains(caption, "peak") {
		t.Errorf("the charts' captions lack their figures:\n%s", caption)
	}

	// Visible: the series' colours are on screen in the first screenful,
	// below the legend swatches (which show them whatever the data).
	shot := filepath.Join(t.TempDir(), "status.png")
	testkit.Screenshot(t, srv.URL+"/", shot)
	img := readPNG(t, shot)
	for _, c := range []struct{ name, hex string }{
		{"snowflake line", "#1f6fb4"}, {"segment line", "#e08a00"}, {"refill bars", "#43a047"}, {"ceiling lead line", "#00838f"},
	} {
		if n := drawnBelowLegend(img, c.hex); n < 30 {
			t.Errorf("the %s (%s) covers %d pixels of the screenshot below its legend, want at least 30", c.name, c.hex, n)
		}
	}
}

func get(t *testing.T, c *http.Client, url string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return img
}

// drawnBelowLegend counts the pixels of img close to the colour hex that lie
// more than 14 pixels below the topmost such pixel: the topmost are the
// legend's swatch, 10 pixels high, and the rest is what the chart drew.
func drawnBelowLegend(img image.Image, hex string) int {
	var r0, g0, b0 int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r0, &g0, &b0); err != nil {
		panic(err)
	}
	near := func(x, y int) bool {
		r, g, b, _ := img.At(x, y).RGBA()
		d := abs(int(r>>8)-r0) + abs(int(g>>8)-g0) + abs(int(b>>8)-b0)
		return d <= 24
	}
	bounds := img.Bounds()
	top := -1
	n := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if !near(x, y) {
				continue
			}
			if top < 0 {
				top = y
			}
			if y > top+14 {
				n++
			}
		}
	}
	return n
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// freezableClock is the system's clock until freeze stops it.
type freezableClock struct {
	frozen atomic.Pointer[time.Time]
}

func (c *freezableClock) Now() time.Time {
	if t := c.frozen.Load(); t != nil {
		return *t
	}
	return time.Now()
}

func (c *freezableClock) Sleep(d time.Duration) { time.Sleep(d) }

func (c *freezableClock) freeze() {
	now := time.Now()
	c.frozen.Store(&now)
}
