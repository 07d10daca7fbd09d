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

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/testserver"
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
func (e *env) acquire(body string) httpapi.LeaseGrant {
	e.tb.Helper()
	rec := e.lease("POST", "/v1/leases", body, "")
	wantStatus(e.tb, rec, 201)
	var a httpapi.LeaseGrant
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
func wantLeaseProblem(tb testing.TB, rec *httptest.ResponseRecorder, status int, code string) httpapi.Problem {
	tb.Helper()
	if rec.Code != status {
		tb.Fatalf("status: got %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	if id := rec.Header().Get("X-Request-ID"); !idgen.ValidRequestID(id) {
		tb.Fatalf("X-Request-ID: got %q, want a request ID", id)
	}
	var p httpapi.Problem
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		tb.Fatalf("problem body %q: %v", rec.Body.String(), err)
	}
	if p.Status != status || p.Code != code || p.Type != "https://idgen.dev/problems/"+code || p.Title == "" || p.Detail == "" {
		tb.Fatalf("problem: got %+v, want status %d, code %s, its type, a title and a detail", p, status, code)
	}
	ra := rec.Header().Get("Retry-After")
	if retry := code == "no_worker_available" || code == "too_many" || status == 503; retry {
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
	var got httpapi.LeaseLayout
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
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) {
			e := newLeaseEnv(t, dialect)
			before := time.Now().UnixMilli()
			rec := e.lease("POST", "/v1/leases", `{"holder":"host-3/4242/9f2c","datacenter":0,"workers":{"min":1,"max":31},"ttl_ms":4000}`, "req-acquire-1")
			wantStatus(t, rec, 201)
			var a httpapi.LeaseGrant
			decode(t, rec, &a)
			h := "api:" + leaseCaller + "/host-3/4242/9f2c"
			if a.Worker != 1 || a.Datacenter != 0 || a.FencingVersion != 1 || a.Holder != h || a.PreviousHolder != nil {
				t.Fatalf("acquire: got worker %d/%d version %d holder %q previous %v; want 0/1, version 1, %s, no previous holder",
					a.Datacenter, a.Worker, a.FencingVersion, a.Holder, a.PreviousHolder, h)
			}
			if len(a.LeaseSecret) != 43 {
				t.Errorf("acquire: lease secret %q, want 43 characters (32 random bytes)", a.LeaseSecret)
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
			rec = e.lease("POST", "/v1/leases/0/1/heartbeat", heartbeatBody("host-3/4242/9f2c", 1, a.LeaseSecret, `"ttl_ms":4000,"ceiling_ms":99999999999999`), "req-hb-1")
			wantStatus(t, rec, 200)
			var hb httpapi.LeaseExtension
			decode(t, rec, &hb)
			limit := hb.DBTimeMS + 4000 + allocator.DefaultMaxClockOffset.Milliseconds()
			if hb.CeilingMS > limit+1 || hb.CeilingMS < limit-1000 || hb.FencingVersion != 1 || hb.TTLMS != 4000 {
				t.Errorf("heartbeat: ceiling %d version %d ttl %d; want the bound %d (db time + ttl + max offset), version 1, ttl 4000",
					hb.CeilingMS, hb.FencingVersion, hb.TTLMS, limit)
			}
			// A proposal below the ceiling never lowers it.
			rec = e.lease("POST", "/v1/leases/0/1/heartbeat", heartbeatBody("host-3/4242/9f2c", 1, a.LeaseSecret, `"ttl_ms":5000,"ceiling_ms":5`), "")
			wantStatus(t, rec, 200)
			var hb2 httpapi.LeaseExtension
			decode(t, rec, &hb2)
			if hb2.CeilingMS != hb.CeilingMS || hb2.TTLMS != 5000 {
				t.Errorf("heartbeat proposing 5: ceiling %d ttl %d, want %d unchanged and the ttl asked for, 5000", hb2.CeilingMS, hb2.TTLMS, hb.CeilingMS)
			}

			// Release with a last timestamp inside the lease.
			last := a.DBTimeMS + 1
			rec = e.lease("POST", "/v1/leases/0/1/release", releaseBody("host-3/4242/9f2c", 1, a.LeaseSecret, fmt.Sprintf(`"last_timestamp_ms":%d`, last)), "req-release-1")
			wantStatus(t, rec, 200)
			var rel httpapi.LeaseReleased
			decode(t, rec, &rel)
			if rel.CeilingMS != last {
				t.Errorf("release: ceiling %d, want the last timestamp %d", rel.CeilingMS, last)
			}
			row = testserver.LeaseRow(t, e.store, 0, 1)
			if row.Holder != "" || row.Owner != "" || row.CeilingMS != last {
				t.Errorf("row after release: %+v, want free with ceiling %d", row, last)
			}

			// A heartbeat after the release is a lost lease, recorded; its
			// repetitions are not.
			for range 3 {
				rec = e.lease("POST", "/v1/leases/0/1/heartbeat", heartbeatBody("host-3/4242/9f2c", 1, a.LeaseSecret, `"ttl_ms":4000`), "req-hb-lost")
				wantLeaseProblem(t, rec, 409, "lease_lost")
			}

			// The next holder starts above the released ceiling.
			rec = e.lease("POST", "/v1/leases", `{"holder":"other","workers":{"min":1,"max":1}}`, "req-acquire-2")
			wantStatus(t, rec, 201)
			var b httpapi.LeaseGrant
			decode(t, rec, &b)
			if b.FloorMS != last+1 || b.FencingVersion != 2 || b.PreviousHolder != nil || b.LeaseSecret == a.LeaseSecret {
				t.Errorf("next acquire: floor %d version %d previous %v; want floor %d, version 2, none (released), a secret of its own",
					b.FloorMS, b.FencingVersion, b.PreviousHolder, last+1)
			}

			var got []string
			for _, ev := range e.events() {
				if ev.WorkerID == 1 {
					got = append(got, fmt.Sprintf("%s %s v%d owner=%s req=%s", ev.Kind, ev.Holder, ev.FencingVersion, ev.Owner, ev.RequestID))
				}
				if strings.Contains(ev.Detail, a.LeaseSecret) || strings.Contains(ev.Holder, a.LeaseSecret) {
					t.Errorf("event %+v holds the lease secret", ev)
				}
			}
			want := []string{
				"acquire " + h + " v1 owner=" + leaseCaller + " req=req-acquire-1",
				"release " + h + " v1 owner=" + leaseCaller + " req=req-release-1",
				"lost " + h + " v1 owner=" + leaseCaller + " req=req-hb-lost",
				"acquire api:" + leaseCaller + "/other v2 owner=" + leaseCaller + " req=req-acquire-2",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("events of worker 1:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

// heartbeatBody is the body of a heartbeat of holder at version with the
// lease secret, and more members (`"ttl_ms":4000`), when not empty.
func heartbeatBody(holder string, version int64, secret, more string) string {
	b := fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"lease_secret":%q`, holder, version, secret)
	if more != "" {
		b += "," + more
	}
	return b + "}"
}

// releaseBody is the body of a release, as heartbeatBody's.
func releaseBody(holder string, version int64, secret, more string) string {
	return heartbeatBody(holder, version, secret, more)
}

// TestLeaseCallerCannotActOnNodeLease reproduces the review's finding: a
// node whose holder name starts with a token's name ("leases-caller/node1"
// against the token leases-caller) and a caller that reads the node's
// holder and fencing version off the status page. The caller can neither
// release nor heartbeat the node's lease, with or without a guessed
// secret, nor take a worker ID of the node's pool; the node's row is
// unchanged.
func TestLeaseCallerCannotActOnNodeLease(t *testing.T) {
	e := newEnv(t, envOptions{tokens: testTokens, holder: leaseCaller + "/node1", workers: &allocator.WorkerRange{Min: 0, Max: 0}})
	own := e.keeper.Status().Lease
	guess := strings.Repeat("A", 43)
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/leases/0/0/release", `{"holder":"node1","fencing_version":1,"last_timestamp_ms":0}`, 400, "invalid"},
		{"/v1/leases/0/0/release", releaseBody("node1", own.FencingVersion, guess, `"none_issued":true`), 409, "lease_lost"},
		{"/v1/leases/0/0/heartbeat", heartbeatBody("node1", own.FencingVersion, guess, `"ttl_ms":30000`), 409, "lease_lost"},
		{"/v1/leases/0/0/release", releaseBody(e.keeper.Holder(), own.FencingVersion, guess, `"none_issued":true`), 409, "lease_lost"},
		{"/v1/leases", `{"holder":"node1","workers":{"min":0,"max":0}}`, 400, "invalid"},
	} {
		wantLeaseProblem(t, e.lease("POST", tc.path, tc.body, ""), tc.status, tc.code)
	}
	if row := testserver.LeaseRow(t, e.store, 0, 0); row.Holder != e.keeper.Holder() || row.FencingVersion != own.FencingVersion ||
		row.CeilingMS < own.CeilingMS || !row.ReleasedAt.IsZero() {
		t.Errorf("the node's row changed: %+v, want holder %s version %d ceiling at least %d", row, e.keeper.Holder(), own.FencingVersion, own.CeilingMS)
	}
	if err := e.keeper.Ready(); err != nil {
		t.Errorf("node not ready after the caller's attempts: %v", err)
	}

	// Another caller giving the same holder name is another holder: it
	// can neither heartbeat nor release the first caller's lease, even
	// with its secret, nor claim it again as its own.
	a := e.acquire(`{"holder":"shared-name","workers":{"min":2,"max":2}}`)
	hb := heartbeatBody("shared-name", a.FencingVersion, a.LeaseSecret, `"ttl_ms":30000`)
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases/0/2/heartbeat", hb, ""), 409, "lease_lost")
	rel := releaseBody("shared-name", a.FencingVersion, a.LeaseSecret, `"none_issued":true`)
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases/0/2/release", rel, ""), 409, "lease_lost")
	wantLeaseProblem(t, e.leaseAs(otherToken, "POST", "/v1/leases", `{"holder":"shared-name","workers":{"min":2,"max":2}}`, ""), 409, "no_worker_available")
	// The right caller with another secret is not the holder either.
	wrong := heartbeatBody("shared-name", a.FencingVersion, guess, `"ttl_ms":30000`)
	wantLeaseProblem(t, e.lease("POST", "/v1/leases/0/2/heartbeat", wrong, ""), 409, "lease_lost")
	if row := testserver.LeaseRow(t, e.store, 0, 2); row.Holder != "api:"+leaseCaller+"/shared-name" || row.Owner != leaseCaller || row.FencingVersion != a.FencingVersion {
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
	// row again, at the next version, with a new secret: the old one no
	// longer works.
	again := e.acquire(`{"holder":"a","workers":{"min":7,"max":7}}`)
	if again.FencingVersion != a.FencingVersion+1 || again.LeaseSecret == a.LeaseSecret {
		t.Errorf("claim again: version %d, want %d, and a new secret", again.FencingVersion, a.FencingVersion+1)
	}
	old := heartbeatBody("a", again.FencingVersion, a.LeaseSecret, `"ttl_ms":30000`)
	wantLeaseProblem(t, e.lease("POST", "/v1/leases/0/7/heartbeat", old, ""), 409, "lease_lost")
	// A pool whose only row's ceiling lies above max_prev_ceiling_ms has no
	// candidate either.
	rel := releaseBody("a", again.FencingVersion, again.LeaseSecret, `"none_issued":true`)
	wantStatus(t, e.lease("POST", "/v1/leases/0/7/release", rel, ""), 200)
	rec = e.lease("POST", "/v1/leases", `{"holder":"b","workers":{"min":7,"max":7},"max_prev_ceiling_ms":1}`, "")
	wantLeaseProblem(t, rec, 409, "no_worker_available")
}

// TestLeaseBadInput sends bad requests to the lease API on every database:
// each gets a 4xx problem, and the lease table is the same afterwards.
func TestLeaseBadInput(t *testing.T) {
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) {
			e := newLeaseEnv(t, dialect)
			a := e.acquire(`{"holder":"good","workers":{"min":3,"max":3},"ttl_ms":60000}`)
			hbPath := "/v1/leases/0/3/heartbeat"
			relPath := "/v1/leases/0/3/release"
			v, sec := a.FencingVersion, a.LeaseSecret
			above := a.CeilingMS + 1
			below := a.FloorMS - 1
			if below <= 0 {
				// A floor of 1 (a fresh row): claim the row again after a
				// release at a known timestamp, so that the floor lies
				// above 1.
				rel := releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d`, a.DBTimeMS))
				wantStatus(t, e.lease("POST", relPath, rel, ""), 200)
				a = e.acquire(`{"holder":"good","workers":{"min":3,"max":3},"ttl_ms":60000}`)
				v, sec, above, below = a.FencingVersion, a.LeaseSecret, a.CeilingMS+1, a.FloorMS-1
			}
			before := e.leases()
			eventsBefore := len(e.events())
			other := strings.Repeat("x", 43) // a secret of the right length, not the lease's

			auth := func(token string) []string {
				if token == "" {
					return nil
				}
				return []string{"Authorization", "Bearer " + token, "Content-Type", "application/json"}
			}
			hb := heartbeatBody
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
				{"unknown token heartbeat", "POST", hbPath, hb("good", v, sec, `"ttl_ms":60000`), auth(secretNobody), 401, "unauthorized"},
				{"token without the leases scope", "POST", "/v1/leases", `{"holder":"x"}`, auth(secretIDs), 403, "forbidden"},
				{"admin token without the leases scope", "POST", "/v1/leases", `{"holder":"x"}`, auth(secretAdmin), 403, "forbidden"},
				{"wrong scope heartbeat", "POST", hbPath, hb("good", v, sec, `"ttl_ms":60000`), auth(secretIDs), 403, "forbidden"},
				{"wrong scope release", "POST", relPath, releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d`, above)), auth(secretIDs), 403, "forbidden"},
				{"empty body", "POST", "/v1/leases", "", auth(leaseToken), 400, "invalid"},
				{"not JSON", "POST", "/v1/leases", `holder=x`, auth(leaseToken), 400, "invalid"},
				{"unknown field", "POST", "/v1/leases", `{"holder":"x","colour":"red"}`, auth(leaseToken), 400, "invalid"},
				{"two values", "POST", "/v1/leases", `{"holder":"x"}{"holder":"y"}`, auth(leaseToken), 400, "invalid"},
				{"no holder", "POST", "/v1/leases", `{"workers":{"min":1,"max":2}}`, auth(leaseToken), 400, "invalid"},
				{"holder with a space", "POST", "/v1/leases", `{"holder":"a b"}`, auth(leaseToken), 400, "invalid"},
				{"holder with a newline", "POST", "/v1/leases", `{"holder":"a\nb"}`, auth(leaseToken), 400, "invalid"},
				{"holder not ASCII", "POST", "/v1/leases", `{"holder":"höst"}`, auth(leaseToken), 400, "invalid"},
				{"holder too long", "POST", "/v1/leases", `{"holder":"` + strings.Repeat("h", idgen.MaxHolderLen+1) + `"}`, auth(leaseToken), 400, "invalid"},
				{"datacenter outside the layout", "POST", "/v1/leases", `{"holder":"x","datacenter":32}`, auth(leaseToken), 400, "invalid"},
				{"negative datacenter", "POST", "/v1/leases", `{"holder":"x","datacenter":-1}`, auth(leaseToken), 400, "invalid"},
				{"datacenter as a string", "POST", "/v1/leases", `{"holder":"x","datacenter":"0"}`, auth(leaseToken), 400, "invalid"},
				{"pool above the layout", "POST", "/v1/leases", `{"holder":"x","workers":{"min":30,"max":32}}`, auth(leaseToken), 400, "invalid"},
				{"pool in the node's worker IDs", "POST", "/v1/leases", `{"holder":"x","workers":{"min":0,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"pool reversed", "POST", "/v1/leases", `{"holder":"x","workers":{"min":5,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"pool negative", "POST", "/v1/leases", `{"holder":"x","workers":{"min":-1,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"pool without max", "POST", "/v1/leases", `{"holder":"x","workers":{"min":1}}`, auth(leaseToken), 400, "invalid"},
				{"pool fractional", "POST", "/v1/leases", `{"holder":"x","workers":{"min":1.5,"max":4}}`, auth(leaseToken), 400, "invalid"},
				{"ttl below the minimum", "POST", "/v1/leases", `{"holder":"x","ttl_ms":2999}`, auth(leaseToken), 400, "invalid"},
				{"ttl above the maximum", "POST", "/v1/leases", `{"holder":"x","ttl_ms":300001}`, auth(leaseToken), 400, "invalid"},
				{"ttl negative", "POST", "/v1/leases", `{"holder":"x","ttl_ms":-1}`, auth(leaseToken), 400, "invalid"},
				{"negative ceiling", "POST", "/v1/leases", `{"holder":"x","ceiling_ms":-5}`, auth(leaseToken), 400, "invalid"},
				{"negative max previous ceiling", "POST", "/v1/leases", `{"holder":"x","max_prev_ceiling_ms":-5}`, auth(leaseToken), 400, "invalid"},
				{"heartbeat without a secret", "POST", hbPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"ttl_ms":60000}`, v), auth(leaseToken), 400, "invalid"},
				{"heartbeat with a short secret", "POST", hbPath, hb("good", v, "abc", `"ttl_ms":60000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat without a ttl", "POST", hbPath, hb("good", v, sec, ""), auth(leaseToken), 400, "invalid"},
				{"heartbeat another secret", "POST", hbPath, hb("good", v, other, `"ttl_ms":60000`), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat another caller", "POST", hbPath, hb("good", v, sec, `"ttl_ms":60000`), auth(otherToken), 409, "lease_lost"},
				{"heartbeat wrong version", "POST", hbPath, hb("good", v+1, sec, `"ttl_ms":60000`), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat older version", "POST", hbPath, hb("good", v-1, sec, `"ttl_ms":60000`), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat zero version", "POST", hbPath, hb("good", 0, sec, `"ttl_ms":60000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat another holder", "POST", hbPath, hb("bad", v, sec, `"ttl_ms":60000`), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat unknown worker", "POST", "/v1/leases/0/9/heartbeat", hb("good", 1, sec, `"ttl_ms":60000`), auth(leaseToken), 409, "lease_lost"},
				{"heartbeat worker outside the layout", "POST", "/v1/leases/0/32/heartbeat", hb("good", 1, sec, `"ttl_ms":60000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat datacenter outside the layout", "POST", "/v1/leases/40/3/heartbeat", hb("good", 1, sec, `"ttl_ms":60000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat worker not a number", "POST", "/v1/leases/0/x/heartbeat", hb("good", 1, sec, `"ttl_ms":60000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat ttl out of bounds", "POST", hbPath, hb("good", v, sec, `"ttl_ms":1000`), auth(leaseToken), 400, "invalid"},
				{"heartbeat negative ceiling", "POST", hbPath, hb("good", v, sec, `"ttl_ms":60000,"ceiling_ms":-1`), auth(leaseToken), 400, "invalid"},
				{"release saying nothing", "POST", relPath, releaseBody("good", v, sec, ""), auth(leaseToken), 400, "invalid"},
				{"release at 0", "POST", relPath, releaseBody("good", v, sec, `"last_timestamp_ms":0`), auth(leaseToken), 400, "invalid"},
				{"release saying both", "POST", relPath, releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d,"none_issued":true`, below+1)), auth(leaseToken), 400, "invalid"},
				{"release without a secret", "POST", relPath, fmt.Sprintf(`{"holder":"good","fencing_version":%d,"none_issued":true}`, v), auth(leaseToken), 400, "invalid"},
				{"release another secret", "POST", relPath, releaseBody("good", v, other, `"none_issued":true`), auth(leaseToken), 409, "lease_lost"},
				{"release another caller", "POST", relPath, releaseBody("good", v, sec, `"none_issued":true`), auth(otherToken), 409, "lease_lost"},
				{"release above the ceiling", "POST", relPath, releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d`, above)), auth(leaseToken), 422, "invalid_release"},
				{"release far above the ceiling", "POST", relPath, releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d`, int64(1)<<62)), auth(leaseToken), 422, "invalid_release"},
				{"release below the floor", "POST", relPath, releaseBody("good", v, sec, fmt.Sprintf(`"last_timestamp_ms":%d`, below)), auth(leaseToken), 422, "invalid_release"},
				{"release at 1", "POST", relPath, releaseBody("good", v, sec, `"last_timestamp_ms":1`), auth(leaseToken), 422, "invalid_release"},
				{"release negative", "POST", relPath, releaseBody("good", v, sec, `"last_timestamp_ms":-1`), auth(leaseToken), 400, "invalid"},
				{"release wrong version", "POST", relPath, releaseBody("good", v+1, sec, `"none_issued":true`), auth(leaseToken), 409, "lease_lost"},
				{"release another holder", "POST", relPath, releaseBody("bad", v, sec, `"none_issued":true`), auth(leaseToken), 409, "lease_lost"},
				{"release unknown worker", "POST", "/v1/leases/0/9/release", releaseBody("good", 1, sec, `"none_issued":true`), auth(leaseToken), 409, "lease_lost"},
				{"layout with POST", "POST", "/v1/leases/layout", `{}`, auth(leaseToken), 404, "not_found"},
				{"unknown lease route", "GET", "/v1/leases/0/3", "", auth(leaseToken), 404, "not_found"},
				{"too large", "POST", "/v1/leases", `{"holder":"` + strings.Repeat("x", 70<<10) + `"}`, auth(leaseToken), 413, "too_large"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					rec := e.do(tc.method, tc.target, tc.body, tc.headers...)
					p := wantLeaseProblem(t, rec, tc.status, tc.code)
					if strings.Contains(rec.Body.String(), leaseToken) || strings.Contains(rec.Body.String(), secretIDs) ||
						strings.Contains(rec.Body.String(), sec) || strings.Contains(rec.Header().Get("WWW-Authenticate"), leaseToken) {
						t.Errorf("the answer holds the token or the lease secret: %+v", p)
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
			// added, one per lease named; nothing else was recorded, and
			// nothing for the heartbeat with another secret: the lease is
			// its holder's still.
			lost := map[string]bool{}
			for _, ev := range e.events()[eventsBefore:] {
				k := fmt.Sprintf("%d/%d %s v%d", ev.DatacenterID, ev.WorkerID, ev.Holder, ev.FencingVersion)
				if ev.Kind != allocator.EventLost || lost[k] {
					t.Errorf("unexpected event %+v", ev)
				}
				lost[k] = true
			}
			// good at v of another caller (who names its own holder), good
			// at v+1 and v-1, bad at v, good at 1 on worker 9.
			if k := fmt.Sprintf("0/3 api:%s/good v%d", leaseCaller, v); len(lost) != 5 || lost[k] {
				t.Errorf("got lost events of %d leases %v, want 5 (one per lease a heartbeat answered lease_lost named), none of %s", len(lost), lost, k)
			}
			// The good holder still holds its lease at its version.
			wantStatus(t, e.lease("POST", hbPath, hb("good", v, sec, `"ttl_ms":60000`), ""), 200)
		})
	}
}

// TestLeaseCallerLimits: a caller holds at most --lease-api-max-leases live
// leases and acquires at --lease-api-acquire-rate; past either it gets 429
// too_many and nothing changes. Another caller has limits of its own, and
// heartbeats and releases are never limited.
func TestLeaseCallerLimits(t *testing.T) {
	e := newEnv(t, envOptions{tokens: testTokens, workers: &allocator.WorkerRange{Min: 0, Max: 0},
		leaseAPI: idgen.LeaseSettings{MaxLeases: 2, AcquireRate: 1e-3, AcquireBurst: 4}})
	a := e.acquire(`{"holder":"a"}`)
	e.acquire(`{"holder":"b"}`)
	p := wantLeaseProblem(t, e.lease("POST", "/v1/leases", `{"holder":"c"}`, ""), 429, "too_many")
	if !strings.Contains(p.Detail, "holds 2 leases") {
		t.Errorf("cap refusal: detail %q, want it to say the caller holds 2 leases", p.Detail)
	}
	held := func(owner string) int {
		n := 0
		for _, l := range e.leases() {
			if l.Owner == owner && l.Holder != "" {
				n++
			}
		}
		return n
	}
	if n := held(leaseCaller); n != 2 {
		t.Errorf("%s holds %d leases, want 2", leaseCaller, n)
	}
	// Another caller has a cap and a rate of its own.
	rec := e.leaseAs(otherToken, "POST", "/v1/leases", `{"holder":"x"}`, "")
	wantStatus(t, rec, 201)
	// Heartbeats are never limited.
	for range 10 {
		wantStatus(t, e.lease("POST", fmt.Sprintf("/v1/leases/0/%d/heartbeat", a.Worker),
			heartbeatBody("a", a.FencingVersion, a.LeaseSecret, `"ttl_ms":30000`), ""), 200)
	}
	// A release makes room under the cap: the fourth acquire of the burst.
	wantStatus(t, e.lease("POST", fmt.Sprintf("/v1/leases/0/%d/release", a.Worker),
		releaseBody("a", a.FencingVersion, a.LeaseSecret, `"none_issued":true`), ""), 200)
	e.acquire(`{"holder":"d"}`)
	// The burst of 4 is spent, at one acquire in 1000 s: the rate refuses.
	p = wantLeaseProblem(t, e.lease("POST", "/v1/leases", `{"holder":"e"}`, ""), 429, "too_many")
	if !strings.Contains(p.Detail, "acquire rate") {
		t.Errorf("rate refusal: detail %q, want it to name the acquire rate", p.Detail)
	}
	if n := held(leaseCaller); n != 2 {
		t.Errorf("%s holds %d leases after the refusals, want 2", leaseCaller, n)
	}
}

func TestLeaseAPIOff(t *testing.T) {
	// Without tokens, and with tokens none of which has the leases scope.
	e := newEnv(t, envOptions{token: testToken})
	noLeases := newEnv(t, envOptions{tokens: fmt.Sprintf("only-ids ids %s\n", idgen.HashSecret(secretIDs))})
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
