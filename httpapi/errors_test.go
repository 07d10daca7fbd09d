package httpapi_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

func TestBadInputs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createNamespace(allocator.Namespace{Name: "orders"})

	for _, tc := range []struct {
		name   string
		target string
		want   int
	}{
		{"count zero", "/ids?count=0", 400},
		{"count negative", "/ids?count=-1", 400},
		{"count exponent", "/ids?count=1e3", 400},
		{"count above max", "/ids?count=10001", 400},
		{"count huge", "/ids?count=99999999999999999999", 400},
		{"count not a number", "/ids?count=abc", 400},
		{"count empty", "/ids?count=", 400},
		{"count without value", "/ids?count", 400},
		{"count plus sign", "/ids?count=+1", 400},
		{"count decimal", "/ids?count=1.5", 400},
		{"count twice", "/ids?count=1&count=2", 400},
		{"count bad escape", "/ids?count=%zz", 400},
		{"unknown parameter", "/ids?foo=1", 400},
		{"unknown parameter with count", "/ids?count=1&limit=5", 400},
		{"semicolon separator", "/ids?count=1;explain=true", 400},
		{"namespace with space", "/ids?namespace=Bad%20Name", 400},
		{"namespace injection", "/ids?namespace=x%3BDROP%20TABLE%20segments", 400},
		{"namespace raw injection", "/ids?namespace=x;DROP%20TABLE%20segments", 400},
		{"namespace upper case", "/ids?namespace=Orders", 400},
		{"namespace empty", "/ids?namespace=", 400},
		{"namespace too long", "/ids?namespace=" + strings.Repeat("a", 65), 400},
		{"namespace twice", "/ids?namespace=orders&namespace=orders", 400},
		{"namespace unknown", "/ids?namespace=absent", 404},
		{"namespace unknown with count", "/ids?namespace=absent&count=3", 404},
		{"namespace bad count", "/ids?namespace=orders&count=0", 400},
		{"explain maybe", "/ids?explain=maybe", 400},
		{"explain 1", "/ids?explain=1", 400},
		{"explain empty", "/ids?explain=", 400},
		{"explain twice", "/ids?explain=true&explain=true", 400},
		{"explain with namespace", "/ids?namespace=orders&explain=true", 400},
		{"id not a number", "/ids/abc", 400},
		{"id negative", "/ids/-1", 400},
		{"id overflow", "/ids/9223372036854775808", 400},
		{"id decimal", "/ids/1.5", 400},
		{"id empty", "/ids/", 404},
		{"id with spaces", "/ids/%201", 400},
		{"unknown route", "/nope", 404},
		{"id with a slash", "/ids/1/2", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do("GET", tc.target, "")
			wantStatus(t, rec, tc.want)
		})
	}

	// Limits that are not errors.
	for _, tc := range []struct {
		target string
		n      int
	}{
		{"/ids?count=%31%30", 10},
		{"/ids?count=10000", 10000},
		{"/ids?count=007&&", 7},
		{"/ids?explain=false&count=2", 2},
		{"/ids?namespace=orders&count=3", 3},
	} {
		r := getOK[idsResponse](t, e, tc.target)
		if len(r.IDs) != tc.n {
			t.Errorf("GET %s: got %d IDs, want %d", tc.target, len(r.IDs), tc.n)
		}
	}
}

func TestMaxCountConfigured(t *testing.T) {
	e := newEnv(t, envOptions{maxCount: 5})
	wantStatus(t, e.do("GET", "/ids?count=5", ""), 200)
	rec := e.do("GET", "/ids?count=6", "")
	wantStatus(t, rec, 400)
	if !strings.Contains(rec.Body.String(), "from 1 to 5") {
		t.Errorf("detail %s does not name the limit 5", rec.Body.String())
	}
}

