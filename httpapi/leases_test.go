package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/leaseapi/leasejson"
	"github.com/idgen-project/idgen/internal/problem/problemjson"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/internal/teststore"
	"github.com/idgen-project/idgen/snowflake"
)

// leaseCaller is the caller the lease API's requests authenticate as (of
// testTokens), and leaseToken its secret; otherCaller is a second caller
// with the leases scope.
const (
	leaseCaller = "leases-caller"
	leaseToken  = secretLeases
	otherCaller = "all-caller"
	otherToken  = secretAll
)

// newLeaseEnv is a node with the test callers' tokens, whose own keeper
// holds worker 0.
func newLeaseEnv(tb testing.TB, dialect string) *env {
	tb.Helper()
	return newEnv(tb, envOptions{dialect: dialect, tokens: testTokens, workers: &allocator.WorkerRange{Min: 0, Max: 0}})
}

// lease sends a lease API request with the lease token and a request ID.
func (e *env) lease(method, target, body, requestID string) *httptest.ResponseRecorder {
	e.tb.Helper()
	return e.leaseAs(leaseToken, method, target, body, requestID)
}

// leaseAs sends a lease API request with the token secret.
func (e *env) leaseAs(secret, method, target, body, requestID string) *httptest.ResponseRecorder {
	e.tb.Helper()
	h := []string{"Authorization", "Bearer " + secret}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	if requestID != "" {
		h = append(h, "X-Request-ID", requestID)
	}
	return e.do(method, target, body, h...)
}

// acquire acquires a lease and fails the test unless it got one.
func (e *env) acquire(body string) leasejson.Grant {
	e.tb.Helper()
	rec := e.lease("POST", "/v1/leases", body, "")
	wantStatus(e.tb, rec, 201)
	var a leasejson.Grant
	decode(e.tb, rec, &a)
	if loc, want := rec.Header().Get("Location"), fmt.Sprintf("/v1/leases/%d/%d", a.Datacenter, a.Worker); loc != want {
		e.tb.Fatalf("Location: got %q, want %q", loc, want)
	}
	return a
}

// leases returns every row of worker_leases.
func (e *env) leases() []allocator.Lease {
	e.tb.Helper()
	rows, err := e.store.ListLeases(context.Background())
	if err != nil {
		e.tb.Fatalf("ListLeases: %v", err)
	}
	return rows
}

// events returns every lease event.
func (e *env) events() []allocator.LeaseEvent {
	e.tb.Helper()
	evs, err := e.store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Limit: 10000})
	if err != nil {
		e.tb.Fatalf("ListLeaseEvents: %v", err)
	}
	return evs
}

// wantLeaseProblem checks a problem answer of the lease API: its status,
// its code, and Retry-After where the code asks to retry later.
func wantLeaseProblem(tb testing.TB, rec *httptest.ResponseRecorder, status int, code string) problemjson.Body {
	tb.Helper()
	if rec.Code != status {
		tb.Fatalf("status: got %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	if id := rec.Header().Get("X-Request-ID"); !httpapi.ValidRequestID(id) {
		tb.Fatalf("X-Request-ID: got %q, want a request ID", id)
	}
	var p problemjson.Body
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		tb.Fatalf("problem body %q: %v", rec.Body.String(), err)
	}
	if p.Status != status || p.Code != code || p.Type != "https://idgen.dev/problems/"+code || p.Title == "" || p.Detail == "" {
		tb.Fatalf("problem: got %+v, want status %d, code %s, its type, a title and a detail", p, status, code)
	}
	ra := rec.Header().Get("Retry-After")
	if retry := code == "no_worker_available" || status == 503; retry {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 {
			tb.Fatalf("Retry-After %q on %s: want whole seconds >= 1", ra, code)
		}
	} else if ra != "" {
		tb.Fatalf("Retry-After %q on %s: want none", ra, code)
	}
	return p
}

func TestLeaseLayout(t *testing.T) {
	e := newLeaseEnv(t, "sqlite")
	rec := e.lease("GET", "/v1/leases/layout", "", "")
	wantStatus(t, rec, 200)
	var got leasejson.Layout
	decode(t, rec, &got)
	l := snowflake.DefaultLayout()
	if got.TimeBits != l.TimeBits || got.DatacenterBits != l.DatacenterBits || got.WorkerBits != l.WorkerBits ||
		got.SequenceBits != l.SequenceBits || got.EpochMS != l.EpochMillis() {
		t.Errorf("layout: got %+v, want the default layout %s", got, l)
	}
}

