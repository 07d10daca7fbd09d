package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"unsafe"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
)

// Callers and their tokens.
//
// A caller is a service or a person that calls idgen with a token of its
// own: a name, the scopes it grants and the SHA-256 of its secret. idgen
// never keeps a secret: a request's bearer secret is hashed and the hash
// compared, in constant time, with every token's (see TokenSet.lookup).
// Tokens come from a tokens file (ParseTokens), which the app reloads
// without a restart (Server.SetTokens).
//
// Without tokens (Config.Tokens nil) idgen behaves as it always has: /ids
// is open, the admin API takes the admin token (Config.AdminToken), and the
// lease API is off. With tokens, each route family needs a scope: /ids
// ScopeIDs, /admin/ ScopeAdmin (the admin token still counts, as a caller
// named AdminTokenName with the admin scope), /v1/leases ScopeLeases. The
// probes, /metrics and the status page stay open: they show no secret.

// Scopes is a set of the permissions a token grants.
type Scopes uint8

// The scopes. A token may hold any of them.
const (
	// ScopeIDs lets a caller take IDs: GET /ids and GET /ids/{id}.
	ScopeIDs Scopes = 1 << iota
	// ScopeLeases lets a caller hold worker leases through /v1/leases.
	ScopeLeases
	// ScopeAdmin lets a caller use the admin API under /admin/.
	ScopeAdmin
)

// allScopes lists the scopes in the order String writes them.
func allScopes() [3]Scopes { return [...]Scopes{ScopeIDs, ScopeLeases, ScopeAdmin} }

// name returns the name of a single scope in the tokens file.
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

// ParseScopes parses a comma-separated list of scope names (ids, leases,
// admin), each at most once, with no spaces: "ids,leases".
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
			// The value is not shown: a secret pasted in the wrong column
			// must not end up in a log.
			return 0, fmt.Errorf("unknown scope: want a comma-separated list of ids, leases and admin")
		case s.Has(scope):
			return 0, fmt.Errorf("scope %s listed twice", name)
		}
		s |= scope
	}
	return s, nil
}

// AdminTokenName is the caller name of a request that bears the admin
// token (Config.AdminToken). A tokens file may not use it.
const AdminTokenName = "admin-token"

// MaxTokenNameLen is the longest token name, in bytes.
const MaxTokenNameLen = allocator.MaxNameLen

// ValidTokenName reports whether name is a valid token name. Token names
// follow the rule of namespace names (allocator.ValidNamespace): 1 to 64
// characters of a-z, 0-9, '_', '.' and '-', starting with a letter or
// digit (^[a-z0-9][a-z0-9_.-]{0,63}$).
func ValidTokenName(name string) bool { return allocator.ValidNamespace(name) == nil }

// HashSecret returns the hash a tokens file records for secret: its
// SHA-256, in lower-case hex.
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

