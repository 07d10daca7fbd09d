package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Compatibility routes: the API shapes of the designs idgen replaces, so
// that their callers switch by changing a base URL (docs/migration.md).
//
//   - GET /api/v1/ids?count=N and POST /api/v1/id: Snowflake IDs in the
//     shapes of the original idgen design ({"ids":[{value_string,
//     value_hex, breakdown}], "generated_at"} and {"id"}).
//   - GET /api/segment/get/{key} and GET /api/snowflake/get/{key}: Meituan
//     Leaf's routes. A segment key is a namespace; the Snowflake key is
//     ignored, as Leaf ignores it. The ID is the whole text/plain body.
//   - /tinyid/id/nextIdSimple and /tinyid/id/nextId (GET or POST, as
//     tinyid accepts both): didi tinyid's routes. bizType is a namespace,
//     batchSize a count (capped at the node's maximum count, as tinyid
//     caps it at its batch.size.max). nextIdSimple answers the IDs
//     comma-separated in text/plain; nextId in tinyid's envelope,
//     {"data":[…],"code":200,"message":""}, with the IDs as JSON numbers.
//
// Every route needs the ids scope, as /ids does. The tinyid routes also
// take the caller's secret from the token parameter, where tinyid's
// callers send theirs (an Authorization header wins when both are given).
//
// Errors keep idgen's statuses (400, 401, 403, 404, 409, 503 with
// Retry-After), where Leaf answered 500 to every failure and tinyid 200
// with an empty body or an error code: the clients of both treat any
// status but 200 as a failure. They are problem documents, but for
// nextId, whose callers read its envelope: there data is null, code is
// tinyid's 5 ("token is error") for 401 and 403 and 6 for the rest, and
// message is the problem's detail.

// tinyid's envelope codes (its ErrorCode): success, a refused token and
// every other failure.
const (
	tinyidCodeOK         = 200
	tinyidCodeTokenError = 5
	tinyidCodeSysError   = 6
)

// addCompatRoutes registers the compatibility routes.
func (s *Server) addCompatRoutes(e *echo.Echo) {
	s.add(e.GET, "/api/v1/ids", s.guardIDs(s.handleV1IDs))
	s.add(e.POST, "/api/v1/id", s.guardIDs(s.handleV1ID))
	s.add(e.GET, "/api/segment/get/:key", s.guardIDs(s.handleLeafSegment))
	s.add(e.GET, "/api/snowflake/get/:key", s.guardIDs(s.handleLeafSnowflake))
	for _, add := range []addFunc{e.GET, e.POST} {
		s.add(add, "/tinyid/id/nextIdSimple", s.guardTinyid(s.handleTinyidSimple))
		s.add(add, "/tinyid/id/nextId", s.tinyidEnvelope(s.guardTinyid(s.handleTinyidNextID)))
	}
}

// v1IDs is the body of GET /api/v1/ids.
type v1IDs struct {
	IDs         []v1ID `json:"ids"`
	GeneratedAt string `json:"generated_at"`
}

// v1ID is one ID of GET /api/v1/ids: the ID in decimal and in hex (16
// lower-case digits), and its parts under the node's layout.
type v1ID struct {
	ValueString string      `json:"value_string"`
	ValueHex    string      `json:"value_hex"`
	Breakdown   v1Breakdown `json:"breakdown"`
}

// v1Breakdown is the decomposition of a v1ID; timestamp_ms is Unix
// milliseconds.
type v1Breakdown struct {
	TimestampMS    int64 `json:"timestamp_ms"`
	DatacenterID   int64 `json:"datacenter_id"`
	WorkerID       int64 `json:"worker_id"`
	SequenceNumber int64 `json:"sequence_number"`
}

// handleV1IDs serves GET /api/v1/ids?count=N: count Snowflake IDs (default
// 1, at most the node's maximum count), count being the only parameter.
func (s *Server) handleV1IDs(c echo.Context) error {
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
		if n, ok = parseCount(values[0], s.maxCount); !ok {
			return invalidf("count must be an integer from 1 to %d", s.maxCount)
		}
	}
	ids, _, err := s.snowflakes.NextNFenced(make([]snowflake.ID, 0, n), n)
	if err != nil {
		return fromDomain(err)
	}
	s.metrics.issuedSnowflake.Add(float64(len(ids)))
	body := v1IDs{IDs: make([]v1ID, len(ids)), GeneratedAt: s.now()}
	for i, id := range ids {
		p := s.layout.Decompose(id)
		body.IDs[i] = v1ID{
			ValueString: strconv.FormatInt(int64(id), 10),
			ValueHex:    hex16(int64(id)),
			Breakdown: v1Breakdown{
				TimestampMS:    p.Time.UnixMilli(),
				DatacenterID:   p.Datacenter,
				WorkerID:       p.Worker,
				SequenceNumber: p.Sequence,
			},
		}
	}
	return s.writeJSONValue(c, http.StatusOK, body)
}

