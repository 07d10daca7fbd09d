package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
)

// tokenDigest hashes an admin token so that tokens of any length compare
// in constant time.
func tokenDigest(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// leaseJSON is a row of worker_leases; times are database time, null when
// the column is NULL.
type leaseJSON struct {
	Datacenter     int64      `json:"datacenter"`
	Worker         int64      `json:"worker"`
	Holder         *string    `json:"holder"`
	Owner          *string    `json:"owner"`
	FencingVersion int64      `json:"fencing_version"`
	AcquiredAt     *time.Time `json:"acquired_at"`
	HeartbeatAt    *time.Time `json:"heartbeat_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
	ReleasedAt     *time.Time `json:"released_at"`
	FloorMS        int64      `json:"floor_ms"`
	CeilingMS      int64      `json:"ceiling_ms"`
}

// bufferJSON is this node's view of a namespace's buffers.
type bufferJSON struct {
	Runway      int64 `json:"runway"`
	Step        int64 `json:"step"`
	Fetches     int64 `json:"fetches"`
	FetchErrors int64 `json:"fetch_errors"`
	FallbackIDs int64 `json:"fallback_ids"`
	Failing     bool  `json:"failing"`
}

// namespaceJSON is a row of segments plus this node's buffers (null when
// this node has not used the namespace). max_id is a string, as every ID.
type namespaceJSON struct {
	Name        string      `json:"name"`
	MaxID       string      `json:"max_id"`
	MaxIDLimit  *string     `json:"max_id_limit"`
	Step        int64       `json:"step"`
	MinStep     int64       `json:"min_step"`
	MaxStep     int64       `json:"max_step"`
	Mode        string      `json:"mode"`
	Fallback    string      `json:"fallback"`
	Version     int64       `json:"version"`
	CreatedAt   *time.Time  `json:"created_at"`
	UpdatedAt   *time.Time  `json:"updated_at"`
	Description string      `json:"description"`
	Buffer      *bufferJSON `json:"buffer"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func toLeaseJSON(l allocator.Lease) leaseJSON {
	out := leaseJSON{
		Datacenter:     l.DatacenterID,
		Worker:         l.WorkerID,
		FencingVersion: l.FencingVersion,
		AcquiredAt:     timePtr(l.AcquiredAt),
		HeartbeatAt:    timePtr(l.HeartbeatAt),
		ExpiresAt:      timePtr(l.ExpiresAt),
		ReleasedAt:     timePtr(l.ReleasedAt),
		Owner:          stringPtr(l.Owner),
		FloorMS:        l.FloorMS,
		CeilingMS:      l.CeilingMS,
	}
	if l.Holder != "" {
		h := l.Holder
		out.Holder = &h
	}
	return out
}

func (s *Server) toNamespaceJSON(ns allocator.Namespace) namespaceJSON {
	out := namespaceJSON{
		Name:        ns.Name,
		MaxID:       strconv.FormatInt(ns.MaxID, 10),
		Step:        ns.Step,
		MinStep:     ns.MinStep,
		MaxStep:     ns.MaxStep,
		Mode:        string(ns.Mode),
		Fallback:    string(ns.Fallback),
		Version:     ns.Version,
		CreatedAt:   timePtr(ns.CreatedAt),
		UpdatedAt:   timePtr(ns.UpdatedAt),
		Description: ns.Description,
	}
	if ns.MaxIDLimit > 0 {
		limit := strconv.FormatInt(ns.MaxIDLimit, 10)
		out.MaxIDLimit = &limit
	}
	if st, ok := s.segments.NamespaceStats(ns.Name); ok {
		out.Buffer = &bufferJSON{
			Runway:      st.Runway,
			Step:        st.Step,
			Fetches:     st.Fetches,
			FetchErrors: st.FetchErrors,
			FallbackIDs: st.FallbackIDs,
			Failing:     st.Failing,
		}
	}
	return out
}

// sendJSON encodes v with encoding/json; for the admin API and probes,
// which are not on the hot path.
func (s *Server) sendJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	return s.writeJSON(c, status, append(b, '\n'))
}

func storeCtx(c echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request().Context(), storeTimeout)
}

