package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// v1IDsResponse is the body of GET /api/v1/ids.
type v1IDsResponse struct {
	IDs []struct {
		ValueString string `json:"value_string"`
		ValueHex    string `json:"value_hex"`
		Breakdown   struct {
			TimestampMS    int64 `json:"timestamp_ms"`
			DatacenterID   int64 `json:"datacenter_id"`
			WorkerID       int64 `json:"worker_id"`
			SequenceNumber int64 `json:"sequence_number"`
		} `json:"breakdown"`
	} `json:"ids"`
	GeneratedAt string `json:"generated_at"`
}

// tinyidEnvelope is the body of tinyid's nextId.
type tinyidEnvelope struct {
	Data    []int64 `json:"data"`
	Code    int     `json:"code"`
	Message string  `json:"message"`
}

func TestV1IDs(t *testing.T) {
	e := newEnv(t, envOptions{maxCount: 50})
	body := getOK[v1IDsResponse](t, e, "/api/v1/ids?count=5")
	if len(body.IDs) != 5 {
		t.Fatalf("got %d IDs, want 5", len(body.IDs))
	}
	at, err := time.Parse(time.RFC3339Nano, body.GeneratedAt)
	if err != nil || !strings.HasSuffix(body.GeneratedAt, "Z") {
		t.Fatalf("generated_at %q: not RFC 3339 in UTC: %v", body.GeneratedAt, err)
	}
	layout := e.keeper.Layout()
	prev := int64(-1)
	for i, x := range body.IDs {
		id, err := strconv.ParseInt(x.ValueString, 10, 64)
		if err != nil {
			t.Fatalf("ID %d: value_string %q: %v", i, x.ValueString, err)
		}
		if id <= prev {
			t.Fatalf("ID %d: got %d after %d, want increasing IDs", i, id, prev)
		}
		prev = id
		if want := fmt.Sprintf("%016x", id); x.ValueHex != want {
			t.Errorf("ID %d: value_hex got %q, want %q", i, x.ValueHex, want)
		}
		p := layout.Decompose(snowflake.ID(id))
		b := x.Breakdown
		if b.TimestampMS != p.Time.UnixMilli() || b.DatacenterID != p.Datacenter || b.WorkerID != p.Worker || b.SequenceNumber != p.Sequence {
			t.Errorf("ID %d: breakdown got %+v, want %+v", i, b, p)
		}
		if d := at.Sub(p.Time); d < 0 || d > time.Minute {
			t.Errorf("ID %d: generated_at %s is %s after the ID's time %s, want 0 to a minute", i, at, d, p.Time)
		}
	}

	for _, tc := range []struct {
		target string
		want   int
	}{
		{"/api/v1/ids", 200},
		{"/api/v1/ids?count=50", 200},
		{"/api/v1/ids?count=51", 400},
		{"/api/v1/ids?count=0", 400},
		{"/api/v1/ids?count=1e3", 400},
		{"/api/v1/ids?count=1&count=2", 400},
		{"/api/v1/ids?explain=true", 400},
		{"/api/v1/ids?count=%zz", 400},
	} {
		rec := e.do("GET", tc.target, "")
		if rec.Code != tc.want {
			t.Errorf("GET %s: got %d, want %d: %s", tc.target, rec.Code, tc.want, rec.Body.String())
		}
		wantStatus(t, rec, tc.want)
	}

	rec := e.do("POST", "/api/v1/id", `{"ignored":true}`)
	wantStatus(t, rec, 200)
	var one struct {
		ID string `json:"id"`
	}
	decode(t, rec, &one)
	if id, err := strconv.ParseInt(one.ID, 10, 64); err != nil || id <= prev {
		t.Errorf("POST /api/v1/id: got %q, want a decimal ID above %d", one.ID, prev)
	}
}