func TestAdminAuth(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{token: testToken, logBuffer: logs})
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no header", nil, 401},
		{"basic scheme", []string{"Authorization", "Basic dXNlcjpwYXNz"}, 401},
		{"scheme only", []string{"Authorization", "Bearer"}, 401},
		{"empty token", []string{"Authorization", "Bearer "}, 401},
		{"two words", []string{"Authorization", "Bearer a b"}, 401},
		{"two headers", []string{"Authorization", "Bearer " + testToken, "Authorization", "Bearer " + testToken}, 401},
		{"wrong token", []string{"Authorization", "Bearer wrong"}, 403},
		{"token prefix", []string{"Authorization", "Bearer " + testToken[:len(testToken)-1]}, 403},
		{"token longer", []string{"Authorization", "Bearer " + testToken + "x"}, 403},
		{"right token", []string{"Authorization", "Bearer " + testToken}, 200},
		{"scheme case-insensitive", []string{"Authorization", "bearer " + testToken}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, target := range []string{"/admin/leases", "/admin/namespaces"} {
				rec := e.do("GET", target, "", tc.headers...)
				wantStatus(t, rec, tc.want)
				if wa := rec.Header().Get("WWW-Authenticate"); (tc.want == 401) != strings.HasPrefix(wa, "Bearer") {
					t.Errorf("GET %s: WWW-Authenticate %q with status %d; want a Bearer challenge exactly on 401", target, wa, tc.want)
				}
				if strings.Contains(rec.Body.String(), testToken) {
					t.Errorf("GET %s: the body holds the admin token", target)
				}
			}
		})
	}
	// Unknown admin routes are also behind the token.
	wantStatus(t, e.do("GET", "/admin/nope", ""), 401)
	wantStatus(t, e.admin("GET", "/admin/nope", ""), 404)
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("the log holds the admin token:\n%s", logs.String())
	}
}

func TestAdminDisabled(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/admin/leases", ""},
		{"GET", "/admin/namespaces", ""},
		{"GET", "/admin/namespaces/orders", ""},
		{"POST", "/admin/namespaces", `{"name":"orders"}`},
		{"PATCH", "/admin/namespaces/orders", `{"step":10}`},
		{"GET", "/admin/nope", ""},
	} {
		wantStatus(t, e.admin(tc.method, tc.target, tc.body), 404)
		wantStatus(t, e.do(tc.method, tc.target, tc.body), 404)
	}
	if _, err := e.store.GetNamespace(context.Background(), "orders"); err == nil {
		t.Errorf("a disabled admin API created a namespace")
	}
}