// handleAdminLeases serves GET /admin/leases: every row of worker_leases.
func (s *Server) handleAdminLeases(c echo.Context) error {
	return sendList(s, c, "leases", s.admin.ListLeases, toLeaseJSON)
}

// handleAdminNamespaces serves GET /admin/namespaces.
func (s *Server) handleAdminNamespaces(c echo.Context) error {
	return sendList(s, c, "namespaces", s.admin.ListNamespaces, s.toNamespaceJSON)
}

// sendList answers a listing of the admin API, {"<member>": [...]}: every
// row that list returns, in the JSON of toJSON, an empty list as []. The
// call is bounded by storeTimeout, and its error is storeError's.
func sendList[T, J any](s *Server, c echo.Context, member string, list func(context.Context) ([]T, error), toJSON func(T) J) error {
	ctx, cancel := storeCtx(c)
	defer cancel()
	rows, err := list(ctx)
	if err != nil {
		return storeError(err)
	}
	out := make([]J, 0, len(rows))
	for _, r := range rows {
		out = append(out, toJSON(r))
	}
	return s.sendJSON(c, http.StatusOK, map[string][]J{member: out})
}

// handleAdminNamespace serves GET /admin/namespaces/:name.
func (s *Server) handleAdminNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	ns, err := s.admin.GetNamespace(ctx, name)
	if err != nil {
		return storeError(err)
	}
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(ns))
}

// namespaceSettings are the settings a request may give a namespace: the
// body of PATCH /admin/namespaces/:name, and part of a create.
type namespaceSettings struct {
	Step        *int64  `json:"step"`
	MinStep     *int64  `json:"min_step"`
	MaxStep     *int64  `json:"max_step"`
	Mode        *string `json:"mode"`
	Fallback    *string `json:"fallback"`
	Description *string `json:"description"`
}

// update is the change the settings ask for.
func (r *namespaceSettings) update() allocator.NamespaceUpdate {
	return allocator.NamespaceUpdate{
		Step:        r.Step,
		MinStep:     r.MinStep,
		MaxStep:     r.MaxStep,
		Mode:        (*allocator.Mode)(r.Mode),
		Fallback:    (*allocator.Fallback)(r.Fallback),
		Description: r.Description,
	}
}

// createNamespaceRequest is the body of POST /admin/namespaces.
type createNamespaceRequest struct {
	Name  string   `json:"name"`
	Start *flexInt `json:"start"`
	namespaceSettings
}

// handleAdminCreateNamespace serves POST /admin/namespaces: the settings
// are those of allocator.NamespaceSpec, with its defaults and rules. A
// namespace with the Snowflake fallback gets its max_id_limit from this
// node's smallest Snowflake ID of now (allocator.FallbackLimit).
func (s *Server) handleAdminCreateNamespace(c echo.Context) error {
	var req createNamespaceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ns, err := req.spec().Namespace(s.snowflakes.SmallestIDNow())
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	created, err := s.admin.CreateNamespace(ctx, ns)
	if err != nil {
		return storeError(err)
	}
	// A namespace created fresh has version 0; one revived from its
	// tombstone goes on from the deleted one's version.
	msg := "namespace created"
	if created.Version > 0 {
		msg = "namespace revived"
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, msg,
		slog.String("namespace", created.Name), slog.Int64("max_id", created.MaxID), slog.Int64("version", created.Version))
	c.Response().Header().Set(echo.HeaderLocation, "/admin/namespaces/"+created.Name)
	return s.sendJSON(c, http.StatusCreated, s.toNamespaceJSON(created))
}

// spec is the namespace the request asks for.
func (r *createNamespaceRequest) spec() allocator.NamespaceSpec {
	u := r.update()
	spec := allocator.NamespaceSpec{Name: r.Name, Start: (*int64)(r.Start),
		Step: u.Step, MinStep: u.MinStep, MaxStep: u.MaxStep, Mode: u.Mode, Fallback: u.Fallback}
	if u.Description != nil {
		spec.Description = *u.Description
	}
	return spec
}

