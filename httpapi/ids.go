package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// scratch is a /ids request's pooled memory: no allocation per ID once warm.
type scratch struct {
	buf []byte
	d   idgen.Drawn
}

const maxPooledBytes = 4 << 20 // a rare huge answer does not stay pooled

func (s *Server) putScratch(sc *scratch) {
	if cap(sc.buf) > maxPooledBytes || cap(sc.d.IDs)*8 > maxPooledBytes {
		return
	}
	s.scratch.Put(sc)
}

// idsQuery is the parsed query of GET /ids.
type idsQuery struct {
	count     int
	namespace string
	explain   bool
	format    snowflake.Format
}

// idsParams are GET /ids's parameters; only the first two are unescaped.
var idsParams = [...]string{"count", "namespace", "explain", "format"}

// parseIDsQuery parses GET /ids's raw query: count (default 1), namespace,
// explain and format, each at most once; the core checks count and name.
// It allocates only for escaped text and errors.
func parseIDsQuery(raw string, svc *idgen.Service) (idsQuery, error) {
	q := idsQuery{count: 1}
	var seen [len(idsParams)]bool
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.IndexByte(pair, ';') >= 0 {
			return q, invalidf("query parameters are separated by '&', not ';'")
		}
		key, value, _ := strings.Cut(pair, "=")
		key, err := unescapeQuery(key)
		if err != nil {
			return q, invalidf("malformed query parameter name")
		}
		i := slices.Index(idsParams[:], key)
		switch {
		case i < 0:
			return q, invalidf("unknown query parameter %q; allowed: count, namespace, explain, format", truncate(key, 64))
		case seen[i]:
			return q, invalidf("%s given more than once", key)
		case i < 2:
			if value, err = unescapeQuery(value); err != nil {
				return q, invalidf("malformed %s", key)
			}
		}
		seen[i] = true
		switch key {
		case "count":
			var ok bool
			if q.count, ok = parseCount(value); !ok {
				return q, svc.CountError()
			}
		case "namespace":
			if value == "" {
				return q, invalidf("namespace is empty: leave the parameter out for Snowflake IDs")
			}
			q.namespace = value
		case "explain":
			if value != "true" && value != "false" {
				return q, invalidf("explain must be true or false")
			}
			q.explain = value == "true"
		case "format":
			f, err := idgen.ParseFormat(value)
			if err != nil {
				return q, idgen.ErrorOf(err, "")
			}
			q.format = f
		}
	}
	if q.explain && q.namespace != "" {
		return q, invalidf("explain applies to Snowflake IDs only, not to a namespace")
	}
	return q, nil
}

// parseCount parses one to nine digits, at least 1.
func parseCount(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1
}

