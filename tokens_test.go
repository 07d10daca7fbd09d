package idgen_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
)

func TestParseTokens(t *testing.T) {
	h1 := idgen.HashSecret("first secret")
	h2 := idgen.HashSecret("second secret")
	file := strings.Join([]string{
		"# idgen's callers",
		"",
		"orders-api   ids,leases  " + h1 + "   # since March",
		"\tbilling.v2\tadmin,ids\t" + strings.ToUpper(h2) + "\r",
		"   ",
	}, "\n")
	set, err := idgen.ParseTokens("tokens.conf", []byte(file))
	if err != nil {
		t.Fatalf("ParseTokens: got %v, want nil", err)
	}
	if got, want := set.Names(), []string{"orders-api", "billing.v2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names: got %q, want %q", got, want)
	}
	if got, want := set.Scopes(), idgen.ScopeIDs|idgen.ScopeLeases|idgen.ScopeAdmin; got != want {
		t.Errorf("scopes: got %v, want %v", got, want)
	}
	empty, err := idgen.ParseTokens("empty", []byte("# nobody yet\n\n"))
	if err != nil || empty.Len() != 0 || empty.Scopes() != 0 {
		t.Errorf("a file of comments: got %v tokens, scopes %v, error %v; want none and nil", empty.Len(), empty.Scopes(), err)
	}

	// The secret that a careless operator pastes into the file; no error
	// may quote it.
	const secret = "hunter2-raw-secret"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"one field", "orders-api\n", "tokens.conf:1: got 1 fields, want 3: NAME SCOPES SHA256HEX"},
		{"two fields", "# c\norders-api ids\n", "tokens.conf:2: got 2 fields, want 3"},
		{"four fields", "orders-api ids " + h1 + " extra\n", "tokens.conf:1: got 4 fields, want 3"},
		{"the secret instead of the hash", "\n\norders-api ids " + secret + "\n", "tokens.conf:3: the third field is not a SHA-256 of 64 hex digits"},
		{"hash one digit short", "orders-api ids " + h1[:63] + "\n", "tokens.conf:1: the third field is not a SHA-256"},
		{"hash one digit long", "orders-api ids " + h1 + "0\n", "tokens.conf:1: the third field is not a SHA-256"},
		{"hash not hex", "orders-api ids " + strings.Repeat("g", 64) + "\n", "tokens.conf:1: the third field is not a SHA-256"},
		{"name upper case", "Orders ids " + h1 + "\n", "tokens.conf:1: invalid name"},
		{"name starts with a dot", ".orders ids " + h1 + "\n", "tokens.conf:1: invalid name"},
		{"name too long", strings.Repeat("a", 65) + " ids " + h1 + "\n", "tokens.conf:1: invalid name"},
		{"the secret as the name", secret + "! ids " + h1 + "\n", "tokens.conf:1: invalid name"},
		{"reserved name", "admin-token admin " + h1 + "\n", "tokens.conf:1: the name admin-token is reserved"},
		{"name twice", "a ids " + h1 + "\nb ids " + h2 + "\na leases " + idgen.HashSecret("x") + "\n", "tokens.conf:3: name a already used at line 1"},
		{"hash twice", "a ids " + h1 + "\nb leases " + strings.ToUpper(h1) + "\n", "tokens.conf:2: same secret hash as the token at line 1"},
		{"unknown scope", "a ids,everything " + h1 + "\n", "tokens.conf:1: unknown scope: want a comma-separated list of ids, leases and admin"},
		{"the secret as the scopes", "a " + secret + " " + h1 + "\n", "tokens.conf:1: unknown scope"},
		{"scope twice", "a ids,leases,ids " + h1 + "\n", "tokens.conf:1: scope ids listed twice"},
		{"empty scope", "a ids,,leases " + h1 + "\n", "tokens.conf:1: empty scope in the list"},
		{"trailing comma", "a ids, " + h1 + "\n", "tokens.conf:1: empty scope"},
		{"scope upper case", "a IDS " + h1 + "\n", "tokens.conf:1: unknown scope"},
		{"too large", strings.Repeat("#", 1<<20+1), "tokens.conf: larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := idgen.ParseTokens("tokens.conf", []byte(tc.file))
			if err == nil || set != nil {
				t.Fatalf("got %v tokens and error %v, want no set and an error", set.Names(), err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got error %q, want it to start with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "everything") {
				t.Errorf("got error %q, which quotes a field that might be a secret", err)
			}
		})
	}
}

func TestParseScopes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want idgen.Scopes
		text string
	}{
		{"ids", idgen.ScopeIDs, "ids"},
		{"admin,ids", idgen.ScopeIDs | idgen.ScopeAdmin, "ids,admin"},
		{"leases,admin,ids", idgen.ScopeIDs | idgen.ScopeLeases | idgen.ScopeAdmin, "ids,leases,admin"},
	} {
		got, err := idgen.ParseScopes(tc.in)
		if err != nil || got != tc.want || got.String() != tc.text {
			t.Errorf("ParseScopes(%q): got %v (%q), %v; want %v (%q)", tc.in, got, got.String(), err, tc.want, tc.text)
		}
	}
	if s := idgen.ScopeIDs | idgen.ScopeLeases; !s.Has(idgen.ScopeIDs) || s.Has(idgen.ScopeAdmin) || s.Has(idgen.ScopeIDs|idgen.ScopeAdmin) {
		t.Errorf("Has of %v: wrong", s)
	}
}

func TestHashSecret(t *testing.T) {
	// sha256("foo"), the example of the tokens file's documentation.
	if got, want := idgen.HashSecret("foo"), "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"; got != want {
		t.Errorf("HashSecret(foo): got %s, want %s", got, want)
	}
}

func TestValidTokenName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "orders-api": true, "billing.v2": true, "0_x": true, strings.Repeat("a", 64): true,
		"": false, "-a": false, "_a": false, "A": false, "a b": false, "a/b": false, strings.Repeat("a", 65): false, "é": false,
	} {
		if got := idgen.ValidTokenName(name); got != want {
			t.Errorf("ValidTokenName(%q): got %v, want %v", name, got, want)
		}
	}
}