// handleAdminUpdateNamespace serves PATCH /admin/namespaces/:name: it
// changes the settings the body names, under allocator.NamespaceUpdate's
// rules (turning the Snowflake fallback on sets max_id_limit, as a create
// does). A node that holds ranges of the namespace applies a new step or
// mode at its next fetch.
func (s *Server) handleAdminUpdateNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	var req namespaceSettings
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	u := req.update()
	if u.IsZero() {
		return invalidf("nothing to change: give step, min_step, max_step, mode, fallback or description")
	}
	if err := u.Validate(); err != nil {
		return err
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	cur, err := s.admin.GetNamespace(ctx, name)
	if err != nil {
		return storeError(err)
	}
	_, u, err = u.Apply(cur, s.snowflakes.SmallestIDNow())
	if err != nil {
		return err
	}
	updated, err := s.admin.UpdateNamespace(ctx, name, u)
	if err != nil {
		return storeError(err)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "namespace changed",
		slog.String("namespace", updated.Name), slog.Int64("step", updated.Step), slog.Int64("min_step", updated.MinStep),
		slog.Int64("max_step", updated.MaxStep), slog.String("mode", string(updated.Mode)), slog.String("fallback", string(updated.Fallback)))
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(updated))
}

// namespaceParam returns the :name path parameter, validated.
func namespaceParam(c echo.Context) (string, *apiError) {
	name := c.Param("name")
	if err := allocator.ValidNamespace(name); err != nil {
		return "", invalidf("namespace must match ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	return name, nil
}

// storeError turns an error of a store call into a problem: the domain
// errors keep their meaning, any other failure of the database is 503.
func storeError(err error) error {
	ae := fromDomain(err)
	if ae.code == codeInternal && !errors.Is(err, context.Canceled) {
		ae = &apiError{code: codeUnavailable, detail: "database unavailable: " + err.Error(), retryAfter: time.Second, err: err}
	}
	return ae
}

// decodeBody decodes a JSON request body of at most MaxBodyBytes into v,
// refusing unknown fields and trailing data.
func decodeBody(c echo.Context, v any) error {
	req := c.Request()
	if req.ContentLength > MaxBodyBytes {
		return &apiError{code: codeTooLarge, detail: fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)}
	}
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
			return invalidf("Content-Type must be application/json")
		}
	}
	dec := json.NewDecoder(req.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = terr
			if err == nil {
				return invalidf("request body holds more than one JSON value")
			}
		}
	}
	if err == nil {
		return nil
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{code: codeTooLarge, detail: fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return invalidf("empty request body; want a JSON object")
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return invalidf("field %s: a JSON %s does not fit", typeErr.Field, typeErr.Value)
		}
		return invalidf("request body must be a JSON object, not a %s", typeErr.Value)
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return invalidf("malformed JSON in request body")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalidf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.As(err, new(*flexIntError)):
		return invalidf("%v", err)
	}
	return invalidf("malformed request body")
}

// flexInt is an integer that JSON may give as a number or, like every ID
// in idgen's API, as a decimal string.
type flexInt int64

type flexIntError struct{ text string }

func (e *flexIntError) Error() string {
	return fmt.Sprintf("%s is not an integer", truncate(e.text, 32))
}

func (n *flexInt) UnmarshalJSON(b []byte) error {
	text := string(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		text = text[1 : len(text)-1]
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return &flexIntError{text: string(b)}
	}
	*n = flexInt(v)
	return nil
}

// Limits of GET /admin/lease-events.
const (
	DefaultEventsLimit = 100
	MaxEventsLimit     = 1000
)

// leaseEventJSON is a row of lease_events. owner and request_id are null
// when the column is NULL.
type leaseEventJSON struct {
	ID             int64     `json:"id"`
	Datacenter     int64     `json:"datacenter"`
	Worker         int64     `json:"worker"`
	Holder         string    `json:"holder"`
	FencingVersion int64     `json:"fencing_version"`
	Kind           string    `json:"kind"`
	At             time.Time `json:"at"`
	Detail         string    `json:"detail"`
	Owner          *string   `json:"owner"`
	RequestID      *string   `json:"request_id"`
}

