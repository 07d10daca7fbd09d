package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/idgen-project/idgen/internal/problem"
)

// AuthError is a refusal of Authorize: the problem code (unauthorized,
// forbidden, or not_found for a family that is off) and a detail that
// names no secret.
type AuthError struct {
	Code   problem.Code
	Detail string
	// RetryAfter is the wait the refusal asks for: set with too_many
	// (Admit), zero otherwise.
	RetryAfter time.Duration
}

func (e *AuthError) Error() string { return string(e.Code) + ": " + e.Detail }

// Authorize applies the scope check of the HTTP routes to a request of
// another transport on the same node (the gRPC API): authorization is the
// request's Authorization header values, scope the scope of the family
// called. It answers as the routes do, with the tokens in effect now
// (SetTokens): without tokens ScopeIDs is open and ScopeLeases is off
// (not_found); with tokens a missing, malformed or unknown bearer token is
// unauthorized and a token without the scope forbidden. On success it
// returns the caller (its name empty for an open family).
func (s *Server) Authorize(authorization []string, scope Scopes) (Caller, error) {
	if scope == ScopeIDs && s.tokens.Load() == nil {
		return Caller{}, nil // the open /ids family costs nothing more
	}
	// The rules are checkScope's, run on a context of their own: one copy
	// of them serves both transports.
	c := s.echo.AcquireContext()
	defer s.echo.ReleaseContext(c)
	req := &http.Request{Header: http.Header{}}
	if len(authorization) > 0 {
		req.Header["Authorization"] = authorization
	}
	c.Reset(req, discardWriter{})
	caller, err := s.checkScope(c, scope)
	if err == nil {
		return caller, nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return Caller{}, &AuthError{Code: problem.Code(ae.code), Detail: ae.detail}
	}
	return Caller{}, &AuthError{Code: problem.Internal, Detail: "internal error; see the server log"}
}

// discardWriter is the response of an Authorize check: the challenge
// headers checkScope sets are of no use outside HTTP.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// Admit applies the per-caller rate limit of the HTTP routes
// (ratelimit.go) to a call of another transport that Authorize let
// through: caller is what Authorize returned, peerAddr the client's
// address (host:port), which names the caller when caller has no name (a
// node without tokens). The lease family is not limited, as on HTTP. It
// returns nil, or an *AuthError with code too_many and the RetryAfter the
// caller's bucket needs; without a limit it costs one comparison.
func (s *Server) Admit(caller Caller, scope Scopes, peerAddr string) error {
	if s.limiter == nil || scope == ScopeLeases {
		return nil
	}
	if perr := s.limiter.allow(caller.Name, peerAddr); perr != nil {
		return &AuthError{Code: problem.TooMany, Detail: perr.detail, RetryAfter: perr.retryAfter}
	}
	return nil
}
