package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/internal/probe"
)

// handleHealth serves GET /healthz: the process is alive.
func (s *Server) handleHealth(c echo.Context) error {
	return s.writeJSON(c, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

// handleReady serves GET /readyz: probe.Ready's report, 200 while the
// node is ready, else 503.
func (s *Server) handleReady(c echo.Context) error {
	aud := probe.AudienceOf(s.auth, s.publicDetails, c.Request().Header[echo.HeaderAuthorization])
	c.Response().Header().Set(echo.HeaderVary, echo.HeaderAuthorization)
	out := probe.Ready(c.Request().Context(), s.lease, s.db, s.space, aud, s.durability)
	status := http.StatusOK
	if !out.Ready {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set(echo.HeaderRetryAfter, "1")
	}
	return s.sendJSON(c, status, out)
}
