package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
)

// Namespace settings the admin API accepts.
const (
	defaultStep       = 1000
	maxStepLimit      = 1 << 30 // the largest step, min_step or max_step
	maxStepGrowth     = 100     // max_step defaults to step × maxStepGrowth, capped at maxStepLimit
	maxDescriptionLen = 1024    // bytes
)

// tokenDigest hashes an admin token so that tokens of any length compare
// in constant time.
func tokenDigest(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// authorize guards /admin/: 404 when no admin token is configured, 401
// without a well-formed "Authorization: Bearer <token>", 403 for a wrong
// token. It also caps the request body at MaxBodyBytes.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.admin {
			return &apiError{code: codeNotFound, detail: "the admin API is disabled: no admin token is configured"}
		}
		req := c.Request()
		values := req.Header.Values(echo.HeaderAuthorization)
		if len(values) == 0 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="idgen admin"`)
			return &apiError{code: codeUnauthorized, detail: "the admin API needs an Authorization: Bearer <token> header"}
		}
		scheme, token, ok := strings.Cut(values[0], " ")
		if len(values) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="idgen admin", error="invalid_request"`)
			return &apiError{code: codeUnauthorized, detail: "malformed Authorization header: want a single Bearer <token>"}
		}
		got := tokenDigest(token)
		if subtle.ConstantTimeCompare(got[:], s.adminKey[:]) != 1 {
			return &apiError{code: codeForbidden, detail: "wrong admin token"}
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
		return next(c)
	}
}

