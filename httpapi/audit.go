package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/audit"
)

// handleAdminAuditWho serves GET /admin/audit/who/:id: the holder that
// issued a Snowflake ID (audit.Who), from the store's lease events and,
// when the node sends its audit trail to ClickHouse, from there. An ID no
// recorded holder could have issued answers 200 with "found": false and
// the note "no holder recorded".
func (s *Server) handleAdminAuditWho(c echo.Context) error {
	f, err := s.formatParam(c, "format")
	if err != nil {
		return err
	}
	id, _, err := s.svc.DecodeText(callerOf(c), c.Param("id"), f)
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	a, err := audit.Who(ctx, s.svc.Layout(), s.admin, s.auditCH, int64(id))
	if err != nil {
		return idgen.StoreError(err, "")
	}
	return s.sendJSON(c, http.StatusOK, a)
}