func TestAdminValidation(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken})
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"bad name", `{"name":"Bad Name"}`, 400},
		{"injection name", `{"name":"x;DROP TABLE segments"}`, 400},
		{"missing name", `{"step":10}`, 400},
		{"step zero", `{"name":"a","step":0}`, 400},
		{"step negative", `{"name":"a","step":-5}`, 400},
		{"min above step", `{"name":"a","step":10,"min_step":20}`, 400},
		{"max below step", `{"name":"a","step":10,"max_step":5}`, 400},
		{"step above limit", `{"name":"a","step":2000000000}`, 400},
		{"step as string", `{"name":"a","step":"10"}`, 400},
		{"step fraction", `{"name":"a","step":1.5}`, 400},
		{"unknown mode", `{"name":"a","mode":"fast"}`, 400},
		{"unknown fallback", `{"name":"a","fallback":"uuid"}`, 400},
		{"start zero", `{"name":"a","start":0}`, 400},
		{"start negative", `{"name":"a","start":"-3"}`, 400},
		{"start not a number", `{"name":"a","start":"abc"}`, 400},
		{"start overflow", `{"name":"a","start":"9223372036854775808"}`, 400},
		{"description too long", `{"name":"a","description":"` + strings.Repeat("x", 1025) + `"}`, 400},
		{"unknown field", `{"name":"a","colour":"red"}`, 400},
		{"malformed JSON", `{"name":"a"`, 400},
		{"not an object", `["a"]`, 400},
		{"two values", `{"name":"a"}{"name":"b"}`, 400},
		{"null", `null`, 400},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			wantStatus(t, e.admin("POST", "/admin/namespaces", tc.body), tc.want)
		})
	}
	t.Run("create empty body", func(t *testing.T) {
		wantStatus(t, e.do("POST", "/admin/namespaces", "", "Authorization", "Bearer "+testToken), 400)
	})
	t.Run("create wrong content type", func(t *testing.T) {
		wantStatus(t, e.do("POST", "/admin/namespaces", `{"name":"a"}`, "Authorization", "Bearer "+testToken, "Content-Type", "text/plain"), 400)
	})
	if list, err := e.store.ListNamespaces(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("after invalid creates: namespaces %v (%v), want none", list, err)
	}

	t.Run("create defaults and duplicate", func(t *testing.T) {
		rec := e.admin("POST", "/admin/namespaces", `{"name":"dup"}`)
		wantStatus(t, rec, 201)
		var ns httpapi.NamespaceJSON
		decode(t, rec, &ns)
		if ns.MaxID != "0" || ns.Step != 1000 || ns.MinStep != 1000 || ns.MaxStep != 100000 || ns.Mode != "buffered" || ns.Fallback != "none" {
			t.Errorf("defaults: got %+v, want max_id 0, step 1000 (1000-100000), buffered, none", ns)
		}
		wantStatus(t, e.admin("POST", "/admin/namespaces", `{"name":"dup","step":5}`), 409)
	})
	t.Run("create clamps the default step", func(t *testing.T) {
		rec := e.admin("POST", "/admin/namespaces", `{"name":"small","max_step":10,"start":42}`)
		wantStatus(t, rec, 201)
		var ns httpapi.NamespaceJSON
		decode(t, rec, &ns)
		if ns.MaxID != "41" || ns.Step != 10 || ns.MinStep != 10 || ns.MaxStep != 10 {
			t.Errorf("got %+v, want max_id 41 and step 10 (10-10)", ns)
		}
	})

	for _, tc := range []struct {
		name, target, body string
		want               int
	}{
		{"nothing to change", "/admin/namespaces/dup", `{}`, 400},
		{"step zero", "/admin/namespaces/dup", `{"step":0}`, 400},
		{"min above step", "/admin/namespaces/dup", `{"min_step":5000}`, 400},
		{"max below step", "/admin/namespaces/dup", `{"max_step":10}`, 400},
		{"unknown mode", "/admin/namespaces/dup", `{"mode":"x"}`, 400},
		{"unknown fallback", "/admin/namespaces/dup", `{"fallback":"x"}`, 400},
		{"rename", "/admin/namespaces/dup", `{"name":"other"}`, 400},
		{"max_id", "/admin/namespaces/dup", `{"max_id":"5"}`, 400},
		{"malformed", "/admin/namespaces/dup", `{"step":`, 400},
		{"bad name", "/admin/namespaces/Bad%20Name", `{"step":10}`, 400},
		{"unknown namespace", "/admin/namespaces/absent", `{"step":1000}`, 404},
		{"ok", "/admin/namespaces/dup", `{"min_step":10,"step":10,"mode":"strict"}`, 200},
	} {
		t.Run("patch "+tc.name, func(t *testing.T) {
			wantStatus(t, e.admin("PATCH", tc.target, tc.body), tc.want)
		})
	}
	ns, err := e.store.GetNamespace(context.Background(), "dup")
	if err != nil || ns.Step != 10 || ns.MinStep != 10 || ns.MaxStep != 100000 || ns.Mode != allocator.ModeStrict {
		t.Errorf("after the patches: got %+v (%v), want step 10 (10-100000) strict", ns, err)
	}

	wantStatus(t, e.admin("GET", "/admin/namespaces/absent", ""), 404)
	wantStatus(t, e.admin("GET", "/admin/namespaces/BAD", ""), 400)
}

