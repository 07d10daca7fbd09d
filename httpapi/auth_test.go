package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/testserver"
)

// Secrets of the test callers; testTokens is their tokens file.
const (
	secretIDs    = "ids-caller-secret-0123456789abcdef"
	secretLeases = "leases-caller-secret-0123456789abcdef"
	secretAdmin  = "admin-caller-secret-0123456789abcdef"
	secretAll    = "all-scopes-secret-0123456789abcdef"
	secretNobody = "nobody-knows-this-secret-0123456789"
)

var testTokens = fmt.Sprintf(`# callers of the tests
ids-caller    ids              %s
leases-caller leases           %s
admin-caller  admin            %s
all-caller    ids,leases,admin %s   # every scope
`, idgen.HashSecret(secretIDs), idgen.HashSecret(secretLeases), idgen.HashSecret(secretAdmin), idgen.HashSecret(secretAll))

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

// TestScopes checks every route family against every kind of credential,
// with tokens and without: 404 for an API that is off, 401 for a missing,
// malformed or unknown token, 403 for a known token without the scope.
func TestScopes(t *testing.T) {
	logs := &testserver.LogBuffer{}
	withTokens := newEnv(t, envOptions{tokens: testTokens, token: testToken, logBuffer: logs})
	withoutTokens := newEnv(t, envOptions{token: testToken, logBuffer: logs})
	tokensNoAdmin := newEnv(t, envOptions{tokens: fmt.Sprintf("only-ids ids %s\n", idgen.HashSecret(secretIDs)), logBuffer: logs})

	// The routes of each family; /v1/leases/probe is no route, so a
	// request that passes the lease API's check gets "no such route".
	families := map[string][]string{
		"ids":    {"/ids", "/ids/1"},
		"admin":  {"/admin/leases", "/admin/namespaces"},
		"leases": {"/v1/leases/probe"},
		"open":   {"/healthz", "/metrics", "/"},
	}
	type want struct {
		status int
		detail string // in the problem's detail
	}
	ok := want{200, ""}
	noRoute := want{404, "no such route"}
	for _, tc := range []struct {
		name   string
		env    *env
		header []string
		want   map[string]want
	}{
		{"tokens: none", withTokens, nil, map[string]want{
			"ids": {401, "Authorization"}, "admin": {401, "Authorization"}, "leases": {401, "Authorization"}, "open": ok}},
		{"tokens: malformed", withTokens, []string{"Authorization", "Basic eDp5"}, map[string]want{
			"ids": {401, "malformed"}, "admin": {401, "malformed"}, "leases": {401, "malformed"}, "open": ok}},
		{"tokens: unknown", withTokens, bearer(secretNobody), map[string]want{
			"ids": {401, "unknown token"}, "admin": {401, "unknown token"}, "leases": {401, "unknown token"}, "open": ok}},
		{"tokens: ids", withTokens, bearer(secretIDs), map[string]want{
			"ids": ok, "admin": {403, "ids-caller lacks the admin scope"}, "leases": {403, "lacks the leases scope"}, "open": ok}},
		{"tokens: leases", withTokens, bearer(secretLeases), map[string]want{
			"ids": {403, "leases-caller lacks the ids scope"}, "admin": {403, "lacks the admin scope"}, "leases": noRoute, "open": ok}},
		{"tokens: admin", withTokens, bearer(secretAdmin), map[string]want{
			"ids": {403, "lacks the ids scope"}, "admin": ok, "leases": {403, "lacks the leases scope"}, "open": ok}},
		{"tokens: all", withTokens, bearer(secretAll), map[string]want{
			"ids": ok, "admin": ok, "leases": noRoute, "open": ok}},
		{"tokens: admin token", withTokens, bearer(testToken), map[string]want{
			"ids": {403, "admin-token lacks the ids scope"}, "admin": ok, "leases": {403, "lacks the leases scope"}, "open": ok}},
		{"tokens without leases or admin scope: none", tokensNoAdmin, nil, map[string]want{
			"ids":    {401, "Authorization"},
			"admin":  {404, "the admin API is off"},
			"leases": {404, "the lease API is off: no token has the leases scope"}, "open": ok}},
		{"tokens without leases or admin scope: ids", tokensNoAdmin, bearer(secretIDs), map[string]want{
			"ids":    ok,
			"admin":  {404, "the admin API is off"},
			"leases": {404, "the lease API is off"}, "open": ok}},
		{"no tokens: none", withoutTokens, nil, map[string]want{
			"ids": ok, "admin": {401, "Authorization"}, "leases": {404, "the lease API is off: no token has the leases scope"}, "open": ok}},
		{"no tokens: admin token", withoutTokens, bearer(testToken), map[string]want{
			"ids": ok, "admin": ok, "leases": {404, "the lease API is off"}, "open": ok}},
		{"no tokens: a file token", withoutTokens, bearer(secretAll), map[string]want{
			"ids": ok, "admin": {403, "wrong admin token"}, "leases": {404, "the lease API is off"}, "open": ok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for family, targets := range families {
				w := tc.want[family]
				for _, target := range targets {
					if target == "/ids/1" && w.status == 200 {
						target = "/ids/4194304"
					}
					rec := tc.env.do("GET", target, "", tc.header...)
					if rec.Code != w.status {
						t.Errorf("GET %s: got status %d, want %d: %s", target, rec.Code, w.status, rec.Body.String())
						continue
					}
					if rec.Code >= 300 && !strings.HasPrefix(target, "/metrics") {
						p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
						if !strings.Contains(p.Detail, w.detail) {
							t.Errorf("GET %s: got detail %q, want it to contain %q", target, p.Detail, w.detail)
						}
					}
					if wa := rec.Header().Get("WWW-Authenticate"); (rec.Code == 401) != strings.HasPrefix(wa, "Bearer") {
						t.Errorf("GET %s: got WWW-Authenticate %q with status %d, want a Bearer challenge exactly on 401", target, wa, rec.Code)
					}
					for _, secret := range []string{secretIDs, secretLeases, secretAdmin, secretAll, secretNobody, testToken} {
						if strings.Contains(rec.Body.String(), secret) {
							t.Errorf("GET %s: the body holds a secret: %s", target, rec.Body.String())
						}
					}
				}
			}
		})
	}
	// Every request was logged (at debug level); no secret was.
	if !strings.Contains(logs.String(), "status=403") {
		t.Fatalf("the log misses the requests:\n%s", logs.String())
	}
	for _, secret := range []string{secretIDs, secretLeases, secretAdmin, secretAll, secretNobody, testToken} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the secret %s", secret)
		}
	}
}
