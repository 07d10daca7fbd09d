package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// scratch is the reusable memory of one /ids request: the JSON being built,
// the Snowflake IDs and the segment batch. Server.scratch pools them, so a
// request allocates nothing per ID once the pool has warmed up.
type scratch struct {
	buf   []byte
	ids   []snowflake.ID
	batch allocator.Batch
}

// maxPooledBytes keeps a rare huge answer from pinning its memory in the pool.
const maxPooledBytes = 4 << 20

func (s *Server) putScratch(sc *scratch) {
	if cap(sc.buf) > maxPooledBytes || cap(sc.ids)*8 > maxPooledBytes || cap(sc.batch.IDs)*8 > maxPooledBytes {
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
// only, 1..maxCount), namespace and explain (true or false), each at most
// once, and nothing else. It allocates only for escaped text and errors.
func parseIDsQuery(raw string, maxCount int) (idsQuery, *apiError) {
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
			n, ok := parseCount(v, maxCount)
			if !ok {
				return q, invalidf("count must be an integer from 1 to %d", maxCount)
			}
			q.count = n
		case "namespace":
			v, perr := onceValue(&seenNamespace, key, value)
			if perr != nil {
				return q, perr
			}
			if err := allocator.ValidNamespace(v); err != nil {
				return q, invalidf("namespace must match ^[a-z0-9][a-z0-9_.-]{0,63}$")
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

// once marks the query parameter name seen, and refuses it if it was
// seen already: each parameter of GET /ids may be given once.
func once(seen *bool, name string) *apiError {
	if *seen {
		return invalidf("%s given more than once", name)
	}
	*seen = true
	return nil
}

// onceValue is once for a parameter whose value may be escaped: it
// returns the value unescaped.
func onceValue(seen *bool, name, value string) (string, *apiError) {
	if perr := once(seen, name); perr != nil {
		return "", perr
	}
	v, err := unescapeQuery(value)
	if err != nil {
		return "", invalidf("malformed %s", name)
	}
	return v, nil
}

// parseCount parses a count of digits only (no sign, no exponent) in
// 1..maxCount.
func parseCount(s string, maxCount int) (int, bool) {
	if s == "" || len(s) > 9 {
		// Nine digits cover every count up to allocator.MaxDrawCount.
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
	return n, 1 <= n && n <= maxCount
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

// handleIDs serves GET /ids: Snowflake IDs, or with namespace the IDs of a
// namespace's counter. Snowflake IDs come with the fencing token of the
// lease that made them ("lease"), a strict namespace's IDs with the
// revision of the fetch that took them ("revision").
func (s *Server) handleIDs(c echo.Context) error {
	q, perr := parseIDsQuery(c.Request().URL.RawQuery, s.maxCount)
	if perr != nil {
		return perr
	}
	sc := s.scratch.Get().(*scratch)
	defer s.putScratch(sc)
	if q.namespace != "" {
		return s.serveNamespace(c, q, sc)
	}

	ids, lease, err := s.snowflakes.NextNFenced(sc.ids[:0], q.count)
	sc.ids = ids[:0]
	if err != nil {
		// IDs issued before the refusal are dropped: they are unique and
		// nobody will ever see them.
		return fromDomain(err)
	}
	s.metrics.issuedSnowflake.Add(float64(len(ids)))

	b := append(sc.buf[:0], `{"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuotedInt(b, int64(id))
	}
	b = append(b, `],"source":"snowflake"`...)
	b = appendLease(b, lease)
	if q.explain {
		b = append(b, `,"explain":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.appendDecomposition(b, id)
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	sc.buf = b
	return s.writeJSON(c, http.StatusOK, b)
}

// serveNamespace answers GET /ids?namespace=NS.
func (s *Server) serveNamespace(c echo.Context, q idsQuery, sc *scratch) error {
	// The segment allocator bounds the wait itself (SegmentSettings.MaxWait),
	// and only when a draw waits: a deadline here would cost every request.
	err := s.segments.Draw(c.Request().Context(), q.namespace, q.count, &sc.batch)
	if err != nil {
		return fromDomain(err)
	}
	batch := &sc.batch
	source := "segment"
	if batch.Source == allocator.SourceSnowflake {
		source = "snowflake"
		s.metrics.issuedFallback.Add(float64(len(batch.IDs)))
	} else {
		s.metrics.issuedSegment.Add(float64(len(batch.IDs)))
	}

	b := append(sc.buf[:0], `{"ids":[`...)
	for i, id := range batch.IDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuotedInt(b, id)
	}
	// The name passed ValidNamespace: it needs no JSON escaping.
	b = append(b, `],"namespace":"`...)
	b = append(b, q.namespace...)
	b = append(b, `","source":"`...)
	b = append(b, source...)
	b = append(b, `","ranges":[`...)
	for i, r := range batch.Ranges {
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
	case batch.Source == allocator.SourceSnowflake:
		b = appendLease(b, batch.Lease)
	case batch.Revision > 0:
		// A strict namespace: the revision its fetch left.
		b = appendInt(b, `,"revision":`, batch.Revision)
	}
	b = append(b, "}\n"...)
	sc.buf = b
	return s.writeJSON(c, http.StatusOK, b)
}

// appendLease appends the fencing token of Snowflake IDs, the lease that
// made them: ,"lease":{"datacenter":…,"worker":…,"fencing_version":…}.
func appendLease(b []byte, t allocator.LeaseToken) []byte {
	b = appendInt(b, `,"lease":{"datacenter":`, t.DatacenterID)
	b = appendInt(b, `,"worker":`, t.WorkerID)
	b = appendInt(b, `,"fencing_version":`, t.FencingVersion)
	return append(b, '}')
}

// appendInt appends text, the JSON up to a member's value, and the
// member's integer value v.
func appendInt(b []byte, text string, v int64) []byte {
	b = append(b, text...)
	return strconv.AppendInt(b, v, 10)
}

// handleParse serves GET /ids/:id, the decomposition of a Snowflake ID
// under this node's layout.
func (s *Server) handleParse(c echo.Context) error {
	raw := c.Param("id")
	id, err := snowflake.ParseID(raw)
	if err != nil {
		return invalidf("%q is not a Snowflake ID: a decimal integer from 0 to %d", truncate(raw, 32), int64(1<<63-1))
	}
	var arr [256]byte
	b := s.appendDecomposition(arr[:0], id)
	b = append(b, '\n')
	return s.writeJSON(c, http.StatusOK, b)
}

// appendDecomposition appends the JSON object describing id:
// {"id":"…","time":"…","timestamp_ms":…,"datacenter":…,"worker":…,"sequence":…}.
// timestamp_ms is Unix milliseconds, the same instant as time.
func (s *Server) appendDecomposition(b []byte, id snowflake.ID) []byte {
	p := s.layout.Decompose(id)
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

// writeJSON sends body as an uncacheable JSON answer.
func (s *Server) writeJSON(c echo.Context, status int, body []byte) error {
	w := c.Response()
	h := w.Header()
	h["Content-Type"] = s.hdrJSON
	h["Cache-Control"] = s.hdrNoStore
	h["X-Content-Type-Options"] = s.hdrNoSniff
	w.WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(body)
	return err
}