// handleV1ID serves POST /api/v1/id: one Snowflake ID, {"id":"…"}. The
// request body, if any, is not read.
func (s *Server) handleV1ID(c echo.Context) error {
	id, err := s.oneSnowflake()
	if err != nil {
		return err
	}
	b := append([]byte(`{"id":`), appendQuotedInt(nil, id)...)
	return s.writeJSON(c, http.StatusOK, append(b, "}\n"...))
}

// handleLeafSegment serves Leaf's GET /api/segment/get/{key}: the next ID
// of namespace key, as text/plain.
func (s *Server) handleLeafSegment(c echo.Context) error {
	key := c.Param("key")
	if err := allocator.ValidNamespace(key); err != nil {
		return invalidf("key must be a namespace name matching ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	var batch allocator.Batch
	if err := s.draw(c, key, 1, &batch); err != nil {
		return err
	}
	return s.writeText(c, strconv.AppendInt(nil, batch.IDs[0], 10))
}

// handleLeafSnowflake serves Leaf's GET /api/snowflake/get/{key}: one
// Snowflake ID, as text/plain. Like Leaf, it ignores the key.
func (s *Server) handleLeafSnowflake(c echo.Context) error {
	id, err := s.oneSnowflake()
	if err != nil {
		return err
	}
	return s.writeText(c, strconv.AppendInt(nil, id, 10))
}

// handleTinyidSimple serves tinyid's nextIdSimple: the IDs of namespace
// bizType, comma-separated, as text/plain.
func (s *Server) handleTinyidSimple(c echo.Context) error {
	batch, err := s.tinyidDraw(c)
	if err != nil {
		return err
	}
	var b []byte
	for i, id := range batch.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return s.writeText(c, b)
}

// handleTinyidNextID serves tinyid's nextId: the IDs of namespace bizType
// in tinyid's envelope, as JSON numbers.
func (s *Server) handleTinyidNextID(c echo.Context) error {
	batch, err := s.tinyidDraw(c)
	if err != nil {
		return err
	}
	b := []byte(`{"data":[`)
	for i, id := range batch.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	b = append(b, `],"code":200,"message":""}`+"\n"...)
	return s.writeJSON(c, http.StatusOK, b)
}

// tinyidDraw draws the IDs a tinyid request asks for: batchSize (default
// 1; above the node's maximum count it is capped, as tinyid caps it) IDs
// of namespace bizType. Other parameters are ignored, as tinyid ignores
// them.
func (s *Server) tinyidDraw(c echo.Context) (*allocator.Batch, error) {
	form, perr := tinyidForm(c)
	if perr != nil {
		return nil, perr
	}
	name := form.Get("bizType")
	if name == "" {
		return nil, invalidf("bizType is required: the namespace to draw from")
	}
	if err := allocator.ValidNamespace(name); err != nil {
		return nil, invalidf("bizType must be a namespace name matching ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	n := 1
	if size := form.Get("batchSize"); size != "" {
		var ok bool
		// Nine digits are enough to cap: a longer number is refused.
		if n, ok = parseCount(size, allocator.MaxDrawCount); !ok {
			return nil, invalidf("batchSize must be an integer of 1 or more")
		}
		n = min(n, s.maxCount)
	}
	batch := new(allocator.Batch)
	if err := s.draw(c, name, n, batch); err != nil {
		return nil, err
	}
	return batch, nil
}

// tinyidForm returns the parameters of a tinyid request: those of the
// query and, for a POST, of a form body (at most MaxBodyBytes).
func tinyidForm(c echo.Context) (url.Values, *apiError) {
	req := c.Request()
	if req.Method == http.MethodPost && req.Body != nil {
		req.Body = http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
	}
	if err := req.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{code: codeTooLarge, detail: "request body larger than 64 KiB"}
		}
		return nil, invalidf("malformed parameters")
	}
	return req.Form, nil
}

// guardTinyid is guardIDs for the tinyid routes: with tokens, the caller's
// secret comes from the Authorization header or, without one, from the
// token parameter, and needs the ids scope. Without tokens the routes are
// open and the token parameter is ignored. Past the caller's rate limit
// (ratelimit.go) it answers 429, as guardIDs does.
func (s *Server) guardTinyid(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		set := s.tokens.Load()
		if set == nil {
			if s.limiter != nil {
				if perr := s.limiter.allowAddress(c.Request().RemoteAddr); perr != nil {
					return perr
				}
			}
			return next(c)
		}
		var tok Token
		if len(c.Request().Header[echo.HeaderAuthorization]) > 0 {
			t, perr := authenticate(c, set)
			if perr != nil {
				return perr
			}
			tok = t
		} else {
			form, perr := tinyidForm(c)
			if perr != nil {
				return perr
			}
			secret := form.Get("token")
			if secret == "" {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, bearerChallenge)
				return &apiError{code: codeUnauthorized, detail: "this route needs a token parameter or an Authorization: Bearer <token> header"}
			}
			t, ok := set.lookup(secret)
			if !ok {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, bearerChallenge+`, error="invalid_token"`)
				return &apiError{code: codeUnauthorized, detail: "unknown token"}
			}
			tok = t
		}
		if !tok.Scopes.Has(ScopeIDs) {
			return &apiError{code: codeForbidden, detail: "token " + tok.Name + " lacks the ids scope"}
		}
		if s.limiter != nil {
			if perr := s.limiter.allowToken(tok.Name); perr != nil {
				return perr
			}
		}
		return next(c)
	}
}

