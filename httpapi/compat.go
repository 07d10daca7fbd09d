package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/snowflake"
)

// Compatibility routes (docs/migration.md): /api/v1/ids and /api/v1/id,
// Leaf's /api/segment/get/{key} and /api/snowflake/get/{key} (key ignored),
// and tinyid's /tinyid/id/nextIdSimple and nextId (GET or POST, batchSize
// capped, the secret also as token). All need the ids scope. Errors keep
// idgen's statuses and problem documents, except nextId's envelope.

// tinyid's envelope codes: 5 ("token is error") for 401 and 403, 6 else.
const (
	tinyidCodeTokenError = 5
	tinyidCodeSysError   = 6
)

func (s *Server) addCompatRoutes(e *echo.Echo) {
	s.add(e.GET, "/api/v1/ids", s.handleV1IDs)
	s.add(e.POST, "/api/v1/id", s.handleV1ID)
	s.add(e.GET, "/api/segment/get/:key", s.handleLeaf)
	s.add(e.GET, "/api/snowflake/get/:key", s.handleLeaf)
	for _, add := range []addFunc{e.GET, e.POST} {
		s.add(add, "/tinyid/id/nextIdSimple", s.handleTinyidSimple)
		s.add(add, "/tinyid/id/nextId", s.tinyidEnvelope(s.handleTinyidNextID))
	}
}

// v1ID is one ID of GET /api/v1/ids.
type v1ID struct {
	ValueString string `json:"value_string"`
	ValueHex    string `json:"value_hex"`
	Breakdown   struct {
		TimestampMS    int64 `json:"timestamp_ms"`
		DatacenterID   int64 `json:"datacenter_id"`
		WorkerID       int64 `json:"worker_id"`
		SequenceNumber int64 `json:"sequence_number"`
	} `json:"breakdown"`
}

