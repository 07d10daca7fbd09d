package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// idsResponse is the body of GET /ids.
type idsResponse struct {
	IDs       []string      `json:"ids"`
	Namespace string        `json:"namespace"`
	Source    string        `json:"source"`
	Ranges    []rangeJSON   `json:"ranges"`
	Explain   []explainJSON `json:"explain"`
	Lease     *fencingLease `json:"lease"`
	Revision  int64         `json:"revision"`
	Format    string        `json:"format"`
}

// fencingLease is the fencing token of Snowflake IDs in GET /ids.
type fencingLease struct {
	Datacenter     int64 `json:"datacenter"`
	Worker         int64 `json:"worker"`
	FencingVersion int64 `json:"fencing_version"`
}

type rangeJSON struct {
	First string `json:"first"`
	Last  string `json:"last"`
}

// explainJSON is the decomposition of an ID (GET /ids/{id}, explain=true).
type explainJSON struct {
	ID          string `json:"id"`
	Time        string `json:"time"`
	TimestampMS int64  `json:"timestamp_ms"`
	Datacenter  int64  `json:"datacenter"`
	Worker      int64  `json:"worker"`
	Sequence    int64  `json:"sequence"`
}

// parseJSON is the answer of GET /ids/{id}: the decomposition and the ID in
// every form.
type parseJSON struct {
	explainJSON
	Forms formsJSON `json:"forms"`
}

type formsJSON struct {
	Decimal string `json:"decimal"`
	Base32  string `json:"base32"`
	Base62  string `json:"base62"`
	Hex     string `json:"hex"`
}

type readyResponse struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
	Lease  *struct {
		Datacenter     int64  `json:"datacenter"`
		Worker         int64  `json:"worker"`
		FencingVersion int64  `json:"fencing_version"`
		ValidForMS     int64  `json:"valid_for_ms"`
		Holder         string `json:"holder"`
	} `json:"lease"`
	Database struct {
		Reachable bool   `json:"reachable"`
		Error     string `json:"error"`
	} `json:"database"`
	Durability string `json:"durability"`
}

// parseIDs parses decimal ID strings, failing the test on a bad one.
func parseIDs(tb testing.TB, ids []string) []int64 {
	tb.Helper()
	out := make([]int64, len(ids))
	for i, s := range ids {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("ID %d: %q is not a decimal int64: %v", i, s, err)
		}
		out[i] = v
	}
	return out
}

// checkRanges checks that ranges list exactly ids, in order.
func checkRanges(tb testing.TB, ids []int64, ranges []rangeJSON) {
	tb.Helper()
	k := 0
	for _, r := range ranges {
		first, err1 := strconv.ParseInt(r.First, 10, 64)
		last, err2 := strconv.ParseInt(r.Last, 10, 64)
		if err1 != nil || err2 != nil || first > last {
			tb.Fatalf("range %+v is malformed", r)
		}
		for id := first; id <= last; id++ {
			if k >= len(ids) || ids[k] != id {
				tb.Fatalf("ranges %+v do not match the IDs %v at position %d", ranges, ids, k)
			}
			k++
		}
	}
	if k != len(ids) {
		tb.Fatalf("ranges %+v cover %d IDs, want %d", ranges, k, len(ids))
	}
}

func TestHappyPaths(t *testing.T) {
	testserver.Parallel(t, testserver.Dialects, testHappyPaths)
}

