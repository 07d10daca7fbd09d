package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// scratch is the pooled memory of one /ids request, so that a request
// allocates nothing per ID once the pool has warmed up.
type scratch struct {
	buf []byte
	d   idgen.Drawn
}

// maxPooledBytes keeps a rare huge answer from pinning its memory in the pool.
const maxPooledBytes = 4 << 20

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
}

// parseIDsQuery parses the raw query of GET /ids: count (default 1, digits
// only), namespace and explain (true or false), each at most once; the core
// checks the count's range and the name. It allocates only for escaped
// text and errors.
func parseIDsQuery(raw string, maxCount int) (idsQuery, *idgen.Error) {
	q := idsQuery{count: 1}
	var seenCount, seenNamespace, seenExplain bool
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
		var err error
		if key, err = unescapeQuery(key); err != nil {
			return q, invalidf("malformed query parameter name")
		}
		switch key {
		case "count":
			v, perr := onceValue(&seenCount, key, value)
			if perr != nil {
				return q, perr
			}
			n, ok := parseCount(v)
			if !ok {
				return q, countError(maxCount)
			}
			q.count = n
		case "namespace":
			v, perr := onceValue(&seenNamespace, key, value)
			if perr != nil {
				return q, perr
			}
			if v == "" {
				return q, invalidf("namespace is empty: leave the parameter out for Snowflake IDs")
			}
			q.namespace = v
		case "explain":
			// Its value is compared as given, not unescaped.
			if perr := once(&seenExplain, key); perr != nil {
				return q, perr
			}
			switch value {
			case "true":
				q.explain = true
			case "false":
				q.explain = false
			default:
				return q, invalidf("explain must be true or false")
			}
		default:
			return q, invalidf("unknown query parameter %q; allowed: count, namespace, explain", truncate(key, 64))
		}
	}
	if q.explain && q.namespace != "" {
		return q, invalidf("explain applies to Snowflake IDs only, not to a namespace")
	}
	return q, nil
}

// once marks the query parameter name seen, refusing it the second time.
func once(seen *bool, name string) *idgen.Error {
	if *seen {
		return invalidf("%s given more than once", name)
	}
	*seen = true
	return nil
}

// onceValue is once, returning the value unescaped.
func onceValue(seen *bool, name, value string) (string, *idgen.Error) {
	if perr := once(seen, name); perr != nil {
		return "", perr
	}
	v, err := unescapeQuery(value)
	if err != nil {
		return "", invalidf("malformed %s", name)
	}
	return v, nil
}

// parseCount parses a count of digits only (no sign, no exponent), at
// least 1 and at most nine digits; the core checks its range.
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

// countError refuses a count in the core's words for one out of range.
func countError(maxCount int) *idgen.Error {
	return invalidf("count must be an integer from 1 to %d", maxCount)
}

// unescapeQuery decodes s as a query component, without allocating when
// there is nothing to decode.
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

// handleIDs serves GET /ids: Snowflake IDs with the fencing token of their
// lease ("lease"), or a namespace's IDs with, for a strict one, the
// revision of the fetch that took them ("revision").
func (s *Server) handleIDs(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	q, perr := parseIDsQuery(c.Request().URL.RawQuery, s.svc.MaxCount())
	if perr != nil {
		return perr
	}
	sc := s.scratch.Get().(*scratch)
	defer s.putScratch(sc)
	// The segment allocator bounds a draw's wait itself
	// (SegmentSettings.MaxWait), and only when it waits: a deadline here
	// would cost every request.
	d := &sc.d
	if err := s.svc.Draw(c.Request().Context(), caller, idgen.DrawRequest{Namespace: q.namespace, Count: q.count}, d); err != nil {
		return err
	}
	b := append(sc.buf[:0], `{"ids":[`...)
	for i, id := range d.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuotedInt(b, id)
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
				b = appendDecomposition(b, snowflake.ID(id), s.layout.Decompose(snowflake.ID(id)))
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
			b = appendQuotedInt(b, r.First)
			b = append(b, `,"last":`...)
			b = appendQuotedInt(b, r.Last)
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
	b = append(b, "}\n"...)
	sc.buf = b
	return s.writeJSON(c, http.StatusOK, b)
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

// handleParse serves GET /ids/:id, the decomposition of a Snowflake ID.
func (s *Server) handleParse(c echo.Context) error {
	caller, err := s.authorize(c, idgen.ScopeIDs)
	if err != nil {
		return err
	}
	raw := c.Param("id")
	id, err := snowflake.ParseID(raw)
	if err != nil {
		return invalidf("%q is not a Snowflake ID: a decimal integer from 0 to %d", truncate(raw, 32), int64(1<<63-1))
	}
	p, err := s.svc.Decode(caller, int64(id))
	if err != nil {
		return err
	}
	var arr [256]byte
	b := appendDecomposition(arr[:0], id, p)
	b = append(b, '\n')
	return s.writeJSON(c, http.StatusOK, b)
}

// appendDecomposition appends
// {"id":"…","time":"…","timestamp_ms":…,"datacenter":…,"worker":…,"sequence":…}.
func appendDecomposition(b []byte, id snowflake.ID, p snowflake.Parts) []byte {
	b = append(b, `{"id":`...)
	b = appendQuotedInt(b, int64(id))
	b = append(b, `,"time":"`...)
	b = p.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = appendInt(b, `","timestamp_ms":`, p.Time.UnixMilli())
	b = appendInt(b, `,"datacenter":`, p.Datacenter)
	b = appendInt(b, `,"worker":`, p.Worker)
	b = appendInt(b, `,"sequence":`, p.Sequence)
	return append(b, '}')
}

func appendQuotedInt(b []byte, v int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
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
