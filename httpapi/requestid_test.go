package httpapi_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
)

// generatedID is what the server makes up when the caller sends no valid
// X-Request-ID.
var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "0af7651916cd43dd8448eb211c80319c": true, "req-1/2:3@x": true, "~!": true,
		strings.Repeat("x", 128): true,
		"":                       false, strings.Repeat("x", 129): false, "a b": false, "a\tb": false, "a\nb": false,
		"é": false, "a\x00": false, "a\x7f": false,
	} {
		if got := idgen.ValidRequestID(id); got != want {
			t.Errorf("ValidRequestID(%q): got %v, want %v", id, got, want)
		}
	}
}

// TestRequestID checks that every answer carries a request ID: the
// caller's when valid, else a new one; that it is on the request's log
// lines; and that the lease events a request causes record it.
func TestRequestID(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{token: testToken, logBuffer: logs})
	adminH := bearer(testToken)
	for _, tc := range []struct {
		name   string
		method string
		target string
		header []string
		status int
		keep   bool // the caller's X-Request-ID comes back
	}{
		{"kept on 200", "GET", "/ids", []string{"X-Request-ID", "req-200"}, 200, true},
		{"kept in any case", "GET", "/ids", []string{"x-request-id", "req-lower"}, 200, true},
		{"kept at 128 bytes", "GET", "/ids", []string{"X-Request-ID", strings.Repeat("r", 128)}, 200, true},
		{"kept on a 400 problem", "GET", "/ids?count=0", []string{"X-Request-ID", "req-400"}, 400, true},
		{"kept on a 401 problem", "GET", "/admin/leases", []string{"X-Request-ID", "req-401"}, 401, true},
		{"kept on an unknown route", "GET", "/nope", []string{"X-Request-ID", "req-404"}, 404, true},
		{"kept on a wrong method", "DELETE", "/ids", []string{"X-Request-ID", "req-405"}, 405, true},
		{"kept on the admin API", "GET", "/admin/leases", append([]string{"X-Request-ID", "req-admin"}, adminH...), 200, true},
		{"made up without one", "GET", "/ids", nil, 200, false},
		{"made up on a problem", "GET", "/ids?count=0", nil, 400, false},
		{"made up for 129 bytes", "GET", "/ids", []string{"X-Request-ID", strings.Repeat("r", 129)}, 200, false},
		{"made up for a space", "GET", "/ids", []string{"X-Request-ID", "req 1"}, 200, false},
		{"made up for non-ASCII", "GET", "/ids", []string{"X-Request-ID", "réq"}, 200, false},
		{"made up for an empty one", "GET", "/ids", []string{"X-Request-ID", ""}, 200, false},
		{"made up for two", "GET", "/ids", []string{"X-Request-ID", "a", "X-Request-ID", "b"}, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do(tc.method, tc.target, "", tc.header...)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: got status %d, want %d: %s", tc.method, tc.target, rec.Code, tc.status, rec.Body.String())
			}
			got := rec.Header().Values("X-Request-ID")
			if len(got) != 1 {
				t.Fatalf("X-Request-ID: got %q, want one value", got)
			}
			if tc.keep && got[0] != tc.header[1] {
				t.Errorf("X-Request-ID: got %q, want the caller's %q", got[0], tc.header[1])
			}
			if !tc.keep && !generatedID.MatchString(got[0]) {
				t.Errorf("X-Request-ID: got %q, want a new one of 32 hex digits", got[0])
			}
		})
	}

	// New IDs differ.
	seen := map[string]bool{}
	for range 100 {
		id := e.do("GET", "/ids", "").Header().Get("X-Request-ID")
		if seen[id] {
			t.Fatalf("request ID %s made up twice", id)
		}
		seen[id] = true
	}

	// The request's log lines carry it: the debug line of every request,
	// and the audit line of an admin change, with the caller.
	e.do("GET", "/ids", "", "X-Request-ID", "req-logged")
	ns := e.createNamespace(allocator.Namespace{Name: "logged"})
	rec := e.do("DELETE", "/admin/namespaces/"+ns.Name, "", append([]string{"X-Request-ID", "req-delete"}, adminH...)...)
	wantStatus(t, rec, 200)
	for _, want := range []string{
		`msg="http request" method=GET route=/ids status=200`,
		`request_id=req-logged`,
		`msg="namespace deleted" namespace=logged max_id=0 version=0 request_id=req-delete caller=admin-token`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log: want a line with %q, got\n%s", want, logs.String())
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="http request"`) && !strings.Contains(line, "request_id=") {
			t.Errorf("log line without request_id: %s", line)
		}
	}

	// An eviction records the request ID and the caller in its event.
	release := testserver.HoldWorker(t, e.store, 7)
	_ = release // evicted below; nothing to release
	rec = e.do("POST", "/admin/leases/0/7/evict", "", append([]string{"X-Request-ID", "req-evict"}, adminH...)...)
	wantStatus(t, rec, 200)
	events, err := e.store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Kind: allocator.EventEvict, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].RequestID != "req-evict" || events[0].Owner != idgen.AdminTokenName {
		t.Errorf("evict events: got %+v, want one with request ID req-evict and owner %s", events, idgen.AdminTokenName)
	}
}

// TestRequestIDOnErrorLines checks the request ID on the lines of failed
// requests: a handler's panic on the admin API (whose requests carry their
// ID in their context), and a 404 on /ids (which has no such context).
func TestRequestIDOnErrorLines(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{store: brokenStore{testserver.OpenStore(t, "sqlite")}, token: testToken, logBuffer: logs})
	rec := e.do("GET", "/admin/leases", "", append([]string{"X-Request-ID", "req-panic"}, bearer(testToken)...)...)
	wantStatus(t, rec, 500)
	if got := rec.Header().Get("X-Request-ID"); got != "req-panic" {
		t.Errorf("X-Request-ID of the 500: got %q, want req-panic", got)
	}
	wantStatus(t, e.do("GET", "/ids?namespace=absent", "", "X-Request-ID", "req-missing"), 404)
	var panicked, missing bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="handler panicked"`) {
			panicked = true
			if strings.Count(line, "request_id=") != 1 || !strings.Contains(line, "request_id=req-panic") || !strings.Contains(line, "caller=admin-token") {
				t.Errorf("panic line: got %s, want request_id=req-panic once and caller=admin-token", line)
			}
		}
		if strings.Contains(line, "status=404") && strings.Contains(line, "request_id=req-missing") {
			missing = true
		}
	}
	if !panicked || !missing {
		t.Errorf("log: want the panic line and the 404 line with their request IDs, got\n%s", logs.String())
	}
}
