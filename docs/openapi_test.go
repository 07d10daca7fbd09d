// Package docs_test checks docs/openapi.yaml against the real HTTP server:
// the routes the server registers and the operations the spec lists must be
// the same, and real answers must match the documented status codes, media
// types and schemas.
package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
)

const adminToken = "docs-test-token"

// spec is docs/openapi.yaml as generic YAML values.
type spec map[string]any

func loadSpec(t *testing.T) spec {
	t.Helper()
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Into a plain map: yaml.v3 would give nested mappings the named type.
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	s := spec(raw)
	v, _ := s["openapi"].(string)
	if !strings.HasPrefix(v, "3.1.") && !strings.HasPrefix(v, "3.0.") {
		t.Fatalf("openapi: %q, want 3.0.x or 3.1.x", v)
	}
	return s
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operations returns "METHOD /path" for every operation of the spec.
func (s spec) operations() []string {
	var out []string
	for path, item := range obj(s["paths"]) {
		for _, m := range httpMethods {
			if _, ok := obj(item)[m]; ok {
				out = append(out, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// resolve follows a local $ref ("#/components/…").
func (s spec) resolve(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	for i := 0; i < 16; i++ {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		if !strings.HasPrefix(ref, "#/") {
			t.Fatalf("$ref %q: only local references are used", ref)
		}
		var cur any = map[string]any(s)
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = obj(cur)[part]
		}
		if obj(cur) == nil {
			t.Fatalf("$ref %q resolves to nothing", ref)
		}
		v = obj(cur)
	}
	t.Fatal("$ref chain too long")
	return nil
}

var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// Secrets of the callers of the node with tokens.
const (
	idsSecret    = "docs-test-ids-secret"
	adminSecret  = "docs-test-admin-secret"
	leasesSecret = "docs-test-leases-secret"
)

// newServer starts an idgen node (internal/testserver) on a fresh SQLite
// store with a namespace "orders". With lease false another holder holds
// the node's only worker ID, so it answers 503 where a lease is needed.
// tokens is the content of its tokens file, "" for none.
func newServer(t *testing.T, lease bool, token string, tokens ...string) *testserver.Server {
	t.Helper()
	// The node claims worker 0 and the lease API grants 1-31.
	o := testserver.Options{AdminToken: token, Keeper: allocator.KeeperSettings{TTL: 5 * time.Second,
		WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0}}, Tokens: strings.Join(tokens, "\n")}
	if !lease {
		store := testserver.OpenStore(t, "sqlite")
		testserver.HoldWorker(t, store, 0) // for the whole test
		o.Store, o.Keeper.WorkerIDs, o.NoWait = store, &allocator.WorkerRange{Min: 0, Max: 0}, true
	}
	srv := testserver.MustStart(t, o)
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: new(int64(100)), MaxStep: new(int64(1000))})
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "receipts", Mode: new(allocator.ModeStrict)})
	return srv
}