// unescapeQuery decodes a query component, allocating only to decode.
func unescapeQuery(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// handleIDs serves GET /ids: Snowflake IDs with their fencing token, or a
// namespace's IDs with a strict one's revision.
func (s *Server) handleIDs(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	q, err := parseIDsQuery(c.Request().URL.RawQuery, s.svc)
	if err != nil {
		return err
	}
	sc := s.scratch.Get().(*scratch)
	defer s.putScratch(sc)
	// No deadline: the segment allocator bounds its waits (MaxWait).
	d := &sc.d
	req := idgen.DrawRequest{Namespace: q.namespace, Count: q.count, Format: q.format}
	if err := s.svc.Draw(c.Request().Context(), caller, req, d); err != nil {
		return err
	}
	enc := s.svc.Encoding(req)
	b := append(sc.buf[:0], `{"ids":[`...)
	for i, id := range d.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, enc, id)
	}
	if q.namespace == "" {
		b = append(b, `],"source":"snowflake"`...)
		b = appendLease(b, d.Lease)
		if q.explain {
			b = append(b, `,"explain":[`...)
			for i, id := range d.IDs {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendDecomposition(b, enc, snowflake.ID(id), s.layout.Decompose(snowflake.ID(id)))
			}
			b = append(b, ']')
		}
	} else {
		// The name passed the core's check: it needs no JSON escaping.
		b = append(b, `],"namespace":"`...)
		b = append(b, q.namespace...)
		b = append(b, `","source":"`...)
		if d.Source == idgen.SourceFallback {
			b = append(b, `snowflake","ranges":[`...)
		} else {
			b = append(b, `segment","ranges":[`...)
		}
		for i, r := range d.Ranges {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"first":`...)
			b = appendQuoted(b, enc, r.First)
			b = append(b, `,"last":`...)
			b = appendQuoted(b, enc, r.Last)
			b = append(b, '}')
		}
		b = append(b, ']')
		switch {
		case d.Source == idgen.SourceFallback:
			b = appendLease(b, d.Lease)
		case d.Revision > 0:
			// A strict namespace: the revision its fetch left.
			b = appendInt(b, `,"revision":`, d.Revision)
		}
	}
	if enc.Named() {
		b = append(b, `,"format":"`...)
		b = append(b, enc.Format.String()...)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	sc.buf = b
	return s.writeJSON(c, http.StatusOK, b)
}

// appendQuoted appends id in enc's form as a JSON string (no escaping).
func appendQuoted(b []byte, enc idgen.Encoding, id int64) []byte {
	b = append(b, '"')
	b = enc.Append(b, id)
	return append(b, '"')
}

// appendLease appends ,"lease":{"datacenter":…,"worker":…,"fencing_version":…}.
func appendLease(b []byte, t allocator.LeaseToken) []byte {
	b = appendInt(b, `,"lease":{"datacenter":`, t.DatacenterID)
	b = appendInt(b, `,"worker":`, t.WorkerID)
	b = appendInt(b, `,"fencing_version":`, t.FencingVersion)
	return append(b, '}')
}

// appendInt appends text, the JSON up to a member's value, and v.
func appendInt(b []byte, text string, v int64) []byte {
	b = append(b, text...)
	return strconv.AppendInt(b, v, 10)
}

// handleParse serves GET /ids/:id: the parts of an ID in any form (or
// ?format=), and the ID in every form.
func (s *Server) handleParse(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	f, err := s.formatParam(c, "format")
	if err != nil {
		return err
	}
	id, p, err := s.svc.DecodeText(caller, c.Param("id"), f)
	if err != nil {
		return err
	}
	var arr [384]byte
	b := appendDecomposition(arr[:0], idgen.Encoding{}, id, p)
	b = b[:len(b)-1] // reopen the object
	sep := `,"forms":{"`
	for i, form := range s.svc.Forms(id) { // decimal, base32, base62, hex
		b = append(append(b, sep...), [...]string{"decimal", "base32", "base62", "hex"}[i]...)
		b = append(append(b, `":"`...), form...)
		sep = `","`
	}
	b = append(b, "\"}}\n"...)
	return s.writeJSON(c, http.StatusOK, b)
}

// formatParam reads query parameter name as a format (FormatAny when
// absent), allowing only name and others, once each.
func (s *Server) formatParam(c echo.Context, name string, others ...string) (snowflake.Format, error) {
	q := c.QueryParams()
	for k, v := range q {
		if k != name && !slices.Contains(others, k) {
			return 0, invalidf("unknown query parameter %q; allowed: %s", truncate(k, 64), strings.Join(append([]string{name}, others...), ", "))
		}
		if len(v) > 1 {
			return 0, invalidf("%s given more than once", k)
		}
	}
	return idgen.ParseFormat(q.Get(name))
}

// handleCompose serves GET /ids/compose?time=…[&format=…]: a millisecond's
// smallest and largest Snowflake ID.
func (s *Server) handleCompose(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	f, err := s.formatParam(c, "format", "time")
	if err != nil {
		return err
	}
	raw := c.QueryParam("time")
	if raw == "" {
		return invalidf("time is missing: an RFC 3339 instant such as 2026-01-01T00:00:00.000Z")
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return invalidf("time %q is not an RFC 3339 instant such as 2026-01-01T00:00:00.000Z", truncate(raw, 64))
	}
	got, err := s.svc.Compose(caller, t)
	if err != nil {
		return err
	}
	enc := s.svc.Encoding(idgen.DrawRequest{Format: f})
	var arr [256]byte
	b := append(arr[:0], `{"time":"`...)
	b = got.Time.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = appendInt(b, `","timestamp_ms":`, got.Time.UnixMilli())
	b = append(b, `,"first":`...)
	b = appendQuoted(b, enc, int64(got.First))
	b = append(b, `,"last":`...)
	b = appendQuoted(b, enc, int64(got.Last))
	if enc.Named() {
		b = append(b, `,"format":"`...)
		b = append(b, enc.Format.String()...)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	return s.writeJSON(c, http.StatusOK, b)
}

// appendDecomposition appends {"id":"…","time":"…","timestamp_ms":…,
// "datacenter":…,"worker":…,"sequence":…}, the id in enc's form.
func appendDecomposition(b []byte, enc idgen.Encoding, id snowflake.ID, p snowflake.Parts) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, enc, int64(id))
	b = append(b, `,"time":"`...)
	b = p.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = appendInt(b, `","timestamp_ms":`, p.Time.UnixMilli())
	b = appendInt(b, `,"datacenter":`, p.Datacenter)
	b = appendInt(b, `,"worker":`, p.Worker)
	b = appendInt(b, `,"sequence":`, p.Sequence)
	return append(b, '}')
}

func (s *Server) writeJSON(c echo.Context, status int, body []byte) error {
	return s.write(c, status, s.hdrJSON, body)
}

// write sends body as an uncacheable answer of the content type given.
func (s *Server) write(c echo.Context, status int, contentType []string, body []byte) error {
	w := c.Response()
	h := w.Header()
	h["Content-Type"] = contentType
	h["Cache-Control"] = s.hdrNoStore
	h["X-Content-Type-Options"] = s.hdrNoSniff
	w.WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(body)
	return err
}