func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// eventsParams are the query parameters of GET /admin/lease-events.
const eventsParams = "after, limit, datacenter, worker, holder, owner, kind, since, until"

// parseEventsQuery parses the query of GET /admin/lease-events into a
// filter whose Limit is one above the page size asked for, so that the
// handler can tell whether a next page exists.
func (s *Server) parseEventsQuery(c echo.Context) (allocator.LeaseEventFilter, int, *apiError) {
	f := allocator.LeaseEventFilter{}
	limit := DefaultEventsLimit
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return f, 0, invalidf("malformed query")
	}
	for key, values := range q {
		if len(values) != 1 {
			return f, 0, invalidf("%s given more than once", truncate(key, 32))
		}
		v := values[0]
		intParam := func(lo, hi int64) (int64, *apiError) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return 0, invalidf("%s must be an integer from %d to %d", key, lo, hi)
			}
			return n, nil
		}
		timeParam := func() (time.Time, *apiError) {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return time.Time{}, invalidf("%s must be an RFC 3339 time such as 2026-03-01T12:00:00Z", key)
			}
			return t, nil
		}
		var perr *apiError
		switch key {
		case "after":
			f.AfterID, perr = intParam(0, math.MaxInt64)
		case "limit":
			var n int64
			n, perr = intParam(1, MaxEventsLimit)
			limit = int(n)
		case "datacenter":
			var n int64
			if n, perr = intParam(0, s.layout.MaxDatacenter()); perr == nil {
				f.DatacenterID = &n
			}
		case "worker":
			var n int64
			if n, perr = intParam(0, s.layout.MaxWorker()); perr == nil {
				f.WorkerID = &n
			}
		case "holder":
			if v == "" || len(v) > allocator.MaxHolderLen {
				perr = invalidf("holder must have 1 to %d bytes", allocator.MaxHolderLen)
			}
			f.Holder = v
		case "owner":
			if v == "" || len(v) > allocator.MaxOwnerLen {
				perr = invalidf("owner must have 1 to %d bytes", allocator.MaxOwnerLen)
			}
			f.Owner = v
		case "kind":
			f.Kind = allocator.EventKind(v)
			if f.Kind.Validate() != nil {
				perr = invalidf("kind must be one of acquire, takeover, release, lost, evict")
			}
		case "since":
			f.Since, perr = timeParam()
		case "until":
			f.Until, perr = timeParam()
		default:
			perr = invalidf("unknown query parameter %q; allowed: %s", truncate(key, 64), eventsParams)
		}
		if perr != nil {
			return f, 0, perr
		}
	}
	f.Limit = limit + 1
	if err := f.Validate(); err != nil {
		return f, 0, invalidf("%v", err)
	}
	return f, limit, nil
}

