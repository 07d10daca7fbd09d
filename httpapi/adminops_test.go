package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/testserver"
)

// tables is what the admin API may change: the lease rows (but the node's
// own, which its heartbeats move), the lease events and the namespaces.
type tables struct {
	leases     []allocator.Lease
	events     []allocator.LeaseEvent
	namespaces []allocator.Namespace
}

func (e *env) tables() tables {
	e.tb.Helper()
	ctx := context.Background()
	leases, err := e.store.ListLeases(ctx)
	if err != nil {
		e.tb.Fatal(err)
	}
	own := e.keeper.Status().Lease.LeaseKey
	var others []allocator.Lease
	for _, l := range leases {
		if l.LeaseKey != own {
			others = append(others, l)
		}
	}
	events, err := e.store.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 100000})
	if err != nil {
		e.tb.Fatal(err)
	}
	nss, err := e.store.ListNamespaces(ctx)
	if err != nil {
		e.tb.Fatal(err)
	}
	return tables{others, events, nss}
}

// wantUnchanged fails the test if the tables differ from before.
func (e *env) wantUnchanged(what string, before tables) {
	e.tb.Helper()
	if after := e.tables(); !reflect.DeepEqual(after, before) {
		e.tb.Errorf("%s changed the tables:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// adminAs sends an admin request with a caller's secret and a request ID.
func (e *env) adminAs(secret, requestID, method, target, body string) *httptest.ResponseRecorder {
	e.tb.Helper()
	h := append(bearer(secret), "X-Request-ID", requestID)
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	return e.do(method, target, body, h...)
}

type eventsPage struct {
	Events    []httpapi.LeaseEventJSON `json:"events"`
	NextAfter *int64                   `json:"next_after"`
}

func TestAdminOperations(t *testing.T) {
	testserver.Parallel(t, testserver.Dialects, testAdminOperations)
}

func testAdminOperations(t *testing.T, dialect string) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{dialect: dialect, token: testToken, tokens: testTokens, logBuffer: logs})
	ctx := context.Background()

	// Events: the node's own claim, another holder's, and a remote
	// holder's claim and release with its owner and request IDs.
	testserver.HoldWorker(t, e.store, 3)
	res, err := e.store.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 4, MaxWorkerID: 4, Holder: "leases-caller/host-1",
		TTL: time.Hour, Owner: "leases-caller", RequestID: "req-claim"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: "leases-caller/host-1",
		FencingVersion: res.Lease.FencingVersion, Owner: "leases-caller", RequestID: "req-release"}); err != nil {
		t.Fatal(err)
	}

	t.Run("events", func(t *testing.T) {
		all, err := e.store.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) < 4 {
			t.Fatalf("store: got %d events, want at least 4", len(all))
		}
		// Pages of two until next_after is null give every event once.
		var got []httpapi.LeaseEventJSON
		after := int64(0)
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatal("paging does not end")
			}
			rec := e.adminAs(secretAdmin, "req-page", "GET", fmt.Sprintf("/admin/lease-events?limit=2&after=%d", after), "")
			wantStatus(t, rec, 200)
			var page eventsPage
			decode(t, rec, &page)
			got = append(got, page.Events...)
			if page.NextAfter == nil {
				if len(page.Events) > 2 {
					t.Errorf("last page: got %d events, want at most 2", len(page.Events))
				}
				break
			}
			if len(page.Events) != 2 || *page.NextAfter != page.Events[1].ID {
				t.Fatalf("page after %d: got %d events and next_after %d, want 2 and the last one's ID", after, len(page.Events), *page.NextAfter)
			}
			after = *page.NextAfter
		}
		if len(got) != len(all) {
			t.Fatalf("paged: got %d events, want %d", len(got), len(all))
		}
		for i, ev := range all {
			g := got[i]
			if g.ID != ev.ID || g.Kind != string(ev.Kind) || g.Holder != ev.Holder || g.Worker != ev.WorkerID ||
				g.FencingVersion != ev.FencingVersion || g.Detail != ev.Detail || !g.At.Equal(ev.At) ||
				deref(g.Owner) != ev.Owner || deref(g.RequestID) != ev.RequestID {
				t.Errorf("event %d: got %+v, want %+v", i, g, ev)
			}
		}

		// The filters.
		w3 := 0
		for _, ev := range all {
			if ev.WorkerID == 3 {
				w3++
			}
		}
		for _, tc := range []struct {
			query string
			want  func(httpapi.LeaseEventJSON) bool
			n     int // -1: do not count
		}{
			{"kind=release", func(ev httpapi.LeaseEventJSON) bool {
				return ev.Kind == "release" && deref(ev.RequestID) == "req-release"
			}, 1},
			{"owner=leases-caller", func(ev httpapi.LeaseEventJSON) bool { return deref(ev.Owner) == "leases-caller" }, 2},
			{"holder=" + url.QueryEscape("leases-caller/host-1") + "&kind=acquire", func(ev httpapi.LeaseEventJSON) bool {
				return ev.Holder == "leases-caller/host-1" && deref(ev.RequestID) == "req-claim"
			}, 1},
			{"worker=3", func(ev httpapi.LeaseEventJSON) bool { return ev.Worker == 3 }, w3},
			{"datacenter=0&worker=4", func(ev httpapi.LeaseEventJSON) bool { return ev.Worker == 4 }, 2},
			{"since=" + url.QueryEscape(all[len(all)-1].At.Add(time.Hour).Format(time.RFC3339)), nil, 0},
			{"until=2020-01-01T00:00:00Z", nil, 0},
			{"since=2020-01-01T00:00:00Z&until=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339Nano)), nil, len(all)},
			{"after=" + strconv.FormatInt(all[len(all)-1].ID, 10), nil, 0},
		} {
			rec := e.adminAs(secretAdmin, "req-filter", "GET", "/admin/lease-events?"+tc.query, "")
			wantStatus(t, rec, 200)
			var page eventsPage
			decode(t, rec, &page)
			if page.NextAfter != nil || (tc.n >= 0 && len(page.Events) != tc.n) {
				t.Errorf("?%s: got %d events, next_after %v; want %d and null", tc.query, len(page.Events), page.NextAfter, tc.n)
			}
			for _, ev := range page.Events {
				if tc.want != nil && !tc.want(ev) {
					t.Errorf("?%s: got %+v, which the filter excludes", tc.query, ev)
				}
			}
		}

		// Bad queries: 400, nothing changed.
		before := e.tables()
		for _, q := range []string{
			"after=-1", "after=x", "limit=0", "limit=1001", "limit=ten", "limit=1&limit=2",
			"datacenter=32", "datacenter=-1", "worker=32", "worker=1.5", "kind=stolen", "kind=",
			"since=yesterday", "until=2026-13-01T00:00:00Z", "since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z",
			"holder=", "holder=" + strings.Repeat("h", 256), "owner=" + strings.Repeat("o", 256),
			"colour=red", "after=1;limit=2", "%zz=1",
		} {
			rec := e.adminAs(secretAdmin, "req-bad", "GET", "/admin/lease-events?"+q, "")
			wantStatus(t, rec, 400)
		}
		e.wantUnchanged("bad event queries", before)
	})

	t.Run("evict", func(t *testing.T) {
		held := testserver.HoldWorker(t, e.store, 5)
		_ = held // evicted here
		row := testserver.LeaseRow(t, e.store, 0, 5)
		reason := "host decommissioned"
		rec := e.adminAs(secretAdmin, "req-evict", "POST", "/admin/leases/0/5/evict", `{"reason":"`+reason+`"}`)
		wantStatus(t, rec, 200)
		var out struct {
			Datacenter     int64 `json:"datacenter"`
			Worker         int64 `json:"worker"`
			FencingVersion int64 `json:"fencing_version"`
			CeilingMS      int64 `json:"ceiling_ms"`
		}
		decode(t, rec, &out)
		after := testserver.LeaseRow(t, e.store, 0, 5)
		if out.FencingVersion != row.FencingVersion+1 || after.FencingVersion != out.FencingVersion || after.Holder != "" ||
			after.CeilingMS != row.CeilingMS || out.CeilingMS != row.CeilingMS || out.Worker != 5 {
			t.Errorf("evict: got answer %+v and row %+v; want version %d, no holder, ceiling %d kept", out, after, row.FencingVersion+1, row.CeilingMS)
		}
		evs, err := e.store.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Kind: allocator.EventEvict, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Owner != "admin-caller" || evs[0].RequestID != "req-evict" || evs[0].Holder != row.Holder ||
			evs[0].FencingVersion != row.FencingVersion || !strings.Contains(evs[0].Detail, reason) {
			t.Errorf("evict events: got %+v, want one naming %s at version %d, owner admin-caller, request req-evict, the reason",
				evs, row.Holder, row.FencingVersion)
		}
		if !strings.Contains(logs.String(), `msg="lease evicted" datacenter=0 worker=5`) ||
			!strings.Contains(logs.String(), "request_id=req-evict caller=admin-caller") {
			t.Errorf("log: want the eviction with its request ID and caller, got\n%s", logs.String())
		}

		// Refusals and bad input: a 4xx problem each, nothing changed.
		testserver.HoldWorker(t, e.store, 8)
		before := e.tables()
		for _, tc := range []struct {
			name, path, body, contentType string
			status                        int
			code                          string
		}{
			{"evicted already", "/admin/leases/0/5/evict", "", "", 409, "lease_not_held"},
			{"never claimed", "/admin/leases/0/6/evict", `{"reason":"x"}`, "", 409, "lease_not_held"},
			{"moved past the version", "/admin/leases/0/8/evict", `{"fencing_version":99}`, "", 409, "lease_lost"},
			{"datacenter not a number", "/admin/leases/x/8/evict", "", "", 400, "invalid"},
			{"datacenter negative", "/admin/leases/-1/8/evict", "", "", 400, "invalid"},
			{"datacenter beyond the layout", "/admin/leases/32/8/evict", "", "", 400, "invalid"},
			{"worker beyond the layout", "/admin/leases/0/99/evict", "", "", 400, "invalid"},
			{"worker huge", "/admin/leases/0/99999999999999999999/evict", "", "", 400, "invalid"},
			{"reason a number", "/admin/leases/0/8/evict", `{"reason":5}`, "", 400, "invalid"},
			{"unknown field", "/admin/leases/0/8/evict", `{"colour":"red"}`, "", 400, "invalid"},
			{"version 0", "/admin/leases/0/8/evict", `{"fencing_version":0}`, "", 400, "invalid"},
			{"version negative", "/admin/leases/0/8/evict", `{"fencing_version":-3}`, "", 400, "invalid"},
			{"version not a number", "/admin/leases/0/8/evict", `{"fencing_version":"abc"}`, "", 400, "invalid"},
			{"reason too long", "/admin/leases/0/8/evict", `{"reason":"` + strings.Repeat("r", 1025) + `"}`, "", 400, "invalid"},
			{"reason with NUL", "/admin/leases/0/8/evict", `{"reason":"a\u0000b"}`, "", 400, "invalid"},
			{"two JSON values", "/admin/leases/0/8/evict", `{} {}`, "", 400, "invalid"},
			{"not JSON", "/admin/leases/0/8/evict", `reason=x`, "text/plain", 400, "invalid"},
			{"malformed JSON", "/admin/leases/0/8/evict", `{"reason":`, "", 400, "invalid"},
			{"body too large", "/admin/leases/0/8/evict", `{"reason":"` + strings.Repeat("r", 70<<10) + `"}`, "", 413, "too_large"},
		} {
			h := append(bearer(secretAdmin), "X-Request-ID", "req-refused")
			if tc.body != "" {
				ct := tc.contentType
				if ct == "" {
					ct = "application/json"
				}
				h = append(h, "Content-Type", ct)
			}
			rec := e.do("POST", tc.path, tc.body, h...)
			wantStatus(t, rec, tc.status)
			if p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()); p.Code != tc.code {
				t.Errorf("%s: got code %q, want %q: %s", tc.name, p.Code, tc.code, p.Detail)
			}
		}
		// Callers without the scope, or without a token.
		wantStatus(t, e.adminAs(secretIDs, "req-ids", "POST", "/admin/leases/0/8/evict", ""), 403)
		wantStatus(t, e.adminAs(secretLeases, "req-leases", "POST", "/admin/leases/0/8/evict", ""), 403)
		wantStatus(t, e.do("POST", "/admin/leases/0/8/evict", ""), 401)
		wantStatus(t, e.adminAs(secretNobody, "req-nobody", "POST", "/admin/leases/0/8/evict", ""), 401)
		e.wantUnchanged("refused evictions", before)

		// The version the operator saw is honoured.
		v := testserver.LeaseRow(t, e.store, 0, 8).FencingVersion
		wantStatus(t, e.adminAs(testToken, "req-versioned", "POST", "/admin/leases/0/8/evict", fmt.Sprintf(`{"fencing_version":"%d"}`, v)), 200)
		if got := testserver.LeaseRow(t, e.store, 0, 8); got.Holder != "" || got.FencingVersion != v+1 {
			t.Errorf("evict at version %d: got row %+v", v, got)
		}
	})

	t.Run("namespace delete", func(t *testing.T) {
		rec := e.adminAs(secretAdmin, "req-create", "POST", "/admin/namespaces", `{"name":"doomed","start":"1000","step":10}`)
		wantStatus(t, rec, 201)
		wantStatus(t, e.do("GET", "/ids?count=3&namespace=doomed", "", bearer(secretIDs)...), 200)

		rec = e.adminAs(secretAdmin, "req-delete", "DELETE", "/admin/namespaces/doomed", "")
		wantStatus(t, rec, 200)
		var out struct {
			Name      string    `json:"name"`
			MaxID     string    `json:"max_id"`
			Version   int64     `json:"version"`
			DeletedAt time.Time `json:"deleted_at"`
		}
		decode(t, rec, &out)
		maxID, err := strconv.ParseInt(out.MaxID, 10, 64)
		if err != nil || out.Name != "doomed" || maxID < 1002 || out.DeletedAt.IsZero() {
			t.Fatalf("delete: got %+v, want doomed with max_id of at least 1002 and a time", out)
		}
		if !strings.Contains(logs.String(), `msg="namespace deleted" namespace=doomed max_id=`+out.MaxID) ||
			!strings.Contains(logs.String(), "request_id=req-delete caller=admin-caller") {
			t.Errorf("log: want the deletion with its request ID and caller, got\n%s", logs.String())
		}
		wantStatus(t, e.adminAs(secretAdmin, "req-get", "GET", "/admin/namespaces/doomed", ""), 404)

		// Refusals and bad input: a 4xx problem each, nothing changed.
		before := e.tables()
		for _, tc := range []struct {
			target string
			status int
			detail string
		}{
			{"/admin/namespaces/doomed", 404, `namespace "doomed" does not exist or was deleted already`},
			{"/admin/namespaces/never-was", 404, "does not exist"},
			{"/admin/namespaces/Doomed", 400, "namespace must match"},
			{"/admin/namespaces/" + url.PathEscape("x'; DROP TABLE segments; --"), 400, "namespace must match"},
			{"/admin/namespaces/" + strings.Repeat("a", 65), 400, "namespace must match"},
		} {
			rec := e.adminAs(secretAdmin, "req-refused", "DELETE", tc.target, "")
			wantStatus(t, rec, tc.status)
			if p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()); !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("DELETE %s: got detail %q, want %q in it", tc.target, p.Detail, tc.detail)
			}
		}
		wantStatus(t, e.adminAs(secretIDs, "req-ids", "DELETE", "/admin/namespaces/orders", ""), 403)
		// Created again below the old counter: refused.
		rec = e.adminAs(secretAdmin, "req-revive-low", "POST", "/admin/namespaces", fmt.Sprintf(`{"name":"doomed","start":"%d"}`, maxID))
		wantStatus(t, rec, 400)
		if !strings.Contains(rec.Body.String(), "was deleted at max_id "+out.MaxID) {
			t.Errorf("re-create below the tombstone: got %s, want the old max_id named", rec.Body.String())
		}
		e.wantUnchanged("refused deletions", before)

		// Created again above it: revived, and logged as such.
		rec = e.adminAs(secretAdmin, "req-revive", "POST", "/admin/namespaces", fmt.Sprintf(`{"name":"doomed","start":"%d"}`, maxID+1))
		wantStatus(t, rec, 201)
		if !strings.Contains(logs.String(), `msg="namespace revived" namespace=doomed max_id=`+out.MaxID) ||
			!strings.Contains(logs.String(), "request_id=req-revive caller=admin-caller") {
			t.Errorf("log: want the revival with its request ID and caller, got\n%s", logs.String())
		}
	})

	for _, secret := range []string{secretIDs, secretLeases, secretAdmin, secretAll, secretNobody, testToken} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a secret")
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