// TokenSet is the set of tokens a node accepts, as one tokens file (or the
// admin token) gives them. It is never changed once built: a reload builds
// a new one and the server swaps it in whole.
type TokenSet struct {
	tokens []Token
	union  Scopes // every scope some token holds
	// file names the tokens' source for messages: a path or IDGEN_TOKENS.
	file string
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

// maxTokensFile bounds a tokens file: far more than any real one.
const maxTokensFile = 1 << 20

// ParseTokens parses a tokens file: one token per line, "NAME SCOPES
// SHA256HEX" separated by spaces or tabs, such as
//
//	# orders service, since 2026-03
//	orders-api ids,leases 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
//
// '#' starts a comment that runs to the end of the line (no field may hold
// one); blank lines are skipped. NAME must be a ValidTokenName, unique in
// the file, and not AdminTokenName; SCOPES is a ParseScopes list; the hash
// is HashSecret of the caller's secret (64 hex digits), and no two tokens
// may share one. file names the source in errors, which read
// "file:line: message" and never quote a value that might be a secret.
func ParseTokens(file string, data []byte) (*TokenSet, error) {
	if len(data) > maxTokensFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxTokensFile)
	}
	set := &TokenSet{file: file}
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
			return nil, fail("invalid name: want 1 to %d characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit", MaxTokenNameLen)
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
		if len(hashText) != 2*sha256.Size {
			return nil, fail("the third field is not a SHA-256 of 64 hex digits: write the hash of the secret (idgen tokens hash), never the secret")
		}
		if _, err := hex.Decode(hash[:], []byte(hashText)); err != nil {
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

// withAdminToken returns a copy of t with the admin token as one more
// token, named AdminTokenName with the admin scope.
func (t *TokenSet) withAdminToken(hash [sha256.Size]byte) *TokenSet {
	out := &TokenSet{file: t.file, union: t.union | ScopeAdmin}
	out.tokens = append(append(make([]Token, 0, len(t.tokens)+1), t.tokens...),
		Token{Name: AdminTokenName, Scopes: ScopeAdmin, Hash: hash})
	return out
}

// lookup returns the token whose hash is the SHA-256 of secret. It hashes
// the secret once and compares the hash with every token's in constant
// time, without stopping at a match, so the time it takes depends on the
// number of tokens only, never on which one matched or how much of a hash
// did. The secret itself is neither kept nor copied.
func (t *TokenSet) lookup(secret string) (Token, bool) {
	// The secret is read, never written, through this view: hashing it
	// costs no copy (and no allocation) whatever its length.
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

// Caller is who a request comes from, once its token was checked: the
// token's name and scopes. The name is what the lease table's owner and
// the audit trail record.
type Caller struct {
	Name   string
	Scopes Scopes
}

// requestInfo is what requireScope puts in the request's context: the
// request ID and the caller.
type requestInfo struct {
	id     string
	caller Caller
}

type requestInfoKey struct{}

// callerOf returns the caller of a request that passed requireScope, and
// false on routes without it.
func callerOf(c echo.Context) (Caller, bool) {
	return callerFrom(c.Request().Context())
}

// callerFrom returns the caller that requireScope put in ctx.
func callerFrom(ctx context.Context) (Caller, bool) {
	ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo)
	if !ok || ri.caller.Name == "" {
		return Caller{}, false
	}
	return ri.caller, true
}

// SetTokens installs set as the tokens the server accepts, in place of the
// ones it had: requests that start afterwards are checked against it. The
// admin token, when configured, is added to it. A nil set leaves the
// server without tokens (see Config.Tokens). It is safe to call while the
// server serves; the app calls it when the tokens file changes.
func (s *Server) SetTokens(set *TokenSet) {
	if set == nil {
		s.tokens.Store(nil)
		return
	}
	if s.adminOn {
		set = set.withAdminToken(s.adminKey)
	}
	s.tokens.Store(set)
}

// bearerChallenge is the WWW-Authenticate challenge of a 401.
const bearerChallenge = `Bearer realm="idgen"`

// authenticate checks the request's bearer token against set and returns
// its caller, or the 401 problem (with its WWW-Authenticate challenge) for
// a missing, malformed or unknown token.
func authenticate(c echo.Context, set *TokenSet) (Token, *apiError) {
	secret, perr := bearerSecret(c)
	if perr != nil {
		return Token{}, perr
	}
	tok, ok := set.lookup(secret)
	if !ok {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, bearerChallenge+`, error="invalid_token"`)
		return Token{}, &apiError{code: codeUnauthorized, detail: "unknown token"}
	}
	return tok, nil
}

// bearerSecret returns the secret of the request's single "Authorization:
// Bearer <secret>" header, or the 401 problem (with its challenge) when
// there is none or it is malformed.
func bearerSecret(c echo.Context) (string, *apiError) {
	values := c.Request().Header[echo.HeaderAuthorization]
	if len(values) == 0 {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, bearerChallenge)
		return "", &apiError{code: codeUnauthorized, detail: "this route needs an Authorization: Bearer <token> header"}
	}
	scheme, secret, ok := strings.Cut(values[0], " ")
	if len(values) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || strings.ContainsAny(secret, " \t") {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, bearerChallenge+`, error="invalid_request"`)
		return "", &apiError{code: codeUnauthorized, detail: "malformed Authorization header: want a single Bearer <token>"}
	}
	return secret, nil
}