// tinyidError is the envelope of a failed nextId.
type tinyidError struct {
	Data    *struct{} `json:"data"`
	Code    int       `json:"code"`
	Message string    `json:"message"`
}

// tinyidEnvelope answers the errors of next in tinyid's envelope instead
// of a problem document, with the problem's status and headers.
func (s *Server) tinyidEnvelope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Response().Committed {
			return err
		}
		ae := fromDomain(err)
		status, _ := problemStatus(ae.code)
		h := c.Response().Header()
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || ae.code == codeNoWorker {
			h.Set("Retry-After", retryAfterSeconds(ae.retryAfter))
		}
		if status == http.StatusUnauthorized && h.Get(echo.HeaderWWWAuthenticate) == "" {
			h.Set(echo.HeaderWWWAuthenticate, bearerChallenge)
		}
		body := tinyidError{Code: tinyidCodeSysError, Message: ae.detail}
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			body.Code = tinyidCodeTokenError
		case http.StatusInternalServerError:
			s.log.LogAttrs(s.logContext(c), slog.LevelError, "request failed",
				slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Any("err", err))
			body.Message = "internal error; see the server log"
		}
		return s.writeJSONValue(c, status, body)
	}
}

// oneSnowflake issues one Snowflake ID, counted in the metrics.
func (s *Server) oneSnowflake() (int64, error) {
	var arr [1]snowflake.ID
	ids, _, err := s.snowflakes.NextNFenced(arr[:0], 1)
	if err != nil {
		return 0, fromDomain(err)
	}
	s.metrics.issuedSnowflake.Add(1)
	return int64(ids[0]), nil
}

// draw fills out with n IDs of namespace name, counted in the metrics.
func (s *Server) draw(c echo.Context, name string, n int, out *allocator.Batch) error {
	if err := s.segments.Draw(c.Request().Context(), name, n, out); err != nil {
		return fromDomain(err)
	}
	if out.Source == allocator.SourceSnowflake {
		s.metrics.issuedFallback.Add(float64(len(out.IDs)))
	} else {
		s.metrics.issuedSegment.Add(float64(len(out.IDs)))
	}
	return nil
}

// now is the time generated_at reports: the status page's clock, UTC, to
// the millisecond.
func (s *Server) now() string {
	return s.statusCfg.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// hex16 writes v, not negative, as 16 lower-case hex digits.
func hex16(v int64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// writeJSONValue sends v, encoded as JSON, as an uncacheable answer.
func (s *Server) writeJSONValue(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.writeJSON(c, status, append(b, '\n'))
}

// writeText sends body as an uncacheable text/plain answer.
func (s *Server) writeText(c echo.Context, body []byte) error {
	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h["Cache-Control"] = s.hdrNoStore
	h["X-Content-Type-Options"] = s.hdrNoSniff
	w.WriteHeader(http.StatusOK)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(body)
	return err
}
