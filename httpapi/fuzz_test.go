package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

// FuzzIDsQuery sends arbitrary query strings to GET /ids and GET
// /ids/compose and arbitrary paths below /ids/ through Handler. Whatever comes in, the answer is a
// 200 JSON document or an application/problem+json one, never a panic and
// never an internal error.
func FuzzIDsQuery(f *testing.F) {
	e := newEnv(f, envOptions{maxCount: 100})
	e.createNamespace(allocator.Namespace{Name: "fz", Step: 1000, MaxStep: 1 << 20})

	for _, seed := range []struct{ query, path string }{
		{"", "1"},
		{"count=1", "123456789012345"},
		{"count=0", "abc"},
		{"count=101", "-1"},
		{"count=1e3", "9223372036854775807"},
		{"count=1&count=2", "9223372036854775808"},
		{"namespace=fz&count=3", "%2F"},
		{"namespace=Bad%20Name", ""},
		{"namespace=x;DROP TABLE segments", "1/2"},
		{"explain=true&count=2", "0"},
		{"explain=maybe", "+1"},
		{"namespace=fz&explain=true", " 1"},
		{"%zz=1", "%zz"},
		{"count=%31", "00000000000000000000001"},
		{"&&&count=5&&", "1e3"},
		{"count", "１"},
		{"namespace=absent", "\x00"},
		{"format=base32&count=3", "03ADS4J1W00ZA"},
		{"format=hex&namespace=fz", "08qp7whHgCo"},
		{"format=base62&explain=true", "01a9b92483c003ea"},
		{"time=2026-11-27T00:00:00Z&format=hex", "zzzzzzzzzzz"},
		{"time=1969-01-01T00:00:00Z", "8000000000000"},
	} {
		f.Add(seed.query, seed.path)
	}

	f.Fuzz(func(t *testing.T, query, path string) {
		reqs := []*http.Request{
			httptest.NewRequest("GET", "/ids", nil),
			httptest.NewRequest("GET", "/ids", nil),
			httptest.NewRequest("GET", "/ids/compose", nil),
		}
		reqs[0].URL.RawQuery = query
		reqs[2].URL.RawQuery = query
		reqs[1].URL.Path = "/ids/" + path
		reqs[1].URL.RawPath = ""
		for _, req := range reqs {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			ct := rec.Header().Get("Content-Type")
			switch rec.Code {
			case http.StatusOK:
				if ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
					t.Fatalf("query %q path %q: 200 with %q %q, want valid application/json", query, req.URL.Path, ct, rec.Body.String())
				}
			case http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable:
				checkProblem(t, rec.Code, ct, rec.Body.Bytes())
			default:
				t.Fatalf("query %q path %q: status %d (%s), want 200, 400, 404 or 503", query, req.URL.Path, rec.Code, rec.Body.String())
			}
		}
	})
}
