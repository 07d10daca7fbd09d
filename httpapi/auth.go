package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
)

// Scopes (idgen.Authorizer): /ids… and the compatibility routes need ids,
// /admin/ admin, /v1/leases leases; probes, /metrics and / are open.

// bearerChallenge is the WWW-Authenticate challenge of a 401.
const bearerChallenge = `Bearer realm="idgen"`

// authorize checks the Authorization header for scope and returns the
// caller; no allocation when it passes.
func (s *Server) authorize(c echo.Context, scope idgen.Scopes) (idgen.Caller, error) {
	return s.authorizeValues(c, c.Request().Header[echo.HeaderAuthorization], scope)
}

// authorizeValues is authorize for Authorization values given apart
// (tinyid's token parameter).
func (s *Server) authorizeValues(c echo.Context, values []string, scope idgen.Scopes) (idgen.Caller, error) {
	caller, err := s.auth.Authorize(values, scope)
	if err != nil {
		var e *idgen.Error
		if errors.As(err, &e) && e.Code == idgen.Unauthorized {
			challenge := bearerChallenge
			switch _, none, ok := idgen.ParseBearer(values); {
			case ok:
				challenge += `, error="invalid_token"` // well-formed, unknown
			case !none:
				challenge += `, error="invalid_request"`
			}
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, challenge)
		}
		return caller, err
	}
	caller.Address, caller.RequestID = c.Request().RemoteAddr, requestIDOf(c)
	return caller, nil
}

type callerKey struct{} // the context key of the caller requireScope checked

func callerOf(c echo.Context) idgen.Caller {
	caller, _ := c.Request().Context().Value(callerKey{}).(idgen.Caller)
	return caller
}

// requireScope is the middleware of routes with a body: the caller goes in
// the context, the body is capped, and admin calls are charged one ID.
func (s *Server) requireScope(scope idgen.Scopes) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			caller, err := s.authorize(c, scope)
			if err != nil {
				return err
			}
			if scope == idgen.ScopeAdmin {
				if err := s.svc.Charge(caller); err != nil {
					return err
				}
			}
			req := c.Request()
			req = req.WithContext(context.WithValue(req.Context(), callerKey{}, caller))
			req.Body = http.MaxBytesReader(c.Response(), req.Body, idgen.MaxRequestBytes)
			c.SetRequest(req)
			return next(c)
		}
	}
}
