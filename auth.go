package idgen

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/idgen-project/idgen/allocator"
)

// Callers and their tokens.
//
// A caller calls with its own token: a name, scopes and the SHA-256 of its
// secret; idgen never keeps secrets, only compares hashes in constant time.
// Tokens come from a tokens file (ParseTokens), reloaded without a restart.
// Without tokens, IDs are open, admin takes the admin token and the lease
// API is off; with tokens each family needs its scope.

// Scopes is a set of the permissions a token grants.
type Scopes uint8

// The scopes a token may hold.
const (
	// ScopeIDs lets a caller take IDs and decompose them.
	ScopeIDs Scopes = 1 << iota
	// ScopeLeases lets a caller hold worker leases through the lease API.
	ScopeLeases
	// ScopeAdmin lets a caller use the admin API.
	ScopeAdmin
)

func allScopes() [3]Scopes { return [...]Scopes{ScopeIDs, ScopeLeases, ScopeAdmin} }

func (s Scopes) name() string {
	switch s {
	case ScopeIDs:
		return "ids"
	case ScopeLeases:
		return "leases"
	case ScopeAdmin:
		return "admin"
	}
	return ""
}

// Has reports whether s holds every scope of want.
func (s Scopes) Has(want Scopes) bool { return s&want == want }

// String returns the scopes as the tokens file writes them: "ids,leases".
func (s Scopes) String() string {
	var names []string
	for _, one := range allScopes() {
		if s.Has(one) {
			names = append(names, one.name())
		}
	}
	return strings.Join(names, ",")
}

// ParseScopes parses a comma-separated list of scope names, each at most
// once, without spaces.
func ParseScopes(list string) (Scopes, error) {
	var s Scopes
	for _, name := range strings.Split(list, ",") {
		var scope Scopes
		for _, one := range allScopes() {
			if name == one.name() {
				scope = one
			}
		}
		switch {
		case name == "":
			return 0, fmt.Errorf("empty scope in the list: want a comma-separated list of ids, leases and admin")
		case scope == 0:
			// The value is not shown: it may be a misplaced secret.
			return 0, fmt.Errorf("unknown scope: want a comma-separated list of ids, leases and admin")
		case s.Has(scope):
			return 0, fmt.Errorf("scope %s listed twice", name)
		}
		s |= scope
	}
	return s, nil
}

// AdminTokenName is the caller name of the admin token; tokens files may
// not use it.
const AdminTokenName = "admin-token"

// ValidTokenName reports whether name is a valid token name (the namespace
// rule).
func ValidTokenName(name string) bool { return allocator.ValidNamespace(name) == nil }

// HashSecret returns the lower-case hex SHA-256 a tokens file records.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Token is one caller's entry of a tokens file.
type Token struct {
	Name   string
	Scopes Scopes
	// Hash is the SHA-256 of the caller's secret.
	Hash [sha256.Size]byte
}

// TokenSet is the tokens a node accepts. It is immutable: a reload builds
// a new one and swaps it in.
type TokenSet struct {
	tokens []Token
	union  Scopes // every scope some token holds
}

// Len returns the number of tokens.
func (t *TokenSet) Len() int { return len(t.tokens) }

// Names returns the tokens' names in the order of the file.
func (t *TokenSet) Names() []string {
	out := make([]string, len(t.tokens))
	for i, tok := range t.tokens {
		out[i] = tok.Name
	}
	return out
}

// Scopes returns every scope that some token of the set holds.
func (t *TokenSet) Scopes() Scopes { return t.union }

const maxTokensFile = 1 << 20

// ParseTokens parses a tokens file: one "NAME SCOPES SHA256HEX" per line,
// such as
//
//	# orders service, since 2026-03
//	orders-api ids,leases 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
//
// '#' starts a comment; blank lines are skipped. Names are unique
// ValidTokenNames other than AdminTokenName; hashes are unique. Errors
// read "file:line: message" and never quote a possible secret.
func ParseTokens(file string, data []byte) (*TokenSet, error) {
	if len(data) > maxTokensFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxTokensFile)
	}
	set := &TokenSet{}
	lineOf := map[string]int{} // name → line
	hashLine := map[[sha256.Size]byte]int{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		lineNo := n + 1
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", file, lineNo, fmt.Sprintf(format, args...))
		}
		if len(fields) != 3 {
			return nil, fail("got %d fields, want 3: NAME SCOPES SHA256HEX", len(fields))
		}
		name, scopeList, hashText := fields[0], fields[1], fields[2]
		if !ValidTokenName(name) {
			return nil, fail("invalid name: want 1 to %d characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit", allocator.MaxNameLen)
		}
		if name == AdminTokenName {
			return nil, fail("the name %s is reserved for the --admin-token credential", AdminTokenName)
		}
		if prev, dup := lineOf[name]; dup {
			return nil, fail("name %s already used at line %d", name, prev)
		}
		scopes, err := ParseScopes(scopeList)
		if err != nil {
			return nil, fail("%v", err)
		}
		var hash [sha256.Size]byte
		if _, err := hex.Decode(hash[:], []byte(hashText)); err != nil || len(hashText) != 2*sha256.Size {
			return nil, fail("the third field is not a SHA-256 of 64 hex digits: write the hash of the secret (idgen tokens hash), never the secret")
		}
		if prev, dup := hashLine[hash]; dup {
			return nil, fail("same secret hash as the token at line %d: every caller needs a secret of its own", prev)
		}
		lineOf[name], hashLine[hash] = lineNo, lineNo
		set.tokens = append(set.tokens, Token{Name: name, Scopes: scopes, Hash: hash})
		set.union |= scopes
	}
	return set, nil
}