// TestLeaseLifecycle acquires, heartbeats and releases a lease on every
// database, and checks the rows and events each call leaves, with the
// caller's name and the request ID.
func TestLeaseLifecycle(t *testing.T) {
	for _, dialect := range teststore.Dialects {
		t.Run(dialect, func(t *testing.T) {
			e := newLeaseEnv(t, dialect)
			before := time.Now().UnixMilli()
			rec := e.lease("POST", "/v1/leases", `{"holder":"host-3/4242/9f2c","datacenter":0,"workers":{"min":1,"max":31},"ttl_ms":4000}`, "req-acquire-1")
			wantStatus(t, rec, 201)
			var a leasejson.Grant
			decode(t, rec, &a)
			if a.Worker != 1 || a.Datacenter != 0 || a.FencingVersion != 1 || a.Holder != leaseCaller+"/host-3/4242/9f2c" || a.PreviousHolder != nil {
				t.Fatalf("acquire: got worker %d/%d version %d holder %q previous %v; want 0/1, version 1, %s/host-3/4242/9f2c, no previous holder",
					a.Datacenter, a.Worker, a.FencingVersion, a.Holder, a.PreviousHolder, leaseCaller)
			}
			if a.FloorMS != 1 || a.TTLMS != 4000 || a.HeartbeatMS != 1333 || a.MarginMS != 400 ||
				a.MaxClockOffsetMS != allocator.DefaultMaxClockOffset.Milliseconds() || a.MaxBackwardWaitMS != snowflake.DefaultMaxBackwardWait.Milliseconds() {
				t.Errorf("acquire: got floor %d ttl %d heartbeat %d margin %d max offset %d max backward wait %d; want 1, 4000, 1333, 400, %d, %d",
					a.FloorMS, a.TTLMS, a.HeartbeatMS, a.MarginMS, a.MaxClockOffsetMS, a.MaxBackwardWaitMS,
					allocator.DefaultMaxClockOffset.Milliseconds(), snowflake.DefaultMaxBackwardWait.Milliseconds())
			}
			// No ceiling proposed: store time + ttl, as the expiry. (The
			// time a store returns may be read after the one its update
			// used, and rounds to milliseconds apart: 1 ms of slack above.)
			if a.CeilingMS != a.ExpiresAtMS || a.CeilingMS > a.DBTimeMS+4000+1 || a.CeilingMS < a.DBTimeMS+4000-1000 {
				t.Errorf("acquire: ceiling %d, expires %d; want both db time %d + ttl 4000", a.CeilingMS, a.ExpiresAtMS, a.DBTimeMS)
			}
			if a.DBTimeMS < before-5000 || a.DBTimeMS > time.Now().UnixMilli()+5000 {
				t.Errorf("db_time_ms %d is far from now %d", a.DBTimeMS, before)
			}
			if l := snowflake.DefaultLayout(); a.Layout.WorkerBits != l.WorkerBits || a.Layout.EpochMS != l.EpochMillis() {
				t.Errorf("acquire: layout %+v, want the default", a.Layout)
			}
			row := testserver.LeaseRow(t, e.store, 0, 1)
			if row.Holder != a.Holder || row.Owner != leaseCaller || row.FencingVersion != 1 || row.CeilingMS != a.CeilingMS || row.FloorMS != 1 {
				t.Errorf("row after acquire: got %+v, want holder %s owner %s version 1 ceiling %d floor 1", row, a.Holder, leaseCaller, a.CeilingMS)
			}

			// A heartbeat with a proposal far ahead: the store's time + ttl +
			// the broker's allowed offset bounds it.
			rec = e.lease("POST", "/v1/leases/0/1/heartbeat", `{"holder":"host-3/4242/9f2c","fencing_version":1,"ttl_ms":4000,"ceiling_ms":99999999999999}`, "req-hb-1")
			wantStatus(t, rec, 200)
			var hb leasejson.Extension
			decode(t, rec, &hb)
			limit := hb.DBTimeMS + 4000 + allocator.DefaultMaxClockOffset.Milliseconds()
			if hb.CeilingMS > limit+1 || hb.CeilingMS < limit-1000 || hb.FencingVersion != 1 {
				t.Errorf("heartbeat: ceiling %d version %d; want the bound %d (db time + ttl + max offset), version 1", hb.CeilingMS, hb.FencingVersion, limit)
			}
			// A proposal below the ceiling never lowers it.
			rec = e.lease("POST", "/v1/leases/0/1/heartbeat", `{"holder":"host-3/4242/9f2c","fencing_version":1,"ceiling_ms":5}`, "")
			wantStatus(t, rec, 200)
			var hb2 leasejson.Extension
			decode(t, rec, &hb2)
			if hb2.CeilingMS != hb.CeilingMS {
				t.Errorf("heartbeat proposing 5: ceiling %d, want %d unchanged", hb2.CeilingMS, hb.CeilingMS)
			}

			// Release with a last timestamp inside the lease.
			last := a.DBTimeMS + 1
			rec = e.lease("POST", "/v1/leases/0/1/release", fmt.Sprintf(`{"holder":"host-3/4242/9f2c","fencing_version":1,"last_timestamp_ms":%d}`, last), "req-release-1")
			wantStatus(t, rec, 200)
			var rel leasejson.Released
			decode(t, rec, &rel)
			if rel.CeilingMS != last {
				t.Errorf("release: ceiling %d, want the last timestamp %d", rel.CeilingMS, last)
			}
			row = testserver.LeaseRow(t, e.store, 0, 1)
			if row.Holder != "" || row.Owner != "" || row.CeilingMS != last {
				t.Errorf("row after release: %+v, want free with ceiling %d", row, last)
			}

			// A heartbeat after the release is a lost lease, recorded.
			rec = e.lease("POST", "/v1/leases/0/1/heartbeat", `{"holder":"host-3/4242/9f2c","fencing_version":1}`, "req-hb-lost")
			wantLeaseProblem(t, rec, 409, "lease_lost")

			// The next holder starts above the released ceiling.
			rec = e.lease("POST", "/v1/leases", `{"holder":"other","workers":{"min":1,"max":1}}`, "req-acquire-2")
			wantStatus(t, rec, 201)
			var b leasejson.Grant
			decode(t, rec, &b)
			if b.FloorMS != last+1 || b.FencingVersion != 2 || b.PreviousHolder != nil {
				t.Errorf("next acquire: floor %d version %d previous %v; want floor %d, version 2, none (released)", b.FloorMS, b.FencingVersion, b.PreviousHolder, last+1)
			}

			var got []string
			for _, ev := range e.events() {
				if ev.WorkerID == 1 {
					got = append(got, fmt.Sprintf("%s %s v%d owner=%s req=%s", ev.Kind, ev.Holder, ev.FencingVersion, ev.Owner, ev.RequestID))
				}
			}
			h := leaseCaller + "/host-3/4242/9f2c"
			want := []string{
				"acquire " + h + " v1 owner=" + leaseCaller + " req=req-acquire-1",
				"release " + h + " v1 owner=" + leaseCaller + " req=req-release-1",
				"lost " + h + " v1 owner=" + leaseCaller + " req=req-hb-lost",
				"acquire " + leaseCaller + "/other v2 owner=" + leaseCaller + " req=req-acquire-2",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("events of worker 1:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

// TestLeaseHolderIsQualified: the broker stores "<caller>/<holder>", so a
// caller cannot pass for a holder of another name, such as a node's own.
func TestLeaseHolderIsQualified(t *testing.T) {
	e := newLeaseEnv(t, "sqlite")
	own := e.keeper.Status().Lease
	body := fmt.Sprintf(`{"holder":%q,"fencing_version":%d}`, e.keeper.Holder(), own.FencingVersion)
	wantLeaseProblem(t, e.lease("POST", "/v1/leases/0/0/heartbeat", body, ""), 409, "lease_lost")
	rel := fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"last_timestamp_ms":0}`, e.keeper.Holder(), own.FencingVersion)
	wantLeaseProblem(t, e.lease("POST", "/v1/leases/0/0/release", rel, ""), 409, "lease_lost")
	if row := testserver.LeaseRow(t, e.store, 0, 0); row.Holder != e.keeper.Holder() || row.FencingVersion != own.FencingVersion {
		t.Errorf("the node's row changed: %+v", row)
	}
	// The pool of worker 0 alone is full: the node holds it.
	rec := e.lease("POST", "/v1/leases", fmt.Sprintf(`{"holder":%q,"workers":{"min":0,"max":0}}`, e.keeper.Holder()), "")
	wantLeaseProblem(t, rec, 409, "no_worker_available")

	// Another caller giving the same holder name is another holder: it
	// can neither heartbeat nor release the first caller's lease, nor
	// claim it again as its own.
	a := e.acquire(`{"holder":"shared-name","workers":{"min":2,"max":2}}`)
	hb := fmt.Sprintf(`{"holder":"shared-name","fencing_version":%d}`, a.FencingVersion)
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases/0/2/heartbeat", hb, ""), 409, "lease_lost")
	rel = fmt.Sprintf(`{"holder":"shared-name","fencing_version":%d,"last_timestamp_ms":0}`, a.FencingVersion)
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases/0/2/release", rel, ""), 409, "lease_lost")
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases", `{"holder":"shared-name","workers":{"min":2,"max":2}}`, ""), 409, "no_worker_available")
	if row := testserver.LeaseRow(t, e.store, 0, 2); row.Holder != leaseCaller+"/shared-name" || row.Owner != leaseCaller || row.FencingVersion != a.FencingVersion {
		t.Errorf("the first caller's row changed: %+v", row)
	}
	wantStatus(t, e.lease("POST", "/v1/leases/0/2/heartbeat", hb, ""), 200)
}

func TestLeasePoolFull(t *testing.T) {
	e := newLeaseEnv(t, "sqlite")
	a := e.acquire(`{"holder":"a","workers":{"min":7,"max":7}}`)
	if a.Worker != 7 {
		t.Fatalf("worker %d, want 7", a.Worker)
	}
	rec := e.lease("POST", "/v1/leases", `{"holder":"b","workers":{"min":7,"max":7}}`, "")
	p := wantLeaseProblem(t, rec, 409, "no_worker_available")
	if !strings.Contains(p.Detail, "7-7") {
		t.Errorf("detail %q does not name the pool", p.Detail)
	}
	// The same holder claiming again (it never saw its answer) gets the
	// row again, at the next version.
	again := e.acquire(`{"holder":"a","workers":{"min":7,"max":7}}`)
	if again.FencingVersion != a.FencingVersion+1 {
		t.Errorf("claim again: version %d, want %d", again.FencingVersion, a.FencingVersion+1)
	}
	// A pool whose only row's ceiling lies above max_prev_ceiling_ms has no
	// candidate either.
	rel := fmt.Sprintf(`{"holder":"a","fencing_version":%d,"last_timestamp_ms":0}`, again.FencingVersion)
	wantStatus(t, e.lease("POST", "/v1/leases/0/7/release", rel, ""), 200)
	rec = e.lease("POST", "/v1/leases", `{"holder":"b","workers":{"min":7,"max":7},"max_prev_ceiling_ms":1}`, "")
	wantLeaseProblem(t, rec, 409, "no_worker_available")
}

// TestLeaseBadInput sends bad requests to the lease API on every database:
// each gets a 4xx problem, and the lease table is the same afterwards.
func TestLeaseBadInput(t *testing.T) {
	for _, dialect := range teststore.Dialects {
		t.Run(dialect, func(t *testing.T) {
			e := newLeaseEnv(t, dialect)
			a := e.acquire(`{"holder":"good","workers":{"min":3,"max":3},"ttl_ms":60000}`)
			hbPath := "/v1/leases/0/3/heartbeat"
			relPath := "/v1/leases/0/3/release"
			v := a.FencingVersion
			above := a.CeilingMS + 1
			below := a.FloorMS - 1
			if below <= 0 {
				// A floor of 1 (a fresh row): claim the row again after a
				// release at a known timestamp, so that the floor lies
				// above 1.
				rel := fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":%d}`, v, a.DBTimeMS)
				wantStatus(t, e.lease("POST", relPath, rel, ""), 200)
				a = e.acquire(`{"holder":"good","workers":{"min":3,"max":3},"ttl_ms":60000}`)
				v, above, below = a.FencingVersion, a.CeilingMS+1, a.FloorMS-1
			}
			before := e.leases()
			eventsBefore := len(e.events())

			auth := func(token string) []string {
				if token == "" {
					return nil
				}
				return []string{"Authorization", "Bearer " + token, "Content-Type", "application/json"}
			}
			for _, tc := range []struct {
				name, method, target, body string
				headers                    []string
				status                     int
				code                       string
			}{
				{"no token", "POST", "/v1/leases", `{"holder":"x"}`, nil, 401, "unauthorized"},
				{"no token layout", "GET", "/v1/leases/layout", "", nil, 401, "unauthorized"},
				{"basic scheme", "POST", "/v1/leases", `{"holder":"x"}`, []string{"Authorization", "Basic eDp5"}, 401, "unauthorized"},
				{"unknown token", "POST", "/v1/leases", `{"holder":"x"}`, auth(secretNobody), 401, "unauthorized"},
				{"unknown token heartbeat", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d}`, v), auth(secretNobody), 401, "unauthorized"},
				{"token without the leases scope", "POST", "/v1/leases", `{"holder":"x"}`, auth(secretIDs), 403, "forbidden"},
				{"admin token without the leases scope", "POST", "/v1/leases", `{"holder":"x"}`, auth(secretAdmin), 403, "forbidden"},
				{"wrong scope heartbeat", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d}`, v), auth(secretIDs), 403, "forbidden"},
				{"wrong scope release", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":%d}`, v, above), auth(secretIDs), 403, "forbidden"},
				{"empty body", "POST", "/v1/leases", "", auth(leaseToken), 400, "invalid"},
				{"not JSON", "POST", "/v1/leases", `holder=x`, auth(leaseToken), 400, "invalid"},
				{"unknown field", "POST", "/v1/leases", `{"holder":"x","colour":"red"}`, auth(leaseToken), 400, "invalid"},
				{"two values", "POST", "/v1/leases", `{"holder":"x"}{"holder":"y"}`, auth(leaseToken), 400, "invalid"},
				{"no holder", "POST", "/v1/leases", `{"workers":{"min":1,"max":2}}`, auth(leaseToken), 400, "invalid"},
				{"holder with a space", "POST", "/v1/leases", `{"holder":"a b"}`, auth(leaseToken), 400, "invalid"},
				{"holder with a newline", "POST", "/v1/leases", `{"holder":"a\nb"}`, auth(leaseToken), 400, "invalid"},
				{"holder not ASCII", "POST", "/v1/leases", `{"holder":"höst"}`, auth(leaseToken), 400, "invalid"},
				{"holder too long", "POST", "/v1/leases", `{"holder":"` + strings.Repeat("h", 191) + `"}`, auth(leaseToken), 400, "invalid"},
				{"datacenter outside the layout", "POST", "/v1/leases", `{"holder":"x","datacenter":32}`, auth(leaseToken), 400, "invalid"},
				{"negative datacenter", "POST", "/v1/leases", `{"holder":"x","datacenter":-1}`, auth(leaseToken), 400, "invalid"},
				{"datacenter as a string", "POST", "/v1/leases", `{"holder":"x","datacenter":"0"}`, auth(leaseToken), 400, "invalid"},
				{"pool above the layout", "POST", "/v1/leases", `{"holder":"x","workers":{"min":30,"max":32}}`, auth(leaseToken), 400, "invalid"},
				{"pool reversed", "POST", "/v1/leases", `{"holder":"x","workers":{"min":5,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"pool negative", "POST", "/v1/leases", `{"holder":"x","workers":{"min":-1,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"pool without max", "POST", "/v1/leases", `{"holder":"x","workers":{"min":1}}`, auth(leaseToken), 400, "invalid"},
				{"pool fractional", "POST", "/v1/leases", `{"holder":"x","workers":{"min":1.5,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"ttl below the minimum", "POST", "/v1/leases", `{"holder":"x","ttl_ms":2999}`, auth(leaseToken), 400, "invalid"},
				{"ttl above the maximum", "POST", "/v1/leases", `{"holder":"x","ttl_ms":300001}`, auth(leaseToken), 400, "invalid"},
				{"ttl negative", "POST", "/v1/leases", `{"holder":"x","ttl_ms":-1}`, auth(leaseToken), 400, "invalid"},
				{"negative ceiling", "POST", "/v1/leases", `{"holder":"x","ceiling_ms":-5}`, auth(leaseToken), 400, "invalid"},
				{"negative max previous ceiling", "POST", "/v1/leases", `{"holder":"x","max_prev_ceiling_ms":-5}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat wrong version", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d}`, v+1), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat older version", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d}`, v-1), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat zero version", "POST", hbPath, `{"holder":"good","fencing_version":0}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat another holder", "POST", hbPath, fmt.Sprintf(`{"holder":"bad","fencing_version":%d}`, v), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat unknown worker", "POST", "/v1/leases/0/9/heartbeat", `{"holder":"good","fencing_version":1}`, auth(leaseToken), 409, "lease_lost"},
				{"heartbeat worker outside the layout", "POST", "/v1/leases/0/32/heartbeat", `{"holder":"good","fencing_version":1}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat datacenter outside the layout", "POST", "/v1/leases/40/3/heartbeat", `{"holder":"good","fencing_version":1}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat worker not a number", "POST", "/v1/leases/0/x/heartbeat", `{"holder":"good","fencing_version":1}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat ttl out of bounds", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"ttl_ms":1000}`, v), auth(leaseToken), 400, "invalid"},
				{"heartbeat negative ceiling", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"ceiling_ms":-1}`, v), auth(leaseToken), 400, "invalid"},
				{"release above the ceiling", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":%d}`, v, above), auth(leaseToken), 422, "invalid_release"},
				{"release far above the ceiling", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":%d}`, v, int64(1)<<62), auth(leaseToken), 422, "invalid_release"},
				{"release below the floor", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":%d}`, v, below), auth(leaseToken), 422, "invalid_release"},
				{"release at 1", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":1}`, v), auth(leaseToken), 422, "invalid_release"},
				{"release negative", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":-1}`, v), auth(leaseToken), 400, "invalid"},
				{"release wrong version", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"last_timestamp_ms":0}`, v+1), auth(leaseToken), 409, "lease_lost"},
				{"release another holder", "POST", relPath, fmt.Sprintf(`{"holder":"bad","fencing_version":%d,"last_timestamp_ms":0}`, v), auth(leaseToken), 409, "lease_lost"},
				{"release unknown worker", "POST", "/v1/leases/0/9/release", `{"holder":"good","fencing_version":1,"last_timestamp_ms":0}`, auth(leaseToken), 409, "lease_lost"},
				{"layout with POST", "POST", "/v1/leases/layout", `{}`, auth(leaseToken), 404, "not_found"},
				{"unknown lease route", "GET", "/v1/leases/0/3", "", auth(leaseToken), 404, "not_found"},
				{"too large", "POST", "/v1/leases", `{"holder":"` + strings.Repeat("x", 70<<10) + `"}`, auth(leaseToken), 413, "too_large"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					rec := e.do(tc.method, tc.target, tc.body, tc.headers...)
					p := wantLeaseProblem(t, rec, tc.status, tc.code)
					if strings.Contains(rec.Body.String(), leaseToken) || strings.Contains(rec.Body.String(), secretIDs) ||
						strings.Contains(rec.Header().Get("WWW-Authenticate"), leaseToken) {
						t.Errorf("the answer holds the token: %+v", p)
					}
					if tc.status == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("401 without a Bearer challenge")
					}
				})
			}
			if after := e.leases(); !reflect.DeepEqual(after, before) {
				t.Errorf("the lease table changed:\nbefore %+v\nafter  %+v", before, after)
			}
			// Only the lost events of the heartbeats that matched no row were
			// added; nothing else was recorded.
			lost := 0
			for _, ev := range e.events()[eventsBefore:] {
				if ev.Kind != allocator.EventLost || ev.Owner != leaseCaller {
					t.Errorf("unexpected event %+v", ev)
				}
				lost++
			}
			if lost != 4 {
				t.Errorf("got %d lost events, want 4 (one per heartbeat answered lease_lost)", lost)
			}
			// The good holder still holds its lease at its version.
			rec := e.lease("POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"ttl_ms":60000}`, v), "")
			wantStatus(t, rec, 200)
		})
	}
}

func TestLeaseAPIOff(t *testing.T) {
	// Without tokens, and with tokens none of which has the leases scope.
	e := newEnv(t, envOptions{token: testToken})
	noLeases := newEnv(t, envOptions{tokens: fmt.Sprintf("only-ids ids %s\n", httpapi.HashSecret(secretIDs))})
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/v1/leases/layout", ""},
		{"POST", "/v1/leases", `{"holder":"x"}`},
		{"POST", "/v1/leases/0/1/heartbeat", `{"holder":"x","fencing_version":1}`},
		{"POST", "/v1/leases/0/1/release", `{"holder":"x","fencing_version":1}`},
	} {
		for _, secret := range []string{leaseToken, testToken, secretIDs} {
			for _, node := range []*env{e, noLeases} {
				rec := node.do(tc.method, tc.target, tc.body, "Authorization", "Bearer "+secret, "Content-Type", "application/json")
				p := wantLeaseProblem(t, rec, 404, "not_found")
				if !strings.Contains(p.Detail, "lease API is off") {
					t.Errorf("%s %s: detail %q, want it to say the lease API is off", tc.method, tc.target, p.Detail)
				}
			}
		}
	}
	if rows := e.leases(); len(rows) != 32 {
		t.Errorf("lease rows: got %d, want the node's 32", len(rows))
	}
}
