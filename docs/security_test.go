package docs_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
)

// TestSecurityMatchesServer: every operation of docs/openapi.yaml declares
// its security, with schemes the spec defines, and the server keeps to it.
// An operation that admits no credentials (security: [] or an empty
// requirement {}) is answered without any; one that requires a token
// answers 401 without it and serves with it.
func TestSecurityMatchesServer(t *testing.T) {
	s := loadSpec(t)
	schemes := obj(obj(s["components"])["securitySchemes"])
	srv := newServer(t, true, adminToken)
	// The lease API is on only with a token of the leases scope.
	leaseSrv := newServer(t, true, "", "docs-leases leases "+idgen.HashSecret(leasesSecret))

	for _, op := range s.operations() {
		method, path, _ := strings.Cut(op, " ")
		o := obj(obj(obj(s["paths"])[path])[strings.ToLower(method)])
		reqs, ok := o["security"].([]any)
		if !ok {
			t.Errorf("%s declares no security (an empty list means none)", op)
			continue
		}
		open := len(reqs) == 0
		var named []string
		base, token := srv.URL, adminToken
		for _, r := range reqs {
			if len(obj(r)) == 0 {
				open = true
			}
			for name, scopes := range obj(r) {
				if schemes[name] == nil {
					t.Errorf("%s: security scheme %q is not in components.securitySchemes", op, name)
				}
				named = append(named, name)
				for _, scope := range asList(scopes) {
					if scope == "leases" {
						base, token = leaseSrv.URL, leasesSecret
					}
				}
			}
		}

		target := strings.NewReplacer("{id}", "0", "{name}", "orders", "{datacenter}", "0", "{worker}", "1").Replace(path)
		send := func(token string) int {
			t.Helper()
			var body *strings.Reader
			if method == "POST" || method == "PATCH" {
				body = strings.NewReader(`{}`)
			} else {
				body = strings.NewReader("")
			}
			req, err := http.NewRequest(method, base+target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}

		got := send("")
		switch {
		case open && (got == http.StatusUnauthorized || got == http.StatusForbidden):
			t.Errorf("%s admits no credentials in the spec, but the server answered %d without them", op, got)
		case !open && got != http.StatusUnauthorized:
			t.Errorf("%s requires %v in the spec, but the server answered %d without a token, want 401", op, named, got)
		case !open:
			if got := send(token); got == http.StatusUnauthorized || got == http.StatusForbidden {
				t.Errorf("%s with a token of its scope: got %d", op, got)
			}
		}
	}
}