// lookup returns the token whose hash is secret's SHA-256, comparing with
// every token in constant time without stopping at a match, so timing
// reveals nothing. The secret is neither kept nor copied.
func (t *TokenSet) lookup(secret string) (Token, bool) {
	// Read-only view: hashing costs no copy or allocation.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(secret), len(secret)))
	found, at := 0, 0
	for i := range t.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], t.tokens[i].Hash[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found == 0 {
		return Token{}, false
	}
	return t.tokens[at], true
}

// Caller is who makes a call: token name and scopes ("" and 0 when open),
// the client address (for the rate limit) and the request ID.
type Caller struct {
	Name      string
	Scopes    Scopes
	Address   string
	RequestID string
}

// Authorizer applies the call rules for every transport. It is safe for
// concurrent use; SetTokens swaps tokens under live calls.
type Authorizer struct {
	tokens   atomic.Pointer[TokenSet] // the admin token included; nil without tokens
	adminKey [sha256.Size]byte        // SHA-256 of the admin token
	adminOn  bool
}

// NewAuthorizer returns an authorizer with adminToken ("" for none) and
// tokens (nil for none).
func NewAuthorizer(adminToken string, tokens *TokenSet) *Authorizer {
	a := &Authorizer{}
	if adminToken != "" {
		a.adminOn, a.adminKey = true, sha256.Sum256([]byte(adminToken))
	}
	a.SetTokens(tokens)
	return a
}

// SetTokens installs set for later calls, adding the admin token (if any)
// as AdminTokenName with the admin scope. Nil means no tokens.
func (a *Authorizer) SetTokens(set *TokenSet) {
	if set == nil {
		a.tokens.Store(nil)
		return
	}
	if a.adminOn {
		with := &TokenSet{union: set.union | ScopeAdmin}
		with.tokens = append(append(make([]Token, 0, len(set.tokens)+1), set.tokens...),
			Token{Name: AdminTokenName, Scopes: ScopeAdmin, Hash: a.adminKey})
		set = with
	}
	a.tokens.Store(set)
}

// HasTokens reports whether the node has tokens.
func (a *Authorizer) HasTokens() bool { return a.tokens.Load() != nil }

// On reports whether scope's family is on: IDs always; leases once a token
// has the scope; admin with an admin token or an admin-scoped token.
func (a *Authorizer) On(scope Scopes) bool {
	set := a.tokens.Load()
	switch {
	case scope == ScopeIDs:
		return true
	case set == nil:
		return scope == ScopeAdmin && a.adminOn
	}
	return set.union.Has(scope)
}

// ParseBearer returns the secret of a single "Bearer <secret>" value; ok
// is false otherwise, none true when there is no value.
func ParseBearer(authorization []string) (secret string, none, ok bool) {
	if len(authorization) == 0 {
		return "", true, false
	}
	scheme, secret, found := strings.Cut(authorization[0], " ")
	if len(authorization) > 1 || !found || !strings.EqualFold(scheme, "Bearer") || secret == "" || strings.ContainsAny(secret, " \t") {
		return "", false, false
	}
	return secret, false, true
}

// Authorize decides whether a call may use scope's family and returns its
// caller. It refuses with an *Error: NotFound when the family is off,
// Unauthorized for a missing, malformed or unknown token, Forbidden for a
// token without the scope (or a wrong admin token). A passing check
// allocates nothing.
func (a *Authorizer) Authorize(authorization []string, scope Scopes) (Caller, error) {
	set := a.tokens.Load()
	if set == nil {
		switch scope {
		case ScopeIDs:
			return Caller{}, nil
		case ScopeLeases:
			return Caller{}, leaseAPIOff
		}
		return a.adminToken(authorization)
	}
	if scope != ScopeIDs && !set.union.Has(scope) {
		if scope == ScopeLeases {
			return Caller{}, leaseAPIOff
		}
		return Caller{}, &Error{Code: NotFound, Detail: "the admin API is off: there is no admin token and no token with the admin scope"}
	}
	secret, none, ok := ParseBearer(authorization)
	if !ok {
		return Caller{}, bearerRefused(none)
	}
	tok, found := set.lookup(secret)
	if !found {
		return Caller{}, &Error{Code: Unauthorized, Detail: "unknown token"}
	}
	if !tok.Scopes.Has(scope) {
		return Caller{}, &Error{Code: Forbidden, Detail: "token " + tok.Name + " lacks the " + scope.String() + " scope"}
	}
	return Caller{Name: tok.Name, Scopes: tok.Scopes}, nil
}

// leaseAPIOff refuses a lease API call on a node without leases tokens.
var leaseAPIOff = &Error{Code: NotFound, Detail: "the lease API is off: no token has the leases scope"}

// adminToken checks the admin family without tokens: NotFound, then
// Unauthorized, then Forbidden.
func (a *Authorizer) adminToken(authorization []string) (Caller, error) {
	if !a.adminOn {
		return Caller{}, &Error{Code: NotFound, Detail: "the admin API is disabled: no admin token is configured"}
	}
	secret, none, ok := ParseBearer(authorization)
	if !ok {
		return Caller{}, bearerRefused(none)
	}
	got := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], a.adminKey[:]) != 1 {
		return Caller{}, &Error{Code: Forbidden, Detail: "wrong admin token"}
	}
	return Caller{Name: AdminTokenName, Scopes: ScopeAdmin}, nil
}

func bearerRefused(none bool) *Error {
	if none {
		return &Error{Code: Unauthorized, Detail: "this route needs an Authorization: Bearer <token> header"}
	}
	return &Error{Code: Unauthorized, Detail: "malformed Authorization header: want a single Bearer <token>"}
}
