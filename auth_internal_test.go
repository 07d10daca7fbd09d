package idgen

import (
	"fmt"
	"testing"
)

// callerTokens returns the set of n tokens caller-<i>, with the ids scope
// and the secret secretFormat formats for i.
func callerTokens(tb testing.TB, n int, secretFormat string) *TokenSet {
	tb.Helper()
	var file string
	for i := range n {
		file += fmt.Sprintf("caller-%d ids %s\n", i, HashSecret(fmt.Sprintf(secretFormat, i)))
	}
	set, err := ParseTokens("t", []byte(file))
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// TestLookup checks the constant-time lookup: every token is found by its
// own secret, wherever it stands in the set, and nothing else is found,
// not even a secret whose hash differs from a token's in one bit.
func TestLookup(t *testing.T) {
	set := callerTokens(t, 5, "secret-%d")
	for i := range 5 {
		tok, ok := set.lookup(fmt.Sprintf("secret-%d", i))
		if want := fmt.Sprintf("caller-%d", i); !ok || tok.Name != want {
			t.Errorf("lookup(secret-%d): got %q, %v; want %s", i, tok.Name, ok, want)
		}
	}
	for _, secret := range []string{"", "secret-", "secret-5", "secret-0 ", "Secret-0", "caller-0", HashSecret("secret-0")} {
		if tok, ok := set.lookup(secret); ok {
			t.Errorf("lookup(%q): got %q, want no token", secret, tok.Name)
		}
	}
	// A token whose hash differs from a secret's in its last bit only.
	near := set.tokens[4]
	near.Hash[31] ^= 1
	near.Name = "near"
	tampered := &TokenSet{tokens: []Token{near}}
	if tok, ok := tampered.lookup("secret-4"); ok {
		t.Errorf("lookup with a hash one bit off: got %q, want no token", tok.Name)
	}
	// The admin token is one more entry, named admin-token.
	a := NewAuthorizer("the-admin-token", set)
	if tok, ok := a.tokens.Load().lookup("the-admin-token"); !ok || tok.Name != AdminTokenName || tok.Scopes != ScopeAdmin {
		t.Errorf("lookup(admin token): got %+v, %v; want admin-token with the admin scope", tok, ok)
	}
	if set.Len() != 5 {
		t.Errorf("SetTokens changed the set it was given: %d tokens", set.Len())
	}
	// An empty set finds nothing.
	if _, ok := (&TokenSet{}).lookup("secret-0"); ok {
		t.Error("lookup in an empty set found a token")
	}
}

func BenchmarkLookup(b *testing.B) {
	set := callerTokens(b, 20, "secret-%02d-0123456789abcdef0123456789")
	secret := "secret-19-0123456789abcdef0123456789"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := set.lookup(secret); !ok {
			b.Fatal("not found")
		}
	}
}