func TestUnavailableWithoutLease(t *testing.T) {
	// Another holder holds the node's one worker ID: the node claims no
	// lease until it is released.
	store := testserver.OpenStore(t, "sqlite")
	release := testserver.HoldWorker(t, store, 2)
	e := newEnv(t, envOptions{store: store, workers: &allocator.WorkerRange{Min: 2, Max: 2}, keeperTTL: 3 * time.Second, noWait: true})
	e.createNamespace(allocator.Namespace{Name: "orders"})

	for _, target := range []string{"/ids", "/ids?count=10", "/ids?count=2&explain=true"} {
		rec := e.do("GET", target, "")
		wantStatus(t, rec, 503)
		checkRetryAfter(t, rec.Header().Get("Retry-After"))
	}
	rec := e.do("GET", "/readyz", "")
	if rec.Code != 503 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("readyz without a lease: got %d %q, want 503 application/json", rec.Code, rec.Header().Get("Content-Type"))
	}
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
	var r readyResponse
	decode(t, rec, &r)
	if r.Ready || r.Reason == "" || r.Lease != nil || !r.Database.Reachable {
		t.Errorf("readyz without a lease: got %+v, want not ready, a reason, no lease, database reachable", r)
	}
	// Segments do not need the lease.
	wantStatus(t, e.do("GET", "/ids?namespace=orders", ""), 200)
	// Health is not readiness.
	wantStatus(t, e.do("GET", "/healthz", ""), 200)
	if body := e.do("GET", "/metrics", "").Body.String(); !strings.Contains(body, "idgen_lease_held 0\n") || !strings.Contains(body, "idgen_ready 0\n") {
		t.Errorf("metrics without a lease lack idgen_lease_held 0 and idgen_ready 0")
	}
	if body := e.do("GET", "/", "").Body.String(); !strings.Contains(body, `class="bad no-lease"`) {
		t.Errorf("status page without a lease does not say so")
	}

	release()
	e.waitReady()
	rec = e.do("GET", "/readyz", "")
	wantStatus(t, rec, 200)
	wantStatus(t, e.do("GET", "/ids", ""), 200)
}

func TestUnavailableWhilePoolHeldByAnother(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	one := &allocator.WorkerRange{Min: 3, Max: 3}
	a := newEnv(t, envOptions{store: store, workers: one, holder: "node-a"})
	b := newEnv(t, envOptions{store: store, workers: one, holder: "node-b", noWait: true})

	wantStatus(t, a.do("GET", "/ids", ""), 200)
	rec := b.do("GET", "/ids?count=5", "")
	wantStatus(t, rec, 503)
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
	if rec := b.do("GET", "/readyz", ""); rec.Code != 503 {
		t.Errorf("readyz of the node without a lease: got %d, want 503", rec.Code)
	}
	// The lease table on b's status page shows a's lease.
	if body := b.do("GET", "/", "").Body.String(); !strings.Contains(body, "node-a") || strings.Contains(body, `class="mine"`) {
		t.Errorf("status page of node-b: want node-a's lease listed and none marked as its own")
	}
}

// checkRetryAfter checks a Retry-After header: whole seconds, at least 1.
func checkRetryAfter(tb testing.TB, v string) {
	tb.Helper()
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Errorf("Retry-After: got %q, want whole seconds >= 1", v)
	}
}

