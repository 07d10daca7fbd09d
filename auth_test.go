package idgen_test

import (
	"errors"
	"testing"

	"github.com/idgen-project/idgen"
)

// TestAuthorize walks the rules of every family, for every transport: who
// may call, with which token, and the refusal otherwise.
func TestAuthorize(t *testing.T) {
	tokens, err := idgen.ParseTokens("t", []byte(
		"ids-caller ids "+idgen.HashSecret("s-ids")+"\n"+
			"lease-caller leases "+idgen.HashSecret("s-leases")+"\n"+
			"all-caller ids,leases,admin "+idgen.HashSecret("s-all")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	idsOnly, err := idgen.ParseTokens("t", []byte("ids-caller ids "+idgen.HashSecret("s-ids")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(s string) []string { return []string{"Bearer " + s} }
	for _, tc := range []struct {
		name   string
		auth   *idgen.Authorizer
		header []string
		scope  idgen.Scopes
		caller string     // "" with code "": an open family
		code   idgen.Code // "" for a pass
	}{
		{"no tokens: ids open", idgen.NewAuthorizer("", nil), nil, idgen.ScopeIDs, "", ""},
		{"no tokens: ids open whatever is sent", idgen.NewAuthorizer("", nil), bearer("junk"), idgen.ScopeIDs, "", ""},
		{"no tokens: leases off", idgen.NewAuthorizer("", nil), bearer("s-leases"), idgen.ScopeLeases, "", idgen.NotFound},
		{"no tokens, no admin token: admin off", idgen.NewAuthorizer("", nil), bearer("x"), idgen.ScopeAdmin, "", idgen.NotFound},
		{"admin token", idgen.NewAuthorizer("adm", nil), bearer("adm"), idgen.ScopeAdmin, idgen.AdminTokenName, ""},
		{"wrong admin token", idgen.NewAuthorizer("adm", nil), bearer("nope"), idgen.ScopeAdmin, "", idgen.Forbidden},
		{"admin token missing", idgen.NewAuthorizer("adm", nil), nil, idgen.ScopeAdmin, "", idgen.Unauthorized},
		{"ids with its scope", idgen.NewAuthorizer("", tokens), bearer("s-ids"), idgen.ScopeIDs, "ids-caller", ""},
		{"ids without a token", idgen.NewAuthorizer("", tokens), nil, idgen.ScopeIDs, "", idgen.Unauthorized},
		{"ids with an unknown token", idgen.NewAuthorizer("", tokens), bearer("nobody"), idgen.ScopeIDs, "", idgen.Unauthorized},
		{"ids malformed: two headers", idgen.NewAuthorizer("", tokens), []string{"Bearer s-ids", "Bearer s-ids"}, idgen.ScopeIDs, "", idgen.Unauthorized},
		{"ids malformed: basic", idgen.NewAuthorizer("", tokens), []string{"Basic eDp5"}, idgen.ScopeIDs, "", idgen.Unauthorized},
		{"ids malformed: a blank in the secret", idgen.NewAuthorizer("", tokens), []string{"Bearer s ids"}, idgen.ScopeIDs, "", idgen.Unauthorized},
		{"bearer in any case", idgen.NewAuthorizer("", tokens), []string{"bEaReR s-ids"}, idgen.ScopeIDs, "ids-caller", ""},
		{"ids without the scope", idgen.NewAuthorizer("", tokens), bearer("s-leases"), idgen.ScopeIDs, "", idgen.Forbidden},
		{"leases with its scope", idgen.NewAuthorizer("", tokens), bearer("s-leases"), idgen.ScopeLeases, "lease-caller", ""},
		{"leases without the scope", idgen.NewAuthorizer("", tokens), bearer("s-ids"), idgen.ScopeLeases, "", idgen.Forbidden},
		{"leases off: no token has the scope", idgen.NewAuthorizer("", idsOnly), bearer("s-ids"), idgen.ScopeLeases, "", idgen.NotFound},
		{"admin scope", idgen.NewAuthorizer("", tokens), bearer("s-all"), idgen.ScopeAdmin, "all-caller", ""},
		{"admin off with tokens", idgen.NewAuthorizer("", idsOnly), bearer("s-ids"), idgen.ScopeAdmin, "", idgen.NotFound},
		{"admin token beside tokens", idgen.NewAuthorizer("adm", idsOnly), bearer("adm"), idgen.ScopeAdmin, idgen.AdminTokenName, ""},
		{"admin token has no ids scope", idgen.NewAuthorizer("adm", idsOnly), bearer("adm"), idgen.ScopeIDs, "", idgen.Forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller, err := tc.auth.Authorize(tc.header, tc.scope)
			var e *idgen.Error
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("got %v, want %q to pass", err, tc.caller)
			case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code || e.Detail == ""):
				t.Fatalf("got %v, want a %s refusal", err, tc.code)
			case caller.Name != tc.caller:
				t.Errorf("caller %q, want %q", caller.Name, tc.caller)
			}
		})
	}
}

// TestSetTokens: a reload takes effect for the next check, the admin token
// stays, and a nil set leaves the node without tokens.
func TestSetTokens(t *testing.T) {
	a := idgen.NewAuthorizer("adm", nil)
	if !a.On(idgen.ScopeAdmin) || a.On(idgen.ScopeLeases) || a.HasTokens() {
		t.Errorf("without tokens: admin on %v, leases on %v, tokens %v; want true, false, false", a.On(idgen.ScopeAdmin), a.On(idgen.ScopeLeases), a.HasTokens())
	}
	set, err := idgen.ParseTokens("t", []byte("l leases "+idgen.HashSecret("s-l")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a.SetTokens(set)
	if c, err := a.Authorize([]string{"Bearer s-l"}, idgen.ScopeLeases); err != nil || c.Name != "l" {
		t.Errorf("after SetTokens: %v, %v", c, err)
	}
	if c, err := a.Authorize([]string{"Bearer adm"}, idgen.ScopeAdmin); err != nil || c.Name != idgen.AdminTokenName {
		t.Errorf("admin token after SetTokens: %v, %v", c, err)
	}
	a.SetTokens(nil)
	if _, err := a.Authorize([]string{"Bearer s-l"}, idgen.ScopeLeases); err == nil {
		t.Error("a token of a removed set still passes")
	}
}

func BenchmarkAuthorize(b *testing.B) {
	set, err := idgen.ParseTokens("t", []byte("c ids "+idgen.HashSecret("secret-0123456789abcdef")+"\n"))
	if err != nil {
		b.Fatal(err)
	}
	a := idgen.NewAuthorizer("", set)
	h := []string{"Bearer secret-0123456789abcdef"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authorize(h, idgen.ScopeIDs); err != nil {
			b.Fatal(err)
		}
	}
}