// TestRoutesMatchSpec: every route the server registers is in the spec,
// and every operation of the spec is a route of the server.
func TestRoutesMatchSpec(t *testing.T) {
	s := loadSpec(t)
	srv := newServer(t, false, adminToken)
	var served []string
	for _, r := range srv.API().Routes() {
		served = append(served, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(served)
	served = slices.Compact(served)
	documented := s.operations()
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("the server serves %s, which docs/openapi.yaml does not document", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("docs/openapi.yaml documents %s, which the server does not serve", op)
		}
	}
	if len(served) == 0 {
		t.Fatal("the server registers no routes")
	}
}

// TestSpecIsConsistent: every $ref resolves, every operation has an
// operationId and responses, and every path parameter is declared.
func TestSpecIsConsistent(t *testing.T) {
	s := loadSpec(t)
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["$ref"]; ok {
				s.resolve(t, v)
			}
			for k, c := range v {
				walk(c, where+"/"+k)
			}
		case []any:
			for i, c := range v {
				walk(c, fmt.Sprintf("%s[%d]", where, i))
			}
		}
	}
	walk(map[string]any(s), "")

	ids := map[string]bool{}
	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	for path, item := range obj(s["paths"]) {
		for _, m := range httpMethods {
			op := obj(obj(item)[m])
			if op == nil {
				continue
			}
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s %s: operationId %q missing or not unique", m, path, id)
			}
			ids[id] = true
			if len(obj(op["responses"])) == 0 {
				t.Errorf("%s %s: no responses", m, path)
			}
			declared := map[string]bool{}
			for _, list := range []any{obj(item)["parameters"], op["parameters"]} {
				for _, p := range asList(list) {
					p := s.resolve(t, obj(p))
					if p["in"] == "path" {
						declared[p["name"].(string)] = true
					}
				}
			}
			for _, m2 := range paramRE.FindAllStringSubmatch(path, -1) {
				if !declared[m2[1]] {
					t.Errorf("%s %s: path parameter %s not declared", m, path, m2[1])
				}
			}
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// exchange is one request to a real server and the status it must get.
type exchange struct {
	name   string
	method string
	path   string // the request path and query
	op     string // the spec path it falls under
	body   string
	token  string // "" for none
	want   int
}

// TestResponsesMatchSpec sends real requests covering every operation and
// checks each answer's status, media type and body against the spec.
func TestResponsesMatchSpec(t *testing.T) {
	s := loadSpec(t)
	ts := newServer(t, true, adminToken)
	down := newServer(t, false, "") // no lease, no admin API
	withTokens := newServer(t, true, "",
		"docs-ids ids "+idgen.HashSecret(idsSecret),
		"docs-admin admin "+idgen.HashSecret(adminSecret),
		"docs-leases leases "+idgen.HashSecret(leasesSecret))
	// A lease of another holder, for the eviction.
	testserver.HoldWorker(t, ts.Store(), 5)

	// A real Snowflake ID to decompose.
	resp, err := http.Get(ts.URL + "/ids")
	if err != nil {
		t.Fatal(err)
	}
	var first struct{ IDs []string }
	err = json.NewDecoder(resp.Body).Decode(&first)
	_ = resp.Body.Close()
	if err != nil || len(first.IDs) != 1 {
		t.Fatalf("GET /ids: %v %v", err, first)
	}

	exchanges := []exchange{
		{"one Snowflake ID", "GET", "/ids", "/ids", "", "", 200},
		{"explained IDs", "GET", "/ids?count=3&explain=true", "/ids", "", "", 200},
		{"namespace IDs", "GET", "/ids?count=5&namespace=orders", "/ids", "", "", 200},
		{"strict namespace IDs", "GET", "/ids?count=2&namespace=receipts", "/ids", "", "", 200},
		{"count zero", "GET", "/ids?count=0", "/ids", "", "", 400},
		{"unknown parameter", "GET", "/ids?cnt=2", "/ids", "", "", 400},
		{"unknown namespace", "GET", "/ids?namespace=nope", "/ids", "", "", 404},
		{"decompose", "GET", "/ids/" + first.IDs[0], "/ids/{id}", "", "", 200},
		{"decompose garbage", "GET", "/ids/abc", "/ids/{id}", "", "", 400},
		{"base32 IDs", "GET", "/ids?count=2&format=base32", "/ids", "", "", 200},
		{"hex namespace IDs", "GET", "/ids?count=2&namespace=orders&format=hex", "/ids", "", "", 200},
		{"unknown format", "GET", "/ids?format=base64", "/ids", "", "", 400},
		{"decompose a hex form", "GET", "/ids/0000000000000001?format=hex", "/ids/{id}", "", "", 200},
		{"compose", "GET", "/ids/compose?time=2026-11-27T12:34:56.789Z", "/ids/compose", "", "", 200},
		{"compose base62", "GET", "/ids/compose?time=2026-11-27T12:34:56.789Z&format=base62", "/ids/compose", "", "", 200},
		{"compose before the epoch", "GET", "/ids/compose?time=2020-01-01T00:00:00Z", "/ids/compose", "", "", 400},
		{"health", "GET", "/healthz", "/healthz", "", "", 200},
		{"ready", "GET", "/readyz", "/readyz", "", "", 200},
		{"metrics", "GET", "/metrics", "/metrics", "", "", 200},
		{"status page", "GET", "/", "/", "", "", 200},
		{"leases", "GET", "/admin/leases", "/admin/leases", "", adminToken, 200},
		{"leases without token", "GET", "/admin/leases", "/admin/leases", "", "", 401},
		{"leases with wrong token", "GET", "/admin/leases", "/admin/leases", "", "wrong", 403},
		{"namespaces", "GET", "/admin/namespaces", "/admin/namespaces", "", adminToken, 200},
		{"create namespace", "POST", "/admin/namespaces", "/admin/namespaces", `{"name":"invoices","start":"100","step":10}`, adminToken, 201},
		{"create it again", "POST", "/admin/namespaces", "/admin/namespaces", `{"name":"invoices"}`, adminToken, 409},
		{"create with unknown field", "POST", "/admin/namespaces", "/admin/namespaces", `{"name":"x","colour":"red"}`, adminToken, 400},
		{"create too large", "POST", "/admin/namespaces", "/admin/namespaces", `{"name":"big","description":"` + strings.Repeat("x", 70<<10) + `"}`, adminToken, 413},
		{"used namespace", "GET", "/admin/namespaces/orders", "/admin/namespaces/{name}", "", adminToken, 200},
		{"unused namespace", "GET", "/admin/namespaces/invoices", "/admin/namespaces/{name}", "", adminToken, 200},
		{"missing namespace", "GET", "/admin/namespaces/nope", "/admin/namespaces/{name}", "", adminToken, 404},
		{"change namespace", "PATCH", "/admin/namespaces/orders", "/admin/namespaces/{name}", `{"step":200,"max_step":2000}`, adminToken, 200},
		{"change nothing", "PATCH", "/admin/namespaces/orders", "/admin/namespaces/{name}", `{}`, adminToken, 400},
		{"delete namespace", "DELETE", "/admin/namespaces/invoices", "/admin/namespaces/{name}", "", adminToken, 200},
		{"delete it again", "DELETE", "/admin/namespaces/invoices", "/admin/namespaces/{name}", "", adminToken, 404},
		{"delete bad name", "DELETE", "/admin/namespaces/No!", "/admin/namespaces/{name}", "", adminToken, 400},
		{"lease events", "GET", "/admin/lease-events?limit=1", "/admin/lease-events", "", adminToken, 200},
		{"lease events filtered", "GET", "/admin/lease-events?kind=acquire&datacenter=0&worker=5&since=2020-01-01T00:00:00Z", "/admin/lease-events", "", adminToken, 200},
		{"lease events bad kind", "GET", "/admin/lease-events?kind=stolen", "/admin/lease-events", "", adminToken, 400},
		{"lease events bad limit", "GET", "/admin/lease-events?limit=1001", "/admin/lease-events", "", adminToken, 400},
		{"lease events without token", "GET", "/admin/lease-events", "/admin/lease-events", "", "", 401},
		{"who issued an ID", "GET", "/admin/audit/who/" + first.IDs[0], "/admin/audit/who/{id}", "", adminToken, 200},
		{"who issued nothing", "GET", "/admin/audit/who/0000000000000001?format=hex", "/admin/audit/who/{id}", "", adminToken, 200},
		{"who of garbage", "GET", "/admin/audit/who/abc", "/admin/audit/who/{id}", "", adminToken, 400},
		{"evict", "POST", "/admin/leases/0/5/evict", "/admin/leases/{datacenter}/{worker}/evict", `{"reason":"docs test"}`, adminToken, 200},
		{"evict a free lease", "POST", "/admin/leases/0/5/evict", "/admin/leases/{datacenter}/{worker}/evict", `{"reason":"again"}`, adminToken, 409},
		{"evict beyond the layout", "POST", "/admin/leases/0/32/evict", "/admin/leases/{datacenter}/{worker}/evict", "", adminToken, 400},
		{"evict without token", "POST", "/admin/leases/0/5/evict", "/admin/leases/{datacenter}/{worker}/evict", "", "", 401},
	}
	tokenExchanges := []exchange{
		{"ids with its scope", "GET", "/ids", "/ids", "", idsSecret, 200},
		{"ids without a token", "GET", "/ids", "/ids", "", "", 401},
		{"ids with an unknown token", "GET", "/ids", "/ids", "", "nobody", 401},
		{"ids without the scope", "GET", "/ids", "/ids", "", adminSecret, 403},
		{"decompose without the scope", "GET", "/ids/1", "/ids/{id}", "", adminSecret, 403},
		{"admin without the scope", "GET", "/admin/lease-events", "/admin/lease-events", "", idsSecret, 403},
		{"admin with its scope", "GET", "/admin/lease-events", "/admin/lease-events", "", adminSecret, 200},
	}
	// The lease API, in order: a lease of worker 7 acquired, extended and
	// released.
	leaseExchanges := []exchange{
		{"lease layout", "GET", "/v1/leases/layout", "/v1/leases/layout", "", leasesSecret, 200},
		{"lease layout without a token", "GET", "/v1/leases/layout", "/v1/leases/layout", "", "", 401},
		{"lease layout without the scope", "GET", "/v1/leases/layout", "/v1/leases/layout", "", idsSecret, 403},
		{"acquire", "POST", "/v1/leases", "/v1/leases", `{"holder":"docs/1","workers":{"min":7,"max":7},"ttl_ms":5000}`, leasesSecret, 201},
		{"acquire a full pool", "POST", "/v1/leases", "/v1/leases", `{"holder":"docs/2","workers":{"min":7,"max":7}}`, leasesSecret, 409},
		{"acquire with a ttl out of bounds", "POST", "/v1/leases", "/v1/leases", `{"holder":"docs/2","ttl_ms":1}`, leasesSecret, 400},
		{"acquire without the scope", "POST", "/v1/leases", "/v1/leases", `{"holder":"docs/2"}`, adminSecret, 403},
		{"acquire too large", "POST", "/v1/leases", "/v1/leases", `{"holder":"` + strings.Repeat("x", 70<<10) + `"}`, leasesSecret, 413},
		{"heartbeat", "POST", "/v1/leases/0/7/heartbeat", "/v1/leases/{datacenter}/{worker}/heartbeat", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET","ttl_ms":5000}`, leasesSecret, 200},
		{"heartbeat another version", "POST", "/v1/leases/0/7/heartbeat", "/v1/leases/{datacenter}/{worker}/heartbeat", `{"holder":"docs/1","fencing_version":2,"lease_secret":"$SECRET","ttl_ms":5000}`, leasesSecret, 409},
		{"heartbeat without a secret", "POST", "/v1/leases/0/7/heartbeat", "/v1/leases/{datacenter}/{worker}/heartbeat", `{"holder":"docs/1","fencing_version":1,"ttl_ms":5000}`, leasesSecret, 400},
		{"heartbeat beyond the layout", "POST", "/v1/leases/0/32/heartbeat", "/v1/leases/{datacenter}/{worker}/heartbeat", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET","ttl_ms":5000}`, leasesSecret, 400},
		{"release a tampered timestamp", "POST", "/v1/leases/0/7/release", "/v1/leases/{datacenter}/{worker}/release", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET","last_timestamp_ms":99999999999999}`, leasesSecret, 422},
		{"release saying nothing", "POST", "/v1/leases/0/7/release", "/v1/leases/{datacenter}/{worker}/release", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET"}`, leasesSecret, 400},
		{"release", "POST", "/v1/leases/0/7/release", "/v1/leases/{datacenter}/{worker}/release", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET","none_issued":true}`, leasesSecret, 200},
		{"release again", "POST", "/v1/leases/0/7/release", "/v1/leases/{datacenter}/{worker}/release", `{"holder":"docs/1","fencing_version":1,"lease_secret":"$SECRET","none_issued":true}`, leasesSecret, 409},
	}
	downExchanges := []exchange{
		{"lease API off", "GET", "/v1/leases/layout", "/v1/leases/layout", "", leasesSecret, 404},
		{"no lease", "GET", "/ids?count=2", "/ids", "", "", 503},
		{"not ready", "GET", "/readyz", "/readyz", "", "", 503},
		{"admin disabled", "GET", "/admin/leases", "/admin/leases", "", "", 404},
	}

	exchanges = append(exchanges, compatExchanges...)
	tokenExchanges = append(tokenExchanges, compatTokenExchanges...)
	downExchanges = append(downExchanges, compatDownExchanges...)

	covered := map[string]bool{}
	run := func(base string, ex exchange) {
		t.Run(ex.name, func(t *testing.T) {
			resp, data := send(t, base, ex) //nolint:bodyclose // send read and closed it
			if resp.StatusCode < 300 {
				covered[ex.method+" "+ex.op] = true
			}
			checkResponse(t, s, ex, resp, data)
		})
	}
	for _, ex := range exchanges {
		run(ts.URL, ex)
	}
	for _, ex := range downExchanges {
		run(down.URL, ex)
	}
	for _, ex := range tokenExchanges {
		run(withTokens.URL, ex)
	}
	// The lease exchanges after the acquire send its lease secret, which
	// they name $SECRET.
	var secret string
	for _, ex := range leaseExchanges {
		ex.body = strings.ReplaceAll(ex.body, "$SECRET", secret)
		t.Run(ex.name, func(t *testing.T) {
			resp, data := send(t, withTokens.URL, ex) //nolint:bodyclose // send read and closed it
			if resp.StatusCode < 300 {
				covered[ex.method+" "+ex.op] = true
			}
			checkResponse(t, s, ex, resp, data)
			if ex.name == "acquire" {
				var g struct {
					LeaseSecret string `json:"lease_secret"`
				}
				if err := json.Unmarshal(data, &g); err != nil || g.LeaseSecret == "" {
					t.Fatalf("acquire: no lease_secret in %s (%v)", data, err)
				}
				secret = g.LeaseSecret
			}
		})
	}
	// The sequence API, in order: reservations confirmed and voided by
	// the ID the reservation before returned ($RID).
	const seqPath = "/v1/sequences/{name}"
	seqExchanges := []exchange{
		{"create sequence", "POST", "/v1/sequences", "/v1/sequences", `{"name":"invoices","format":"INV-{yyyy}-{seq:06}","reset":"yearly","time_zone":"Europe/Berlin","ttl_seconds":60}`, adminToken, 201},
		{"create sequence again", "POST", "/v1/sequences", "/v1/sequences", `{"name":"invoices","format":"{seq}"}`, adminToken, 409},
		{"create sequence without a counter", "POST", "/v1/sequences", "/v1/sequences", `{"name":"bad","format":"INV-{yyyy}"}`, adminToken, 400},
		{"list sequences", "GET", "/v1/sequences", "/v1/sequences", "", adminToken, 200},
		{"get sequence", "GET", "/v1/sequences/invoices", seqPath, "", adminToken, 200},
		{"get missing sequence", "GET", "/v1/sequences/nope", seqPath, "", adminToken, 404},
		{"reserve", "POST", "/v1/sequences/invoices/reservations", seqPath + "/reservations", `{"count":2}`, "", 201},
		{"reserve above the cap", "POST", "/v1/sequences/invoices/reservations", seqPath + "/reservations", `{"count":100000}`, "", 400},
		{"confirm", "POST", "/v1/sequences/invoices/reservations/$RID/confirm", seqPath + "/reservations/{id}/confirm", "", "", 200},
		{"confirm again", "POST", "/v1/sequences/invoices/reservations/$RID/confirm", seqPath + "/reservations/{id}/confirm", "", "", 409},
		{"reserve to void", "POST", "/v1/sequences/invoices/reservations", seqPath + "/reservations", `{"count":1}`, "", 201},
		{"void", "POST", "/v1/sequences/invoices/reservations/$RID/void", seqPath + "/reservations/{id}/void", "", "", 200},
		{"void unknown", "POST", "/v1/sequences/invoices/reservations/nope/void", seqPath + "/reservations/{id}/void", "", "", 404},
		{"ledger", "GET", "/v1/sequences/invoices/ledger?limit=2", seqPath + "/ledger", "", adminToken, 200},
		{"ledger bad state", "GET", "/v1/sequences/invoices/ledger?state=lost", seqPath + "/ledger", "", adminToken, 400},
		{"ledger CSV", "GET", "/v1/sequences/invoices/ledger.csv?state=confirmed", seqPath + "/ledger.csv", "", adminToken, 200},
	}
	var rid string
	for _, ex := range seqExchanges {
		ex.path = strings.ReplaceAll(ex.path, "$RID", rid)
		t.Run(ex.name, func(t *testing.T) {
			resp, data := send(t, ts.URL, ex) //nolint:bodyclose // send read and closed it
			if resp.StatusCode < 300 {
				covered[ex.method+" "+ex.op] = true
			}
			checkResponse(t, s, ex, resp, data)
			if strings.HasPrefix(ex.name, "reserve") && resp.StatusCode == 201 {
				var r struct {
					ReservationID string `json:"reservation_id"`
				}
				if err := json.Unmarshal(data, &r); err != nil || r.ReservationID == "" {
					t.Fatalf("reserve: no reservation_id in %s (%v)", data, err)
				}
				rid = r.ReservationID
			}
		})
	}
	for _, op := range s.operations() {
		if !covered[op] {
			t.Errorf("no successful request covers %s: add one to the table", op)
		}
	}
}

// checkResponse checks one answer against the spec's response for its
// status: documented status, media type, headers and body schema.
func checkResponse(t *testing.T, s spec, ex exchange, resp *http.Response, data []byte) {
	t.Helper()
	op := obj(obj(obj(s["paths"])[ex.op])[strings.ToLower(ex.method)])
	if op == nil {
		t.Fatalf("the spec has no operation %s %s", ex.method, ex.op)
	}
	r := obj(obj(op["responses"])[fmt.Sprint(resp.StatusCode)])
	if r == nil {
		t.Fatalf("%s %s answered %d, which the spec does not document", ex.method, ex.op, resp.StatusCode)
	}
	r = s.resolve(t, r)
	for name := range obj(r["headers"]) {
		if resp.Header.Get(name) == "" {
			t.Errorf("%s %s %d: documented header %s missing", ex.method, ex.op, resp.StatusCode, name)
		}
	}
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode == 503 && !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(ra) {
		t.Errorf("503 with Retry-After %q, want whole seconds >= 1", ra)
	}
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	mt = strings.TrimSpace(mt)
	media := obj(obj(r["content"])[mt])
	if media == nil {
		var want []string
		for k := range obj(r["content"]) {
			want = append(want, k)
		}
		t.Fatalf("%s %s %d: Content-Type %q, documented %v", ex.method, ex.op, resp.StatusCode, mt, want)
	}
	if !strings.HasSuffix(mt, "json") {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var body any
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v: %s", ex.method, ex.path, err, data)
	}
	v := validator{s: s, t: t}
	for _, p := range v.check(obj(media["schema"]), body, "$") {
		t.Errorf("%s %s %d: %s\nbody: %s", ex.method, ex.path, resp.StatusCode, p, data)
	}
}

// validator checks a JSON value against the subset of JSON Schema the spec
// uses: $ref, allOf, oneOf, type (one or a list), const, enum, properties,
// required, additionalProperties: false, items, pattern, minimum, maximum,
// maxLength, minProperties and format date-time.
type validator struct {
	s spec
	t *testing.T
}

func (v validator) check(schema map[string]any, val any, at string) []string {
	if schema == nil {
		return []string{at + ": no schema documented"}
	}
	schema = v.s.resolve(v.t, schema)
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, at+": "+fmt.Sprintf(format, args...)) }

	for _, sub := range asList(schema["allOf"]) {
		problems = append(problems, v.check(obj(sub), val, at)...)
	}
	if alts := asList(schema["oneOf"]); len(alts) > 0 {
		matched := 0
		for _, sub := range alts {
			if len(v.check(obj(sub), val, at)) == 0 {
				matched++
			}
		}
		if matched != 1 {
			fail("matches %d of the oneOf alternatives, want exactly 1", matched)
		}
	}
	if types := typesOf(schema["type"]); len(types) > 0 && !slices.Contains(types, jsonType(val)) &&
		!(jsonType(val) == "integer" && slices.Contains(types, "number")) {
		fail("got a JSON %s, want %v", jsonType(val), types)
		return problems
	}
	if c, ok := schema["const"]; ok && fmt.Sprint(c) != fmt.Sprint(val) {
		fail("got %v, want %v", val, c)
	}
	if e := asList(schema["enum"]); len(e) > 0 && !slices.ContainsFunc(e, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(val) }) {
		fail("got %v, want one of %v", val, e)
	}
	switch val := val.(type) {
	case map[string]any:
		props := obj(schema["properties"])
		for _, r := range asList(schema["required"]) {
			if _, ok := val[r.(string)]; !ok {
				fail("required property %q missing", r)
			}
		}
		if n, ok := schema["minProperties"].(int); ok && len(val) < n {
			fail("%d properties, want at least %d", len(val), n)
		}
		for k, pv := range val {
			if ps := obj(props[k]); ps != nil {
				problems = append(problems, v.check(ps, pv, at+"."+k)...)
			} else if schema["additionalProperties"] == false {
				fail("property %q is not documented", k)
			}
		}
	case []any:
		if items := obj(schema["items"]); items != nil {
			for i, x := range val {
				problems = append(problems, v.check(items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case string:
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(val) {
			fail("%q does not match %s", val, p)
		}
		if n, ok := schema["maxLength"].(int); ok && len([]rune(val)) > n {
			fail("longer than %d", n)
		}
		if schema["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, val); err != nil {
				fail("%q is not a date-time: %v", val, err)
			}
		}
	case json.Number:
		f, _ := val.Float64()
		if m, ok := schema["minimum"].(int); ok && f < float64(m) {
			fail("%v below the minimum %d", val, m)
		}
		if m, ok := schema["maximum"].(int); ok && f > float64(m) {
			fail("%v above the maximum %d", val, m)
		}
	}
	return problems
}

func typesOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// TestDocLinks checks the relative links of the documents that go with the
// API: each names an existing file, and each #anchor a heading in it.
func TestDocLinks(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range []string{"architecture.md", "operations.md", "comparison.md", "migration.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		links := linkRE.FindAllStringSubmatch(string(data), -1)
		if len(links) == 0 {
			t.Errorf("%s: no links found", doc)
		}
		for _, m := range links {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "<") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = doc
			}
			body, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: link %s: %v", doc, target, err)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(string(body)), anchor) {
				t.Errorf("%s: link %s: no heading with anchor %q in %s", doc, target, anchor, file)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown document: lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(md string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