// text sends a GET and returns the text/plain body of its 200 answer.
func (e *env) text(target string, header ...string) string {
	e.tb.Helper()
	rec := e.do("GET", target, "", header...)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		e.tb.Fatalf("GET %s: got %d %q, want 200 text/plain: %s", target, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	return rec.Body.String()
}

func TestLeafRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createNamespace(allocator.Namespace{Name: "order-ids", MaxID: 4000, Step: 10})
	for want := int64(4001); want <= 4025; want++ { // across ranges
		if got := e.text("/api/segment/get/order-ids"); got != strconv.FormatInt(want, 10) {
			t.Fatalf("GET /api/segment/get/order-ids: got %q, want %d", got, want)
		}
	}
	a, err1 := strconv.ParseInt(e.text("/api/snowflake/get/whatever"), 10, 64)
	b, err2 := strconv.ParseInt(e.text("/api/snowflake/get/other"), 10, 64)
	if err1 != nil || err2 != nil || b <= a {
		t.Errorf("Leaf Snowflake IDs: got %d then %d (%v, %v), want increasing decimal IDs", a, b, err1, err2)
	}
	wantStatus(t, e.do("GET", "/api/segment/get/absent", ""), 404)
	wantStatus(t, e.do("GET", "/api/segment/get/Order_IDs", ""), 400)
}

func TestTinyidRoutes(t *testing.T) {
	e := newEnv(t, envOptions{maxCount: 20})
	e.createNamespace(allocator.Namespace{Name: "test", MaxID: 99, Step: 7})

	got := e.text("/tinyid/id/nextIdSimple?bizType=test&batchSize=3&token=anything")
	if got != "100,101,102" {
		t.Errorf("nextIdSimple: got %q, want 100,101,102", got)
	}
	if got := e.text("/tinyid/id/nextIdSimple?bizType=test"); got != "103" {
		t.Errorf("nextIdSimple without batchSize: got %q, want 103", got)
	}
	// Above the node's maximum count, the batch is capped, as tinyid caps it.
	if got := strings.Split(e.text("/tinyid/id/nextIdSimple?bizType=test&batchSize=1000"), ","); len(got) != 20 || got[0] != "104" || got[19] != "123" {
		t.Errorf("nextIdSimple batchSize=1000: got %v, want 104 to 123", got)
	}
	// POST, with the parameters in a form body.
	req := e.do("POST", "/tinyid/id/nextIdSimple", "bizType=test&batchSize=2", "Content-Type", "application/x-www-form-urlencoded")
	if req.Code != 200 || req.Body.String() != "124,125" {
		t.Errorf("POST nextIdSimple: got %d %q, want 200 124,125", req.Code, req.Body.String())
	}

	rec := e.do("GET", "/tinyid/id/nextId?bizType=test&batchSize=2", "")
	wantStatus(t, rec, 200)
	var env tinyidEnvelope
	decode(t, rec, &env)
	if env.Code != 200 || env.Message != "" || fmt.Sprint(env.Data) != "[126 127]" {
		t.Errorf("nextId: got %+v, want code 200, no message, data [126 127]", env)
	}
	if !strings.Contains(rec.Body.String(), `"data":[126,127]`) {
		t.Errorf("nextId: got %s, want the IDs as JSON numbers", rec.Body.String())
	}

	for _, tc := range []struct {
		target string
		status int
	}{
		{"/tinyid/id/nextId?bizType=absent", 404},
		{"/tinyid/id/nextId", 400},
		{"/tinyid/id/nextId?bizType=Test", 400},
		{"/tinyid/id/nextId?bizType=test&batchSize=0", 400},
		{"/tinyid/id/nextId?bizType=test&batchSize=x", 400},
	} {
		rec := e.do("GET", tc.target, "")
		checkTinyidError(t, rec.Code, rec.Header(), rec.Body.Bytes(), tc.status, 6)
		wantStatus(t, e.do("GET", strings.Replace(tc.target, "nextId", "nextIdSimple", 1), ""), tc.status)
	}
}

// checkTinyidError checks a failed nextId: the status, JSON, and tinyid's
// envelope with no data, the code and a message.
func checkTinyidError(tb testing.TB, status int, h http.Header, body []byte, wantStatus, wantCode int) {
	tb.Helper()
	if status != wantStatus || h.Get("Content-Type") != "application/json" {
		tb.Fatalf("got %d %q, want %d application/json: %s", status, h.Get("Content-Type"), wantStatus, body)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		tb.Fatalf("body %s: %v", body, err)
	}
	if env["data"] != nil || env["code"] != float64(wantCode) || env["message"] == "" || len(env) != 3 {
		tb.Fatalf("envelope: got %s, want data null, code %d and a message", body, wantCode)
	}
}