func testHappyPaths(t *testing.T, dialect string) {
	e := newEnv(t, envOptions{dialect: dialect, token: testToken})
	st := e.keeper.Status()
	layout := e.keeper.Layout()

	t.Run("healthz", func(t *testing.T) {
		rec := e.do("GET", "/healthz", "")
		wantStatus(t, rec, 200)
		if got, want := strings.TrimSpace(rec.Body.String()), `{"status":"ok"}`; got != want {
			t.Errorf("body: got %s, want %s", got, want)
		}
	})

	t.Run("readyz", func(t *testing.T) {
		// The node has an admin token: the holder and fencing version
		// are shown to a request bearing it.
		var r readyResponse
		rec := e.admin("GET", "/readyz", "")
		wantStatus(t, rec, 200)
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if !r.Ready || r.Reason != "" || r.Lease == nil || !r.Database.Reachable || r.Database.Error != "" || r.Durability != "ok" {
			t.Fatalf("readyz: got %+v, want ready with a lease, a reachable database and durability ok", r)
		}
		if r.Lease.Worker != st.Lease.WorkerID || r.Lease.FencingVersion != st.Lease.FencingVersion ||
			r.Lease.Holder != e.keeper.Holder() || r.Lease.ValidForMS <= 0 {
			t.Errorf("readyz lease: got %+v, want worker %d, fencing version %d, holder %q, valid_for_ms > 0",
				*r.Lease, st.Lease.WorkerID, st.Lease.FencingVersion, e.keeper.Holder())
		}
		// Without it, the same lease without them.
		r = getOK[readyResponse](t, e, "/readyz")
		if !r.Ready || r.Lease == nil || r.Lease.Worker != st.Lease.WorkerID || r.Lease.ValidForMS <= 0 ||
			r.Lease.FencingVersion != 0 || r.Lease.Holder != "" {
			t.Errorf("readyz without a token: got lease %+v, want worker %d and valid_for_ms without holder and fencing version", r.Lease, st.Lease.WorkerID)
		}
	})

	var oneID string
	t.Run("ids default count", func(t *testing.T) {
		rec := e.do("GET", "/ids", "")
		wantStatus(t, rec, 200)
		if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control: got %q, want no-store", cc)
		}
		var r idsResponse
		decode(t, rec, &r)
		if len(r.IDs) != 1 || r.Source != "snowflake" || r.Namespace != "" || r.Ranges != nil || r.Explain != nil {
			t.Fatalf("got %+v, want one Snowflake ID and nothing else", r)
		}
		oneID = r.IDs[0]
	})

	t.Run("ids count 1000", func(t *testing.T) {
		r := getOK[idsResponse](t, e, "/ids?count=1000")
		ids := parseIDs(t, r.IDs)
		if len(ids) != 1000 || r.Source != "snowflake" {
			t.Fatalf("got %d IDs from %q, want 1000 from snowflake", len(ids), r.Source)
		}
		first, _ := strconv.ParseInt(oneID, 10, 64)
		prev := first
		for i, id := range ids {
			if id <= prev {
				t.Fatalf("ID %d = %d not above the one before (%d)", i, id, prev)
			}
			prev = id
			if p := layout.Decompose(snowflake.ID(id)); p.Worker != st.Lease.WorkerID || p.Datacenter != st.Lease.DatacenterID {
				t.Fatalf("ID %d = %d has datacenter %d worker %d, want %d/%d", i, id, p.Datacenter, p.Worker, st.Lease.DatacenterID, st.Lease.WorkerID)
			}
		}
	})

	var explained explainJSON
	t.Run("ids explain", func(t *testing.T) {
		r := getOK[idsResponse](t, e, "/ids?count=3&explain=true")
		if len(r.IDs) != 3 || len(r.Explain) != 3 {
			t.Fatalf("got %d IDs and %d explanations, want 3 and 3", len(r.IDs), len(r.Explain))
		}
		for i, x := range r.Explain {
			checkExplain(t, layout, r.IDs[i], x)
		}
		explained = r.Explain[2]
	})

	t.Run("parse id", func(t *testing.T) {
		x := getOK[parseJSON](t, e, "/ids/"+explained.ID)
		if x.explainJSON != explained {
			t.Errorf("GET /ids/%s: got %+v, want %+v", explained.ID, x.explainJSON, explained)
		}
		if x.Forms.Decimal != explained.ID {
			t.Errorf("GET /ids/%s: got decimal form %q, want the ID", explained.ID, x.Forms.Decimal)
		}
		for _, form := range []string{x.Forms.Base32, x.Forms.Base62, x.Forms.Hex} {
			if y := getOK[parseJSON](t, e, "/ids/"+form); y != x {
				t.Errorf("GET /ids/%s: got %+v, want %+v as for its decimal form", form, y, x)
			}
		}
	})

	t.Run("admin create namespace", func(t *testing.T) {
		rec := e.admin("POST", "/admin/namespaces", `{"name":"orders","start":"1000","step":50,"description":"order numbers"}`)
		wantStatus(t, rec, 201)
		if loc := rec.Header().Get("Location"); loc != "/admin/namespaces/orders" {
			t.Errorf("Location: got %q, want /admin/namespaces/orders", loc)
		}
		var ns httpapi.NamespaceJSON
		decode(t, rec, &ns)
		if ns.Name != "orders" || ns.MaxID != "999" || ns.Step != 50 || ns.MinStep != 50 || ns.MaxStep != 5000 ||
			ns.Mode != "buffered" || ns.Fallback != "none" || ns.Description != "order numbers" ||
			ns.CreatedAt == nil || ns.UpdatedAt == nil || ns.Buffer != nil {
			t.Errorf("created: got %+v, want orders max_id 999 step 50 (50-5000) buffered none, times set, no buffer", ns)
		}
	})

	var lastSegmentID int64
	t.Run("ids namespace", func(t *testing.T) {
		r := getOK[idsResponse](t, e, "/ids?count=5&namespace=orders")
		ids := parseIDs(t, r.IDs)
		if r.Namespace != "orders" || r.Source != "segment" || r.Explain != nil {
			t.Fatalf("got namespace %q source %q, want orders from segment", r.Namespace, r.Source)
		}
		want := []int64{1000, 1001, 1002, 1003, 1004}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("IDs: got %v, want %v", ids, want)
		}
		checkRanges(t, ids, r.Ranges)

		// A batch larger than a range spans range switches.
		r = getOK[idsResponse](t, e, "/ids?namespace=orders&count=120")
		ids = parseIDs(t, r.IDs)
		if len(ids) != 120 || ids[0] != 1005 {
			t.Fatalf("got %d IDs starting at %v, want 120 starting at 1005", len(ids), ids[:min(1, len(ids))])
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("IDs not increasing at %d: %d after %d", i, ids[i], ids[i-1])
			}
		}
		checkRanges(t, ids, r.Ranges)
		lastSegmentID = ids[len(ids)-1]
	})

	t.Run("admin namespaces", func(t *testing.T) {
		list := adminList[httpapi.NamespaceJSON](t, e, "/admin/namespaces", "namespaces")
		if len(list) != 1 || list[0].Name != "orders" {
			t.Fatalf("got %+v, want the one namespace orders", list)
		}
		ns := list[0]
		maxID, _ := strconv.ParseInt(ns.MaxID, 10, 64)

		rec := e.admin("GET", "/admin/namespaces/orders", "")
		wantStatus(t, rec, 200)
		var one httpapi.NamespaceJSON
		decode(t, rec, &one)
		// A background fetch may advance max_id in between.
		oneMax, err := strconv.ParseInt(one.MaxID, 10, 64)
		if one.Name != "orders" || err != nil || oneMax < maxID {
			t.Errorf("GET /admin/namespaces/orders: got %+v, want orders with max_id >= %d", one, maxID)
		}
		// The listing read the row before this node's buffers, so a
		// background fetch that finished in between shows in the runway
		// but not in its max_id: bound the runway by the later max_id.
		if ns.Buffer == nil || ns.Buffer.Fetches < 1 || ns.Buffer.Runway < 0 || ns.Buffer.Runway > oneMax-lastSegmentID {
			t.Errorf("orders: got %+v (buffer %+v), want fetches >= 1 and 0 <= runway <= max_id %d - %d", ns, ns.Buffer, oneMax, lastSegmentID)
		}
	})

	t.Run("admin patch namespace", func(t *testing.T) {
		rec := e.admin("PATCH", "/admin/namespaces/orders",
			`{"step":200,"max_step":10000,"mode":"strict","fallback":"snowflake","description":"changed"}`)
		wantStatus(t, rec, 200)
		var ns httpapi.NamespaceJSON
		decode(t, rec, &ns)
		if ns.Step != 200 || ns.MinStep != 50 || ns.MaxStep != 10000 || ns.Mode != "strict" || ns.Fallback != "snowflake" || ns.Description != "changed" {
			t.Errorf("patched: got %+v, want step 200 (50-10000) strict snowflake changed", ns)
		}
		// Turning the fallback on set the counter's limit below the
		// Snowflake IDs of now.
		limit := int64(-1)
		if ns.MaxIDLimit != nil {
			limit, _ = strconv.ParseInt(*ns.MaxIDLimit, 10, 64)
		}
		maxID, _ := strconv.ParseInt(ns.MaxID, 10, 64)
		if smallest := e.keeper.SmallestIDNow(); limit <= maxID || limit >= smallest {
			t.Errorf("patched: max_id_limit %v, want one between max_id %d and the smallest Snowflake ID now %d", ns.MaxIDLimit, maxID, smallest)
		}
	})

	t.Run("admin leases", func(t *testing.T) {
		list := adminList[httpapi.LeaseJSON](t, e, "/admin/leases", "leases")
		found := false
		for _, l := range list {
			if l.Holder != nil && *l.Holder == e.keeper.Holder() {
				found = true
				if l.Worker != st.Lease.WorkerID || l.FencingVersion != st.Lease.FencingVersion ||
					l.AcquiredAt == nil || l.ExpiresAt == nil || l.ReleasedAt != nil || l.CeilingMS <= 0 ||
					l.Owner != nil || l.FloorMS < 1 || l.FloorMS > l.CeilingMS {
					t.Errorf("our lease: got %+v, want worker %d, fencing version %d, acquired, expiring, not released, no owner, a floor below a ceiling",
						l, st.Lease.WorkerID, st.Lease.FencingVersion)
				}
			}
		}
		if !found {
			t.Errorf("leases %+v hold no row of holder %q", list, e.keeper.Holder())
		}
	})

	t.Run("status page", func(t *testing.T) {
		rec := e.admin("GET", "/", "")
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=UTF-8" {
			t.Fatalf("GET /: got %d %q, want 200 text/html", rec.Code, rec.Header().Get("Content-Type"))
		}
		body := rec.Body.String()
		for _, want := range []string{
			`id="lease"`, `id="leases"`, `id="namespaces"`, `data-namespace="orders"`,
			`<dd class="holder">` + e.keeper.Holder() + `</dd>`,
			`<dd class="worker">` + strconv.FormatInt(st.Lease.WorkerID, 10) + `</dd>`,
			`<dd class="fencing-version">` + strconv.FormatInt(st.Lease.FencingVersion, 10) + `</dd>`,
			`class="mine"`, "changed", "test-version",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("status page with the admin token lacks %q", want)
			}
		}
		// Without the token: this node's lease, without its holder and
		// fencing version, and neither the lease table nor the
		// namespaces.
		body = e.do("GET", "/", "").Body.String()
		for _, want := range []string{`id="lease"`, `<dd class="worker">`, `id="leases-hidden"`, `id="namespaces-hidden"`, "test-version"} {
			if !strings.Contains(body, want) {
				t.Errorf("status page without a token lacks %q", want)
			}
		}
		for _, unwanted := range []string{e.keeper.Holder(), `class="fencing-version"`, `id="leases"`, `data-namespace="orders"`, "changed"} {
			if strings.Contains(body, unwanted) {
				t.Errorf("status page without a token shows %q", unwanted)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		rec := e.do("GET", "/metrics", "")
		if rec.Code != 200 {
			t.Fatalf("GET /metrics: got %d, want 200", rec.Code)
		}
		body := rec.Body.String()
		for _, want := range []string{
			`idgen_ids_issued_total{source="snowflake"} 1004`,
			`idgen_ids_issued_total{source="segment"} 125`,
			`idgen_ids_issued_total{source="fallback"} 0`,
			`idgen_http_request_duration_seconds_count{code="200",method="GET",route="/ids"} 5`,
			`idgen_http_request_duration_seconds_count{code="200",method="GET",route="/ids/:id"} 4`, // its decimal, base32, base62 and hex forms
			`idgen_lease_held 1`,
			`idgen_ready 1`,
			`idgen_lease_fencing_version ` + strconv.FormatInt(st.Lease.FencingVersion, 10),
			`idgen_lease_age_seconds `,
			`idgen_lease_valid_seconds `,
			`idgen_lease_claims_total 1`,
			`idgen_lease_lost_total 0`,
			`idgen_clock_offset_seconds `,
			`idgen_database_up 1`,
			`idgen_segment_runway{namespace="orders"} `,
			`idgen_segment_step{namespace="orders"} `,
			`idgen_segment_fetches_total{namespace="orders"} `,
			`idgen_segment_fetch_errors_total{namespace="orders"} 0`,
			`idgen_segment_last_fetch_seconds{namespace="orders"} `,
			`idgen_segment_fallback_ids_total{namespace="orders"} 0`,
			`idgen_build_info{version="test-version"} 1`,
			`go_goroutines `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if dialect != "sqlite" && !strings.Contains(body, "idgen_store_serialization_retries_total ") {
			t.Errorf("metrics lack idgen_store_serialization_retries_total for %s", dialect)
		}
	})
}