// requireScope returns the middleware of a route family that needs scope:
// ScopeAdmin for /admin/, ScopeLeases for /v1/leases. It answers
//   - 404 when the family is off: the lease API while no token has the
//     leases scope; the admin API while there is neither an admin token nor
//     a token with the admin scope;
//   - 401 for a missing, malformed or unknown token, with a Bearer
//     challenge;
//   - 403 for a known token without scope;
//   - 429 past the caller's rate limit (ratelimit.go), except on the
//     lease API.
//
// Without tokens, the admin API checks the admin token as it always has (a
// wrong one is 403). A request that passes has its caller and request ID
// in its context (callerOf; requestIDOf reads the ID on any route), so
// that its log lines carry both, and its body capped at MaxBodyBytes. /ids, whose hot path must not allocate, has its own check
// (guardIDs).
func (s *Server) requireScope(scope Scopes) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			caller, err := s.checkScope(c, scope)
			if err != nil {
				return err
			}
			if s.limiter != nil && scope != ScopeLeases {
				// The lease API is not limited (see ratelimit.go).
				if perr := s.limiter.allow(caller.Name, c.Request().RemoteAddr); perr != nil {
					return perr
				}
			}
			req := c.Request()
			ri := &requestInfo{id: requestIDOf(c), caller: caller}
			req = req.WithContext(context.WithValue(req.Context(), requestInfoKey{}, ri))
			req.Body = http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
			c.SetRequest(req)
			return next(c)
		}
	}
}

// checkScope decides whether the request may use a route family that
// needs scope (see requireScope) and returns its caller.
func (s *Server) checkScope(c echo.Context, scope Scopes) (Caller, error) {
	set := s.tokens.Load()
	if set == nil {
		switch scope {
		case ScopeLeases:
			return Caller{}, &apiError{code: codeNotFound, detail: "the lease API is off: no token has the leases scope"}
		case ScopeAdmin:
			return s.checkAdminToken(c)
		}
		return Caller{}, nil
	}
	if !set.union.Has(scope) {
		switch scope {
		case ScopeLeases:
			return Caller{}, &apiError{code: codeNotFound, detail: "the lease API is off: no token has the leases scope"}
		case ScopeAdmin:
			return Caller{}, &apiError{code: codeNotFound, detail: "the admin API is off: there is no admin token and no token with the admin scope"}
		}
	}
	tok, perr := authenticate(c, set)
	if perr != nil {
		return Caller{}, perr
	}
	if !tok.Scopes.Has(scope) {
		return Caller{}, &apiError{code: codeForbidden, detail: fmt.Sprintf("token %s lacks the %s scope", tok.Name, scope)}
	}
	return Caller{Name: tok.Name, Scopes: tok.Scopes}, nil
}

// checkAdminToken is the admin API's check without tokens: 404 when no
// admin token is configured, 401 without a well-formed bearer token, 403
// for a wrong one.
func (s *Server) checkAdminToken(c echo.Context) (Caller, error) {
	if !s.adminOn {
		return Caller{}, &apiError{code: codeNotFound, detail: "the admin API is disabled: no admin token is configured"}
	}
	secret, perr := bearerSecret(c)
	if perr != nil {
		return Caller{}, perr
	}
	got := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], s.adminKey[:]) != 1 {
		return Caller{}, &apiError{code: codeForbidden, detail: "wrong admin token"}
	}
	return Caller{Name: AdminTokenName, Scopes: ScopeAdmin}, nil
}

// guardIDs is requireScope(ScopeIDs) without the context: /ids, with
// tokens, needs the ids scope; without, it is open. It costs one atomic
// load without tokens, and one SHA-256 and the comparisons with them; it
// allocates nothing. New wraps the /ids handlers in it once (a route
// middleware would cost a closure per request).
func (s *Server) guardIDs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if set := s.tokens.Load(); set != nil {
			tok, perr := authenticate(c, set)
			if perr != nil {
				return perr
			}
			if !tok.Scopes.Has(ScopeIDs) {
				return &apiError{code: codeForbidden, detail: "token " + tok.Name + " lacks the ids scope"}
			}
			if s.limiter != nil {
				if perr := s.limiter.allowToken(tok.Name); perr != nil {
					return perr
				}
			}
		} else if s.limiter != nil {
			if perr := s.limiter.allowAddress(c.Request().RemoteAddr); perr != nil {
				return perr
			}
		}
		return next(c)
	}
}