func TestCompatTokens(t *testing.T) {
	e := newEnv(t, envOptions{tokens: testTokens})
	e.createNamespace(allocator.Namespace{Name: "test"})

	// tinyid's token parameter carries the secret.
	if got := e.text("/tinyid/id/nextIdSimple?bizType=test&token=" + secretIDs); got != "1" {
		t.Errorf("nextIdSimple with the token parameter: got %q, want 1", got)
	}
	rec := e.do("POST", "/tinyid/id/nextId", "bizType=test&token="+secretIDs, "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, rec, 200)
	// The header wins over the parameter.
	if got := e.text("/tinyid/id/nextIdSimple?bizType=test&token=wrong", bearer(secretIDs)...); got != "3" {
		t.Errorf("nextIdSimple with a header and a wrong parameter: got %q, want 3", got)
	}
	for _, tc := range []struct {
		name   string
		target string
		header []string
		status int
	}{
		{"no token", "/tinyid/id/nextId?bizType=test", nil, 401},
		{"unknown token", "/tinyid/id/nextId?bizType=test&token=" + secretNobody, nil, 401},
		{"token without the scope", "/tinyid/id/nextId?bizType=test&token=" + secretAdmin, nil, 403},
		{"wrong header, right parameter", "/tinyid/id/nextId?bizType=test&token=" + secretIDs, bearer(secretNobody), 401},
	} {
		rec := e.do("GET", tc.target, "", tc.header...)
		checkTinyidError(t, rec.Code, rec.Header(), rec.Body.Bytes(), tc.status, 5)
		if strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("%s: the answer quotes the secret: %s", tc.name, rec.Body.String())
		}
		simple := e.do("GET", strings.Replace(tc.target, "nextId", "nextIdSimple", 1), "", tc.header...)
		wantStatus(t, simple, tc.status)
	}
	// The other compatibility routes take the header only.
	for _, target := range []string{"/api/v1/ids", "/api/segment/get/test", "/api/snowflake/get/x"} {
		wantStatus(t, e.do("GET", target, ""), 401)
		wantStatus(t, e.do("GET", target, "", bearer(secretAdmin)...), 403)
		if rec := e.do("GET", target, "", bearer(secretIDs)...); rec.Code != 200 {
			t.Errorf("GET %s with the ids scope: got %d, want 200", target, rec.Code)
		}
	}
	wantStatus(t, e.do("POST", "/api/v1/id", ""), 401)
}

func TestCompatUnavailable(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	testserver.HoldWorker(t, store, 2)
	e := newEnv(t, envOptions{store: store, workers: &allocator.WorkerRange{Min: 2, Max: 2}, noWait: true})
	e.createNamespace(allocator.Namespace{Name: "test"})
	for _, target := range []string{"/api/v1/ids", "/api/snowflake/get/x"} {
		rec := e.do("GET", target, "")
		wantStatus(t, rec, 503)
		checkRetryAfter(t, rec.Header().Get("Retry-After"))
	}
	rec := e.do("POST", "/api/v1/id", "")
	wantStatus(t, rec, 503)
	// Segments do not need the lease.
	if got := e.text("/api/segment/get/test"); got != "1" {
		t.Errorf("Leaf segment without a lease: got %q, want 1", got)
	}

	// A namespace whose database is unreachable: 503 in tinyid's envelope.
	down := newEnv(t, envOptions{store: failingSegments{testserver.OpenStore(t, "sqlite")}})
	down.createNamespace(allocator.Namespace{Name: "test"})
	rec = down.do("GET", "/tinyid/id/nextId?bizType=test", "")
	checkTinyidError(t, rec.Code, rec.Header(), rec.Body.Bytes(), 503, 6)
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
	rec = down.do("GET", "/tinyid/id/nextIdSimple?bizType=test", "")
	wantStatus(t, rec, 503)
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
}