// checkExplain checks an explanation against the ID it explains.
func checkExplain(tb testing.TB, layout snowflake.Layout, id string, x explainJSON) {
	tb.Helper()
	parsed, err := snowflake.ParseID(id)
	if err != nil || x.ID != id {
		tb.Fatalf("explanation of %q is for %q (%v)", id, x.ID, err)
	}
	p := layout.Decompose(parsed)
	tm, err := time.Parse(time.RFC3339Nano, x.Time)
	if err != nil || !strings.HasSuffix(x.Time, "Z") {
		tb.Fatalf("time %q: not RFC 3339 in UTC: %v", x.Time, err)
	}
	if x.TimestampMS != p.Time.UnixMilli() || !tm.Equal(p.Time) || x.Datacenter != p.Datacenter || x.Worker != p.Worker || x.Sequence != p.Sequence {
		tb.Fatalf("explanation of %s: got %+v, want %+v", id, x, p)
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	var got []string
	for _, r := range e.srv.Routes() {
		got = append(got, r.Method+" "+r.Path)
	}
	want := []string{
		"GET /", "GET /admin/audit/who/:id", "GET /admin/lease-events", "GET /admin/leases", "POST /admin/leases/:datacenter/:worker/evict",
		"GET /admin/namespaces", "POST /admin/namespaces",
		"DELETE /admin/namespaces/:name", "GET /admin/namespaces/:name", "PATCH /admin/namespaces/:name",
		"GET /api/segment/get/:key", "GET /api/snowflake/get/:key", "POST /api/v1/id", "GET /api/v1/ids",
		"GET /healthz", "GET /ids", "GET /ids/:id", "GET /ids/compose", "GET /metrics", "GET /readyz",
		"GET /tinyid/id/nextId", "POST /tinyid/id/nextId", "GET /tinyid/id/nextIdSimple", "POST /tinyid/id/nextIdSimple",
		"POST /v1/leases", "POST /v1/leases/:datacenter/:worker/heartbeat", "POST /v1/leases/:datacenter/:worker/release",
		"GET /v1/leases/layout",
		"GET /v1/sequences", "POST /v1/sequences", "GET /v1/sequences/:name", "GET /v1/sequences/:name/ledger",
		"GET /v1/sequences/:name/ledger.csv", "POST /v1/sequences/:name/reservations",
		"POST /v1/sequences/:name/reservations/:id/confirm", "POST /v1/sequences/:name/reservations/:id/void",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Routes():\ngot  %q\nwant %q", got, want)
	}
}

func TestEchoErrorsAreProblems(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := e.do("GET", "/no/such/route", "")
	wantStatus(t, rec, http.StatusNotFound)
	rec = e.do("POST", "/ids", "")
	wantStatus(t, rec, http.StatusMethodNotAllowed)
	if allow := rec.Header().Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow: got %q, want it to list GET", allow)
	}
	rec = e.do("HEAD", "/no/such/route", "")
	if rec.Code != http.StatusNotFound || rec.Body.Len() != 0 {
		t.Errorf("HEAD of an unknown route: got %d with %d body bytes, want 404 and no body", rec.Code, rec.Body.Len())
	}
}