func TestNamespaceFallback(t *testing.T) {
	e := newEnv(t, envOptions{store: failingSegments{testserver.OpenStore(t, "sqlite")}})
	fb := e.createNamespace(allocator.Namespace{Name: "fb", Fallback: allocator.FallbackSnowflake, MaxID: 5000})
	e.createNamespace(allocator.Namespace{Name: "nofb"})

	r := getOK[idsResponse](t, e, "/ids?namespace=fb&count=3")
	ids := parseIDs(t, r.IDs)
	if r.Source != "snowflake" || r.Namespace != "fb" || len(ids) != 3 {
		t.Fatalf("got %+v, want 3 IDs of fb marked source snowflake", r)
	}
	checkRanges(t, ids, r.Ranges)
	st := e.keeper.Status()
	if want := (fencingLease{st.Lease.DatacenterID, st.Lease.WorkerID, st.Lease.FencingVersion}); r.Lease == nil || *r.Lease != want || r.Revision != 0 {
		t.Errorf("fallback answer: lease %+v, revision %d; want the node's lease %+v and no revision", r.Lease, r.Revision, want)
	}
	for _, id := range ids {
		if id <= fb.MaxID {
			t.Errorf("fallback ID %d not above max_id %d", id, fb.MaxID)
		}
		if p := e.keeper.Layout().Decompose(snowflake.ID(id)); p.Worker != st.Lease.WorkerID {
			t.Errorf("fallback ID %d has worker %d, want this node's %d", id, p.Worker, st.Lease.WorkerID)
		}
	}

	rec := e.do("GET", "/ids?namespace=nofb", "")
	wantStatus(t, rec, 503)
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
	if strings.Contains(rec.Body.String(), "\"source\"") {
		t.Errorf("503 body holds IDs: %s", rec.Body.String())
	}

	body := e.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`idgen_ids_issued_total{source="fallback"} 3`,
		`idgen_ids_issued_total{source="segment"} 0`,
		`idgen_segment_fallback_ids_total{namespace="fb"} 3`,
		`idgen_segment_failing{namespace="fb"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code := e.do("GET", "/readyz", "").Code; code != http.StatusOK {
		t.Errorf("readyz while segment fetches fail: got %d, want 200 (the lease decides)", code)
	}
}

// TestNamespaceExhausted draws the last IDs below 2^63: they all come out,
// and then the namespace answers 409 with its own problem code, whose
// detail says it is exhausted; nothing suggests retrying.
func TestNamespaceExhausted(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createNamespace(allocator.Namespace{Name: "top", MaxID: math.MaxInt64 - 3, Step: 2})

	r := getOK[idsResponse](t, e, "/ids?namespace=top&count=3")
	if ids := parseIDs(t, r.IDs); len(ids) != 3 || ids[0] != math.MaxInt64-2 || ids[2] != math.MaxInt64 {
		t.Fatalf("the last 3 IDs: got %v, want %d..%d", ids, int64(math.MaxInt64-2), int64(math.MaxInt64))
	}

	for _, target := range []string{"/ids?namespace=top", "/ids?namespace=top&count=5"} {
		rec := e.do("GET", target, "")
		if rec.Code != http.StatusConflict {
			t.Fatalf("GET %s: status %d, want 409; body %s", target, rec.Code, rec.Body.String())
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("GET %s: Content-Type %q, want application/problem+json", target, ct)
		}
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			t.Errorf("GET %s: Retry-After %q, want none: waiting does not help", target, ra)
		}
		var p httpapi.Problem
		decode(t, rec, &p)
		if p.Code != "namespace_exhausted" || p.Type != "https://idgen.dev/problems/namespace_exhausted" || p.Status != 409 ||
			!strings.Contains(p.Detail, "exhausted") || !strings.Contains(p.Detail, `"top"`) {
			t.Errorf("GET %s: got %+v, want code namespace_exhausted, status 409, a detail naming the exhausted namespace", target, p)
		}
	}
}

// TestAdminFallbackLimit checks the admin API's side of the fallback
// limit: turning the Snowflake fallback on (at create or by PATCH) gives the
// namespace a max_id_limit below the smallest Snowflake ID of now, is
// refused for a counter not below it, and the limit then never changes.
func TestAdminFallbackLimit(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken})
	limitOf := func(ns httpapi.NamespaceJSON) int64 {
		t.Helper()
		if ns.MaxIDLimit == nil {
			t.Fatalf("namespace %s: no max_id_limit", ns.Name)
		}
		v, err := strconv.ParseInt(*ns.MaxIDLimit, 10, 64)
		if err != nil {
			t.Fatalf("namespace %s: max_id_limit %q: %v", ns.Name, *ns.MaxIDLimit, err)
		}
		return v
	}

	before := e.keeper.SmallestIDNow()
	rec := e.admin("POST", "/admin/namespaces", `{"name":"fb","fallback":"snowflake"}`)
	wantStatus(t, rec, 201)
	var fb httpapi.NamespaceJSON
	decode(t, rec, &fb)
	if limit := limitOf(fb); limit < before-1 || limit >= e.keeper.SmallestIDNow() {
		t.Errorf("created with the fallback: max_id_limit %d, want one below the smallest Snowflake ID of now (%d..)", limit, before)
	}
	limit := limitOf(fb)

	// The smallest Snowflake ID of a day from now: far above the counter
	// limit of any moment this test runs at.
	huge := strconv.FormatInt(int64(e.keeper.Layout().SmallestID(time.Now().Add(24*time.Hour))), 10)
	rec = e.admin("POST", "/admin/namespaces", `{"name":"high","fallback":"snowflake","start":"`+huge+`"}`)
	wantStatus(t, rec, 400)
	var p httpapi.Problem
	decode(t, rec, &p)
	if !strings.Contains(p.Detail, "fallback") || !strings.Contains(p.Detail, "smallest Snowflake ID") {
		t.Errorf("fallback with a counter above the Snowflake IDs: detail %q, want it to say why", p.Detail)
	}
	wantStatus(t, e.admin("GET", "/admin/namespaces/high", ""), 404)

	// A namespace without the fallback whose counter is too high cannot
	// switch to it; its row stays as it was.
	wantStatus(t, e.admin("POST", "/admin/namespaces", `{"name":"plain","start":"`+huge+`"}`), 201)
	wantStatus(t, e.admin("PATCH", "/admin/namespaces/plain", `{"fallback":"snowflake","description":"x"}`), 400)
	if ns, err := e.store.GetNamespace(context.Background(), "plain"); err != nil || ns.Fallback != allocator.FallbackNone || ns.MaxIDLimit != 0 || ns.Description != "" {
		t.Errorf("plain after a refused switch: got %+v, %v; want it unchanged", ns, err)
	}

	// Off and on again: the limit stays the one set first.
	for _, body := range []string{`{"fallback":"none"}`, `{"fallback":"snowflake"}`} {
		rec = e.admin("PATCH", "/admin/namespaces/fb", body)
		wantStatus(t, rec, 200)
		var ns httpapi.NamespaceJSON
		decode(t, rec, &ns)
		if got := limitOf(ns); got != limit {
			t.Errorf("PATCH %s: max_id_limit %d, want the first one, %d", body, got, limit)
		}
	}
}

// TestNamespaceErrorsInCallersWords: the refusals of a namespace (unknown,
// existing, exhausted, not servable now) say what failed in idgen's words,
// naming the namespace, on every route that draws or reads one; the
// store's own words ("sqlite: get namespace …", its connection error) go
// to the log only, as they do over gRPC.
func TestNamespaceErrorsInCallersWords(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{store: failingSegments{testserver.OpenStore(t, "sqlite")}, token: testToken, logBuffer: logs})
	e.createNamespace(allocator.Namespace{Name: "top", MaxID: math.MaxInt64, Step: 2})
	e.createNamespace(allocator.Namespace{Name: "down", Step: 10})

	for _, tc := range []struct {
		method, target, body string
		status               int
		detail               string
	}{
		{"GET", "/ids?namespace=nope", "", 404, `namespace "nope" does not exist`},
		{"GET", "/api/segment/get/nope", "", 404, `namespace "nope" does not exist`},
		{"GET", "/admin/namespaces/nope", "", 404, `namespace "nope" does not exist`},
		{"PATCH", "/admin/namespaces/nope", `{"step":20}`, 404, `namespace "nope" does not exist`},
		{"POST", "/admin/namespaces", `{"name":"top"}`, 409, `namespace "top" exists already`},
		{"GET", "/ids?namespace=top", "", 409, `namespace "top" is exhausted: fewer IDs are left below its limit than were asked for`},
		{"GET", "/ids?namespace=down", "", 503, `namespace "down" cannot be served now: retry later or call another node`},
		{"GET", "/api/segment/get/down", "", 503, `namespace "down" cannot be served now: retry later or call another node`},
	} {
		rec := e.admin(tc.method, tc.target, tc.body)
		wantStatus(t, rec, tc.status)
		p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
		if p.Detail != tc.detail {
			t.Errorf("%s %s: got detail %q, want %q", tc.method, tc.target, p.Detail, tc.detail)
		}
	}
	// tinyid's envelope carries the same words.
	rec := e.do("GET", "/tinyid/id/nextId?bizType=nope&token=x", "")
	if body := rec.Body.String(); rec.Code != 404 || !strings.Contains(body, `namespace \"nope\" does not exist`) || strings.Contains(body, "sqlite") {
		t.Errorf("tinyid nextId of an unknown namespace: got %d %s, want 404 saying it does not exist", rec.Code, body)
	}
	// The store's words are in the log, for the operator.
	for _, want := range []string{`msg="request refused" code=not_found route=/ids err="namespace \"nope\": sqlite: get namespace`,
		`msg="request refused" code=unavailable route=/ids err="unavailable: namespace \"down\": injected: database unreachable"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log: want %s, got\n%s", want, logs.String())
		}
	}
}
