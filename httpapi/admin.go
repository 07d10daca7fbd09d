package httpapi

import (
	"context"
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

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
)

// The admin API under /admin/ (admin scope): leases, lease events,
// evictions, namespaces. Times are database UTC (null for NULL); IDs are
// strings.

// leaseJSON is a row of worker_leases.
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

// namespaceJSON is a row of segments and this node's buffers, if any.
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
	Stride      int64       `json:"stride"` // slot n of the counter is ID n×stride+offset
	Offset      int64       `json:"offset"`
	Buffer      *bufferJSON `json:"buffer"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toLeaseJSON(l allocator.Lease) leaseJSON {
	return leaseJSON{Datacenter: l.DatacenterID, Worker: l.WorkerID, Holder: stringPtr(l.Holder), Owner: stringPtr(l.Owner),
		FencingVersion: l.FencingVersion, AcquiredAt: timePtr(l.AcquiredAt), HeartbeatAt: timePtr(l.HeartbeatAt),
		ExpiresAt: timePtr(l.ExpiresAt), ReleasedAt: timePtr(l.ReleasedAt), FloorMS: l.FloorMS, CeilingMS: l.CeilingMS}
}

func (s *Server) toNamespaceJSON(ns allocator.Namespace) namespaceJSON {
	out := namespaceJSON{Name: ns.Name, MaxID: strconv.FormatInt(ns.MaxID, 10), Step: ns.Step, MinStep: ns.MinStep,
		MaxStep: ns.MaxStep, Mode: string(ns.Mode), Fallback: string(ns.Fallback), Version: ns.Version,
		CreatedAt: timePtr(ns.CreatedAt), UpdatedAt: timePtr(ns.UpdatedAt), Description: ns.Description}
	out.Stride, out.Offset = ns.Interleave()
	if ns.MaxIDLimit > 0 {
		out.MaxIDLimit = stringPtr(strconv.FormatInt(ns.MaxIDLimit, 10))
	}
	if st, ok := s.segments.NamespaceStats(ns.Name); ok {
		out.Buffer = &bufferJSON{Runway: st.Runway, Step: st.Step, Fetches: st.Fetches,
			FetchErrors: st.FetchErrors, FallbackIDs: st.FallbackIDs, Failing: st.Failing}
	}
	return out
}

// sendJSON answers v in encoding/json's words (off the hot path).
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

// sendList answers {"<member>": [...]} with the rows of list, none as [].
func sendList[T, J any](s *Server, c echo.Context, member string, list func(context.Context) ([]T, error), toJSON func(T) J) error {
	ctx, cancel := storeCtx(c)
	defer cancel()
	rows, err := list(ctx)
	if err != nil {
		return idgen.StoreError(err, "")
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
		return idgen.StoreError(err, name)
	}
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(ns))
}

// namespaceSettings is the body of a PATCH, and part of a create.
type namespaceSettings struct {
	Step        *int64  `json:"step"`
	MinStep     *int64  `json:"min_step"`
	MaxStep     *int64  `json:"max_step"`
	Mode        *string `json:"mode"`
	Fallback    *string `json:"fallback"`
	Description *string `json:"description"`
}

func (r *namespaceSettings) update() allocator.NamespaceUpdate {
	return allocator.NamespaceUpdate{Step: r.Step, MinStep: r.MinStep, MaxStep: r.MaxStep,
		Mode: (*allocator.Mode)(r.Mode), Fallback: (*allocator.Fallback)(r.Fallback), Description: r.Description}
}

// createNamespaceRequest is the body of POST /admin/namespaces.
type createNamespaceRequest struct {
	Name  string   `json:"name"`
	Start *flexInt `json:"start"`
	// Stride and Offset are fixed at creation (a PATCH refuses them).
	Stride *int64 `json:"stride"`
	Offset *int64 `json:"offset"`
	namespaceSettings
}

// handleAdminCreateNamespace serves POST /admin/namespaces; a fallback's
// max_id_limit comes from now's smallest Snowflake ID.
func (s *Server) handleAdminCreateNamespace(c echo.Context) error {
	var req createNamespaceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	u := req.update()
	spec := allocator.NamespaceSpec{Name: req.Name, Start: (*int64)(req.Start),
		Step: u.Step, MinStep: u.MinStep, MaxStep: u.MaxStep, Mode: u.Mode, Fallback: u.Fallback,
		Stride: req.Stride, Offset: req.Offset}
	if u.Description != nil {
		spec.Description = *u.Description
	}
	ns, err := spec.Namespace(s.lease.SmallestIDNow())
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	created, err := s.admin.CreateNamespace(ctx, ns)
	if err != nil {
		return idgen.StoreError(err, ns.Name)
	}
	// One revived from its tombstone goes on from the deleted one's version.
	msg := "namespace created"
	if created.Version > 0 {
		msg = "namespace revived"
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, msg,
		slog.String("namespace", created.Name), slog.Int64("max_id", created.MaxID), slog.Int64("version", created.Version),
		slog.Int64("stride", created.Stride), slog.Int64("offset", created.Offset))
	c.Response().Header().Set(echo.HeaderLocation, "/admin/namespaces/"+created.Name)
	return s.sendJSON(c, http.StatusCreated, s.toNamespaceJSON(created))
}

// handleAdminUpdateNamespace serves PATCH /admin/namespaces/:name; nodes
// apply it at their next fetch.
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
		return idgen.StoreError(err, name)
	}
	if _, u, err = u.Apply(cur, s.lease.SmallestIDNow()); err != nil {
		return err
	}
	updated, err := s.admin.UpdateNamespace(ctx, name, u)
	if err != nil {
		return idgen.StoreError(err, name)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "namespace changed",
		slog.String("namespace", updated.Name), slog.Int64("step", updated.Step), slog.Int64("min_step", updated.MinStep),
		slog.Int64("max_step", updated.MaxStep), slog.String("mode", string(updated.Mode)), slog.String("fallback", string(updated.Fallback)))
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(updated))
}

// handleAdminDeleteNamespace serves DELETE /admin/namespaces/:name,
// leaving a tombstone.
func (s *Server) handleAdminDeleteNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	ns, err := s.admin.DeleteNamespace(ctx, name)
	if errors.Is(err, allocator.ErrNamespaceNotFound) {
		return &idgen.Error{Code: idgen.NotFound, Detail: fmt.Sprintf("namespace %q does not exist or was deleted already", name), Err: err}
	} else if err != nil {
		return idgen.StoreError(err, name)
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

// namespaceParam returns the :name path parameter, validated.
func namespaceParam(c echo.Context) (string, *idgen.Error) {
	name := c.Param("name")
	if err := allocator.ValidNamespace(name); err != nil {
		return "", invalidf("namespace must match ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	return name, nil
}

// decodeBody decodes a JSON body into v, strictly and within
// idgen.MaxRequestBytes.
func decodeBody(c echo.Context, v any) error {
	req := c.Request()
	tooLarge := &idgen.Error{Code: idgen.TooLarge, Detail: fmt.Sprintf("request body larger than %d bytes", idgen.MaxRequestBytes)}
	if req.ContentLength > idgen.MaxRequestBytes {
		return tooLarge
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
		if _, err = dec.Token(); err == nil {
			return invalidf("request body holds more than one JSON value")
		} else if err == io.EOF {
			return nil
		}
	}
	var typeErr *json.UnmarshalTypeError
	var flexErr *idgen.Error
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return tooLarge
	case errors.Is(err, io.EOF):
		return invalidf("empty request body; want a JSON object")
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidf("field %s: a JSON %s does not fit", typeErr.Field, typeErr.Value)
	case typeErr != nil:
		return invalidf("request body must be a JSON object, not a %s", typeErr.Value)
	case errors.As(err, new(*json.SyntaxError)), errors.Is(err, io.ErrUnexpectedEOF):
		return invalidf("malformed JSON in request body")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalidf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.As(err, &flexErr):
		return flexErr
	}
	return invalidf("malformed request body")
}

// flexInt is an integer given as a JSON number or a decimal string.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(string(b), `"`), `"`), 10, 64)
	if err != nil {
		return invalidf("%s is not an integer", truncate(string(b), 32))
	}
	*n = flexInt(v)
	return nil
}

// Limits of GET /admin/lease-events.
const (
	DefaultEventsLimit = 100
	MaxEventsLimit     = 1000
)

// leaseEventJSON is a row of lease_events.
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

// eventsParams are the query parameters of GET /admin/lease-events.
const eventsParams = "after, limit, datacenter, worker, holder, owner, kind, since, until"

// parseEventsQuery parses GET /admin/lease-events's query; Limit is one
// above the page size, to tell whether there is more.
func (s *Server) parseEventsQuery(c echo.Context) (allocator.LeaseEventFilter, int, *idgen.Error) {
	f := allocator.LeaseEventFilter{}
	limit := int64(DefaultEventsLimit)
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return f, 0, invalidf("malformed query")
	}
	for key, values := range q {
		if len(values) != 1 {
			return f, 0, invalidf("%s given more than once", truncate(key, 32))
		}
		v := values[0]
		intParam := func(dst *int64, lo, hi int64) *idgen.Error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return invalidf("%s must be an integer from %d to %d", key, lo, hi)
			}
			*dst = n
			return nil
		}
		timeParam := func() (time.Time, *idgen.Error) {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return t, invalidf("%s must be an RFC 3339 time such as 2026-03-01T12:00:00Z", key)
			}
			return t, nil
		}
		var perr *idgen.Error
		switch key {
		case "after":
			perr = intParam(&f.AfterID, 0, math.MaxInt64)
		case "limit":
			perr = intParam(&limit, 1, MaxEventsLimit)
		case "datacenter":
			f.DatacenterID = new(int64)
			perr = intParam(f.DatacenterID, 0, s.layout.MaxDatacenter())
		case "worker":
			f.WorkerID = new(int64)
			perr = intParam(f.WorkerID, 0, s.layout.MaxWorker())
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
			if f.Kind = allocator.EventKind(v); f.Kind.Validate() != nil {
				perr = invalidf("kind must be one of acquire, takeover, release, lost, evict, fence")
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
	f.Limit = int(limit) + 1
	if err := f.Validate(); err != nil {
		return f, 0, invalidf("%v", err)
	}
	return f, int(limit), nil
}

// handleAdminLeaseEvents serves GET /admin/lease-events, oldest first,
// paged (next_after null on the last).
func (s *Server) handleAdminLeaseEvents(c echo.Context) error {
	f, limit, perr := s.parseEventsQuery(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	events, err := s.admin.ListLeaseEvents(ctx, f)
	if err != nil {
		return idgen.StoreError(err, "")
	}
	out := struct {
		Events    []leaseEventJSON `json:"events"`
		NextAfter *int64           `json:"next_after"`
	}{Events: make([]leaseEventJSON, 0, min(len(events), limit))}
	if len(events) > limit {
		events = events[:limit]
		out.NextAfter = &events[limit-1].ID
	}
	for _, ev := range events {
		out.Events = append(out.Events, leaseEventJSON{
			ID: ev.ID, Datacenter: ev.DatacenterID, Worker: ev.WorkerID, Holder: ev.Holder, FencingVersion: ev.FencingVersion,
			Kind: string(ev.Kind), At: ev.At.UTC(), Detail: ev.Detail, Owner: stringPtr(ev.Owner), RequestID: stringPtr(ev.RequestID),
		})
	}
	return s.sendJSON(c, http.StatusOK, out)
}

// evictRequest is an evict's optional body; a FencingVersion the lease
// moved past is 409 lease_lost.
type evictRequest struct {
	Reason         *string  `json:"reason"`
	FencingVersion *flexInt `json:"fencing_version"`
}

// leaseKeyParams returns :datacenter and :worker, checked by
// idgen.LeaseKeyOf (a non-integer as -1).
func (s *Server) leaseKeyParams(c echo.Context) (allocator.LeaseKey, error) {
	param := func(name string) int64 {
		n, err := strconv.ParseInt(c.Param(name), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return idgen.LeaseKeyOf(s.layout, param("datacenter"), param("worker"))
}

// handleAdminEvict serves POST /admin/leases/:datacenter/:worker/evict;
// a free lease is 409 lease_not_held.
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
	caller := callerOf(c)
	req := allocator.EvictRequest{Key: key, Owner: caller.Name, RequestID: caller.RequestID}
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
		return idgen.StoreError(err, "")
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