// handleAdminLeaseEvents serves GET /admin/lease-events: the audit trail of
// the lease table, oldest first, a page at a time. next_after is the
// after of the next page, null on the last.
func (s *Server) handleAdminLeaseEvents(c echo.Context) error {
	f, limit, perr := s.parseEventsQuery(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	events, err := s.admin.ListLeaseEvents(ctx, f)
	if err != nil {
		return storeError(err)
	}
	out := struct {
		Events    []leaseEventJSON `json:"events"`
		NextAfter *int64           `json:"next_after"`
	}{Events: make([]leaseEventJSON, 0, min(len(events), limit))}
	if len(events) > limit {
		events = events[:limit]
		next := events[limit-1].ID
		out.NextAfter = &next
	}
	for _, ev := range events {
		out.Events = append(out.Events, leaseEventJSON{
			ID:             ev.ID,
			Datacenter:     ev.DatacenterID,
			Worker:         ev.WorkerID,
			Holder:         ev.Holder,
			FencingVersion: ev.FencingVersion,
			Kind:           string(ev.Kind),
			At:             ev.At.UTC(),
			Detail:         ev.Detail,
			Owner:          stringPtr(ev.Owner),
			RequestID:      stringPtr(ev.RequestID),
		})
	}
	return s.sendJSON(c, http.StatusOK, out)
}

// evictRequest is the body of POST /admin/leases/:datacenter/:worker/evict;
// the body may be left out.
type evictRequest struct {
	Reason *string `json:"reason"`
	// FencingVersion, when given, is the version the operator saw: the
	// eviction is refused (409 lease_lost) if the lease has moved on.
	FencingVersion *flexInt `json:"fencing_version"`
}

// leaseKeyParams returns the :datacenter and :worker path parameters,
// checked against the layout by leaseapi.Broker.Key: the one check of a
// lease's key, which the gRPC API's lease calls make too.
func (s *Server) leaseKeyParams(c echo.Context) (allocator.LeaseKey, error) {
	key, err := s.broker.Key(intPathParam(c, "datacenter"), intPathParam(c, "worker"))
	if err != nil {
		return key, leaseError(err)
	}
	return key, nil
}

// intPathParam returns the path parameter name as an integer, or -1 when
// it is not one: no lease key has it, so Broker.Key refuses it as out of
// range, with the same message.
func intPathParam(c echo.Context, name string) int64 {
	n, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// handleAdminEvict serves POST /admin/leases/:datacenter/:worker/evict: it
// takes the lease from its holder (allocator.LeaseAdmin.Evict): the
// fencing version goes up, so the holder's next heartbeat fails and it
// stops issuing; the ceiling stays, so the next holder starts above
// everything the evicted one may have issued. The evict event names the
// caller and the request ID. A lease nobody holds is refused: 409
// lease_not_held.
func (s *Server) handleAdminEvict(c echo.Context) error {
	key, err := s.leaseKeyParams(c)
	if err != nil {
		return err
	}
	var body evictRequest
	if c.Request().ContentLength != 0 {
		if err := decodeBody(c, &body); err != nil {
			return err
		}
	}
	caller, _ := callerOf(c)
	req := allocator.EvictRequest{Key: key, Owner: caller.Name, RequestID: requestIDOf(c)}
	if body.Reason != nil {
		req.Reason = *body.Reason
	}
	if body.FencingVersion != nil {
		if req.FencingVersion = int64(*body.FencingVersion); req.FencingVersion < 1 {
			return invalidf("fencing_version must be 1 or more")
		}
	}
	if err := req.Validate(); err != nil {
		return invalidf("%v", err)
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	lease, err := s.admin.Evict(ctx, req)
	if err != nil {
		return storeError(err)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "lease evicted",
		slog.Int64("datacenter", key.DatacenterID), slog.Int64("worker", key.WorkerID),
		slog.Int64("fencing_version", lease.FencingVersion), slog.Int64("ceiling_ms", lease.CeilingMS),
		slog.String("reason", req.Reason))
	return s.sendJSON(c, http.StatusOK, struct {
		Datacenter     int64 `json:"datacenter"`
		Worker         int64 `json:"worker"`
		FencingVersion int64 `json:"fencing_version"`
		CeilingMS      int64 `json:"ceiling_ms"`
	}{key.DatacenterID, key.WorkerID, lease.FencingVersion, lease.CeilingMS})
}

// handleAdminDeleteNamespace serves DELETE /admin/namespaces/:name: the
// namespace is marked deleted (allocator.NamespaceAdmin.DeleteNamespace),
// never removed, so that one created again under its name starts above
// every ID it handed out. There is no table of namespace events: the
// deletion is logged with the caller and the request ID.
func (s *Server) handleAdminDeleteNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	ns, err := s.admin.DeleteNamespace(ctx, name)
	if err != nil {
		if errors.Is(err, allocator.ErrNamespaceNotFound) {
			return &apiError{code: codeNotFound, detail: fmt.Sprintf("namespace %q does not exist or was deleted already", name), err: err}
		}
		return storeError(err)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "namespace deleted",
		slog.String("namespace", ns.Name), slog.Int64("max_id", ns.MaxID), slog.Int64("version", ns.Version))
	return s.sendJSON(c, http.StatusOK, struct {
		Name      string    `json:"name"`
		MaxID     string    `json:"max_id"`
		Version   int64     `json:"version"`
		DeletedAt time.Time `json:"deleted_at"`
	}{ns.Name, strconv.FormatInt(ns.MaxID, 10), ns.Version, ns.DeletedAt.UTC()})
}