// leaseJSON is a row of worker_leases; times are database time, null when
// the column is NULL.
type leaseJSON struct {
	Datacenter     int64      `json:"datacenter"`
	Worker         int64      `json:"worker"`
	Holder         *string    `json:"holder"`
	FencingVersion int64      `json:"fencing_version"`
	AcquiredAt     *time.Time `json:"acquired_at"`
	HeartbeatAt    *time.Time `json:"heartbeat_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
	ReleasedAt     *time.Time `json:"released_at"`
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
	ctx, cancel := storeCtx(c)
	defer cancel()
	leases, err := s.store.ListLeases(ctx)
	if err != nil {
		return storeError(err)
	}
	out := struct {
		Leases []leaseJSON `json:"leases"`
	}{Leases: make([]leaseJSON, 0, len(leases))}
	for _, l := range leases {
		out.Leases = append(out.Leases, toLeaseJSON(l))
	}
	return s.sendJSON(c, http.StatusOK, out)
}

// handleAdminNamespaces serves GET /admin/namespaces.
func (s *Server) handleAdminNamespaces(c echo.Context) error {
	ctx, cancel := storeCtx(c)
	defer cancel()
	list, err := s.store.ListNamespaces(ctx)
	if err != nil {
		return storeError(err)
	}
	out := struct {
		Namespaces []namespaceJSON `json:"namespaces"`
	}{Namespaces: make([]namespaceJSON, 0, len(list))}
	for _, ns := range list {
		out.Namespaces = append(out.Namespaces, s.toNamespaceJSON(ns))
	}
	return s.sendJSON(c, http.StatusOK, out)
}

// handleAdminNamespace serves GET /admin/namespaces/:name.
func (s *Server) handleAdminNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	ns, err := s.store.GetNamespace(ctx, name)
	if err != nil {
		return storeError(err)
	}
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(ns))
}

// createNamespaceRequest is the body of POST /admin/namespaces.
type createNamespaceRequest struct {
	Name        string   `json:"name"`
	Start       *flexInt `json:"start"`
	Step        *int64   `json:"step"`
	MinStep     *int64   `json:"min_step"`
	MaxStep     *int64   `json:"max_step"`
	Mode        *string  `json:"mode"`
	Fallback    *string  `json:"fallback"`
	Description *string  `json:"description"`
}

// handleAdminCreateNamespace serves POST /admin/namespaces. start is the
// first ID the namespace hands out (default 1); step defaults to 1000
// (within min_step..max_step when those are given), min_step to step,
// max_step to step×100 capped at 2^30; mode to buffered, fallback to none.
func (s *Server) handleAdminCreateNamespace(c echo.Context) error {
	var req createNamespaceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ns, perr := req.namespace()
	if perr != nil {
		return perr
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	created, err := s.store.CreateNamespace(ctx, ns)
	if err != nil {
		return storeError(err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/admin/namespaces/"+created.Name)
	return s.sendJSON(c, http.StatusCreated, s.toNamespaceJSON(created))
}

// namespace validates the request and fills in the defaults.
func (r *createNamespaceRequest) namespace() (allocator.Namespace, *apiError) {
	var problems []string
	if err := allocator.ValidNamespace(r.Name); err != nil {
		problems = append(problems, "name must match ^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	start := int64(1)
	if r.Start != nil {
		start = int64(*r.Start)
		if start < 1 {
			problems = append(problems, "start must be at least 1")
		}
	}
	step := int64(defaultStep)
	if r.Step != nil {
		step = *r.Step
	} else {
		if r.MinStep != nil && *r.MinStep > step {
			step = *r.MinStep
		}
		if r.MaxStep != nil && *r.MaxStep < step {
			step = *r.MaxStep
		}
	}
	minStep := step
	if r.MinStep != nil {
		minStep = *r.MinStep
	}
	maxStep := max(step, min(step*maxStepGrowth, maxStepLimit))
	if r.MaxStep != nil {
		maxStep = *r.MaxStep
	}
	problems = append(problems, checkSteps(step, minStep, maxStep)...)
	mode := allocator.ModeBuffered
	if r.Mode != nil {
		if m, ok := parseMode(*r.Mode); ok {
			mode = m
		} else {
			problems = append(problems, "mode must be buffered or strict")
		}
	}
	fallback := allocator.FallbackNone
	if r.Fallback != nil {
		if f, ok := parseFallback(*r.Fallback); ok {
			fallback = f
		} else {
			problems = append(problems, "fallback must be none or snowflake")
		}
	}
	var desc string
	if r.Description != nil {
		desc = *r.Description
		problems = append(problems, checkDescription(desc)...)
	}
	if len(problems) > 0 {
		return allocator.Namespace{}, invalidf("%s", strings.Join(problems, "; "))
	}
	return allocator.Namespace{
		Name:        r.Name,
		MaxID:       start - 1,
		Step:        step,
		MinStep:     minStep,
		MaxStep:     maxStep,
		Mode:        mode,
		Fallback:    fallback,
		Description: desc,
	}, nil
}

// updateNamespaceRequest is the body of PATCH /admin/namespaces/:name.
type updateNamespaceRequest struct {
	Step        *int64  `json:"step"`
	MinStep     *int64  `json:"min_step"`
	MaxStep     *int64  `json:"max_step"`
	Mode        *string `json:"mode"`
	Fallback    *string `json:"fallback"`
	Description *string `json:"description"`
}

// handleAdminUpdateNamespace serves PATCH /admin/namespaces/:name: it
// changes the settings the body names. A node that holds ranges of the
// namespace applies a new step or mode at its next fetch.
func (s *Server) handleAdminUpdateNamespace(c echo.Context) error {
	name, perr := namespaceParam(c)
	if perr != nil {
		return perr
	}
	var req updateNamespaceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	var u allocator.NamespaceUpdate
	var problems []string
	u.Step, u.MinStep, u.MaxStep = req.Step, req.MinStep, req.MaxStep
	if req.Mode != nil {
		m, ok := parseMode(*req.Mode)
		if !ok {
			problems = append(problems, "mode must be buffered or strict")
		}
		u.Mode = &m
	}
	if req.Fallback != nil {
		f, ok := parseFallback(*req.Fallback)
		if !ok {
			problems = append(problems, "fallback must be none or snowflake")
		}
		u.Fallback = &f
	}
	if req.Description != nil {
		problems = append(problems, checkDescription(*req.Description)...)
		u.Description = req.Description
	}
	if u == (allocator.NamespaceUpdate{}) {
		problems = append(problems, "nothing to change: give step, min_step, max_step, mode, fallback or description")
	}
	if len(problems) > 0 {
		return invalidf("%s", strings.Join(problems, "; "))
	}

	ctx, cancel := storeCtx(c)
	defer cancel()
	cur, err := s.store.GetNamespace(ctx, name)
	if err != nil {
		return storeError(err)
	}
	step, minStep, maxStep := cur.Step, cur.MinStep, cur.MaxStep
	if u.Step != nil {
		step = *u.Step
	}
	if u.MinStep != nil {
		minStep = *u.MinStep
	}
	if u.MaxStep != nil {
		maxStep = *u.MaxStep
	}
	if p := checkSteps(step, minStep, maxStep); len(p) > 0 {
		return invalidf("%s (after the change step=%d min_step=%d max_step=%d)", strings.Join(p, "; "), step, minStep, maxStep)
	}
	updated, err := s.store.UpdateNamespace(ctx, name, u)
	if err != nil {
		return storeError(err)
	}
	return s.sendJSON(c, http.StatusOK, s.toNamespaceJSON(updated))
}

// checkSteps lists what is wrong with a namespace's steps.
func checkSteps(step, minStep, maxStep int64) []string {
	var p []string
	if minStep < 1 || step < 1 || maxStep < 1 {
		p = append(p, "step, min_step and max_step must be at least 1")
	}
	if maxStep > maxStepLimit || step > maxStepLimit || minStep > maxStepLimit {
		p = append(p, fmt.Sprintf("step, min_step and max_step must be at most %d", maxStepLimit))
	}
	if !(minStep <= step && step <= maxStep) {
		p = append(p, "min_step <= step <= max_step must hold")
	}
	return p
}

func checkDescription(d string) []string {
	if len(d) > maxDescriptionLen {
		return []string{fmt.Sprintf("description must be at most %d bytes", maxDescriptionLen)}
	}
	if !utf8.ValidString(d) {
		return []string{"description must be valid UTF-8"}
	}
	return nil
}

func parseMode(s string) (allocator.Mode, bool) {
	switch m := allocator.Mode(s); m {
	case allocator.ModeBuffered, allocator.ModeStrict:
		return m, true
	}
	return "", false
}

func parseFallback(s string) (allocator.Fallback, bool) {
	switch f := allocator.Fallback(s); f {
	case allocator.FallbackNone, allocator.FallbackSnowflake:
		return f, true
	}
	return "", false
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