// handleV1IDs serves GET /api/v1/ids?count=N (default 1).
func (s *Server) handleV1IDs(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return invalidf("malformed query")
	}
	n := 1
	for key, values := range q {
		if key != "count" {
			return invalidf("unknown query parameter %q; allowed: count", truncate(key, 64))
		}
		if len(values) > 1 {
			return invalidf("count given more than once")
		}
		var ok bool
		if n, ok = parseCount(values[0]); !ok {
			return s.svc.CountError()
		}
	}
	var d idgen.Drawn
	if err := s.svc.Draw(c.Request().Context(), caller, idgen.DrawRequest{Count: n}, &d); err != nil {
		return err
	}
	ids := make([]v1ID, len(d.IDs))
	for i, id := range d.IDs {
		p := s.layout.Decompose(snowflake.ID(id))
		ids[i].ValueString, ids[i].ValueHex = strconv.FormatInt(id, 10), fmt.Sprintf("%016x", id)
		b := &ids[i].Breakdown
		b.TimestampMS, b.DatacenterID, b.WorkerID, b.SequenceNumber = p.Time.UnixMilli(), p.Datacenter, p.Worker, p.Sequence
	}
	return s.sendJSON(c, http.StatusOK, struct {
		IDs         []v1ID `json:"ids"`
		GeneratedAt string `json:"generated_at"`
	}{ids, s.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")})
}

// handleV1ID serves POST /api/v1/id, {"id":"…"}, reading no body.
func (s *Server) handleV1ID(c echo.Context) error {
	id, err := s.drawOne(c, "")
	if err != nil {
		return err
	}
	b := appendQuoted([]byte(`{"id":`), idgen.Encoding{}, id)
	return s.writeJSON(c, http.StatusOK, append(b, "}\n"...))
}

// handleLeaf serves Leaf's routes: one ID as text/plain.
func (s *Server) handleLeaf(c echo.Context) error {
	name := ""
	if c.Path() == "/api/segment/get/:key" {
		name = c.Param("key")
	}
	id, err := s.drawOne(c, name)
	if err != nil {
		return err
	}
	return s.write(c, http.StatusOK, s.hdrText, strconv.AppendInt(nil, id, 10))
}

// handleTinyidSimple serves nextIdSimple: the IDs comma-separated, text/plain.
func (s *Server) handleTinyidSimple(c echo.Context) error {
	d, err := s.tinyidDraw(c)
	if err != nil {
		return err
	}
	return s.write(c, http.StatusOK, s.hdrText, appendIDs(nil, d.IDs))
}

// handleTinyidNextID serves nextId: {"data":[…],"code":200,"message":""}.
func (s *Server) handleTinyidNextID(c echo.Context) error {
	d, err := s.tinyidDraw(c)
	if err != nil {
		return err
	}
	b := appendIDs([]byte(`{"data":[`), d.IDs)
	return s.writeJSON(c, http.StatusOK, append(b, `],"code":200,"message":""}`+"\n"...))
}

func appendIDs(b []byte, ids []int64) []byte {
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return b
}

// tinyidDraw draws batchSize (default 1) IDs of bizType, ignoring other
// parameters as tinyid does.
func (s *Server) tinyidDraw(c echo.Context) (*idgen.Drawn, error) {
	req := c.Request()
	if req.Method == http.MethodPost && req.Body != nil {
		req.Body = http.MaxBytesReader(c.Response(), req.Body, idgen.MaxRequestBytes)
	}
	if err := req.ParseForm(); errors.As(err, new(*http.MaxBytesError)) {
		return nil, &idgen.Error{Code: idgen.TooLarge, Detail: "request body larger than 64 KiB"}
	} else if err != nil {
		return nil, invalidf("malformed parameters")
	}
	values := req.Header[echo.HeaderAuthorization]
	if secret := req.Form.Get("token"); len(values) == 0 && s.auth.HasTokens() && secret != "" {
		values = []string{"Bearer " + secret}
	}
	caller, err := s.authorizeValues(c, values, idgen.ScopeIDs)
	if err != nil {
		return nil, err
	}
	name := req.Form.Get("bizType")
	if name == "" {
		return nil, invalidf("bizType is required: the namespace to draw from")
	}
	n := 1
	if size := req.Form.Get("batchSize"); size != "" {
		var ok bool
		if n, ok = parseCount(size); !ok {
			return nil, invalidf("batchSize must be an integer of 1 or more")
		}
		n = min(n, s.svc.MaxCount())
	}
	d := new(idgen.Drawn)
	return d, s.svc.Draw(req.Context(), caller, idgen.DrawRequest{Namespace: name, Count: n}, d)
}

// tinyidEnvelope answers next's errors in tinyid's envelope (data null,
// message the detail), with the problem's status and headers.
func (s *Server) tinyidEnvelope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Response().Committed {
			return err
		}
		ae := idgen.ErrorOf(err, "")
		info := problemHeaders(c.Response().Header(), ae)
		body := struct {
			Data    *struct{} `json:"data"`
			Code    int       `json:"code"`
			Message string    `json:"message"`
		}{Code: tinyidCodeSysError, Message: ae.Detail}
		switch info.HTTPStatus {
		case http.StatusUnauthorized, http.StatusForbidden:
			body.Code = tinyidCodeTokenError
		case http.StatusInternalServerError:
			s.log.LogAttrs(s.logContext(c), slog.LevelError, "request failed",
				slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Any("err", err))
			body.Message = "internal error; see the server log"
		}
		return s.sendJSON(c, info.HTTPStatus, body)
	}
}

// drawOne draws one ID of namespace name, or a Snowflake ID for "".
func (s *Server) drawOne(c echo.Context, name string) (int64, error) {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return 0, err
	}
	var d idgen.Drawn
	if err := s.svc.Draw(c.Request().Context(), caller, idgen.DrawRequest{Namespace: name, Count: 1}, &d); err != nil {
		return 0, err
	}
	return d.IDs[0], nil
}
