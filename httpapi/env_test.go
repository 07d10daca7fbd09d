package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/httpapi/statuspage"
	"github.com/idgen-project/idgen/internal/metrics"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

const testToken = "s3cret-admin-token-for-tests"

// envOptions configure newEnv.
type envOptions struct {
	store     stores.Store // nil: a fresh store of the dialect
	dialect   string       // "" means sqlite
	token     string       // admin token; "" disables the admin API
	tokens    string       // tokens file content; "" for none
	noWait    bool         // do not wait for the lease
	maxCount  int
	workers   *allocator.WorkerRange
	holder    string
	logBuffer *testserver.LogBuffer
	keeperTTL time.Duration
	clock     snowflake.Clock  // the clock IDs carry; nil is the system's
	layout    snowflake.Layout // the zero Layout is the default one
	leaseAPI  idgen.LeaseSettings
	audit     app.AuditConfig // the audit trail; off when zero
}

// env is one idgen node (internal/testserver: a store, a lease keeper, a
// segment allocator and the HTTP server on top, as idgen serve runs them),
// stopped when the test ends. Requests go to its handler in-process.
type env struct {
	tb       testing.TB
	store    stores.Store
	keeper   *allocator.Keeper
	segments *allocator.Segments
	srv      *httpapi.Server
	svc      *idgen.Service
	auth     *idgen.Authorizer
	page     *statuspage.Page
	h        http.Handler
}

func newEnv(tb testing.TB, o envOptions) *env {
	tb.Helper()
	logger := slog.New(slog.DiscardHandler)
	if o.logBuffer != nil {
		logger = slog.New(slog.NewTextHandler(o.logBuffer, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.holder == "" {
		o.holder = "httpapi-test/" + strings.ReplaceAll(tb.Name(), "/", "-")
	}
	s := testserver.MustStart(tb, testserver.Options{
		Dialect:    o.dialect,
		Store:      o.store,
		AdminToken: o.token,
		Tokens:     o.tokens,
		MaxCount:   o.maxCount,
		Keeper:     allocator.KeeperSettings{Holder: o.holder, WorkerIDs: o.workers, TTL: o.keeperTTL, Layout: o.layout},
		Segments: allocator.SegmentSettings{
			FetchTimeout: 2 * time.Second,
			RetryMin:     10 * time.Millisecond,
			RetryMax:     100 * time.Millisecond,
		},
		Clock:    o.clock,
		Logger:   logger,
		NoWait:   o.noWait,
		LeaseAPI: o.leaseAPI,
		Audit:    o.audit,
	})
	return &env{tb: tb, store: s.Store(), keeper: s.Keeper(), segments: s.Segments(), srv: s.API(), svc: s.Service(), auth: s.Authorizer(),
		page: s.Status(), h: s.Handler()}
}

// config returns a Config of the env's service, authorizer, keeper,
// segments and store, and its node's status page.
func (e *env) config() httpapi.Config {
	return httpapi.Config{Service: e.svc, Auth: e.auth, Lease: e.keeper, Segments: e.segments, Admin: e.store, Database: e.store,
		Status: e.page.Serve}
}

// service returns a second service on e's keeper and segments, with s.
func (e *env) service(s idgen.Settings) *idgen.Service {
	e.tb.Helper()
	svc, err := idgen.NewService(e.keeper, e.segments, s)
	if err != nil {
		e.tb.Fatalf("idgen.NewService: %v", err)
	}
	return svc
}

// handler builds a second server on e's keeper, segments and store, with
// cfg (e.config() as the test changed it), and returns its handler.
func (e *env) handler(cfg httpapi.Config) http.Handler {
	e.tb.Helper()
	// /metrics as the app builds it, of cfg's service.
	reg := prometheus.NewRegistry()
	cfg.Metrics = metrics.Handler(reg)
	srv, err := httpapi.New(cfg)
	if err != nil {
		e.tb.Fatalf("httpapi.New: %v", err)
	}
	for _, c := range append(srv.Collectors(), metrics.Collectors(metrics.Config{Service: cfg.Service, Lease: e.keeper,
		Segments: e.segments, Leases: e.store, Database: e.store})...) {
		if err := reg.Register(c); err != nil {
			e.tb.Fatal(err)
		}
	}
	return srv.Handler()
}

// waitReady waits (bounded) until the keeper can issue IDs.
func (e *env) waitReady() {
	e.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := e.keeper.Ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.tb.Fatalf("keeper not ready after 20s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createNamespace creates a namespace directly in the store.
func (e *env) createNamespace(ns allocator.Namespace) allocator.Namespace {
	e.tb.Helper()
	if ns.Step == 0 {
		ns.Step = 100
	}
	if ns.MinStep == 0 {
		ns.MinStep = ns.Step
	}
	if ns.MaxStep == 0 {
		ns.MaxStep = ns.Step * 100
	}
	if ns.Mode == "" {
		ns.Mode = allocator.ModeBuffered
	}
	if ns.Fallback == "" {
		ns.Fallback = allocator.FallbackNone
	}
	if ns.Fallback == allocator.FallbackSnowflake && ns.MaxIDLimit == 0 {
		ns.MaxIDLimit = allocator.FallbackLimit(e.keeper.SmallestIDNow())
	}
	got, err := e.store.CreateNamespace(context.Background(), ns)
	if err != nil {
		e.tb.Fatalf("CreateNamespace(%q): %v", ns.Name, err)
	}
	return got
}

// do sends a request through Handler; header is pairs of name, value.
func (e *env) do(method, target, body string, header ...string) *httptest.ResponseRecorder {
	e.tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// admin sends an authorised admin request.
func (e *env) admin(method, target, body string) *httptest.ResponseRecorder {
	e.tb.Helper()
	h := []string{"Authorization", "Bearer " + testToken}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	return e.do(method, target, body, h...)
}

// getOK GETs target, which must answer 200, and returns its JSON body.
func getOK[T any](tb testing.TB, e *env, target string) T {
	tb.Helper()
	rec := e.do("GET", target, "")
	wantStatus(tb, rec, 200)
	var v T
	decode(tb, rec, &v)
	return v
}

// adminList GETs a listing of the admin API, {"<member>": [...]}, and
// returns its rows; anything but 200 with that one member fails the test.
func adminList[T any](tb testing.TB, e *env, target, member string) []T {
	tb.Helper()
	rec := e.admin("GET", target, "")
	wantStatus(tb, rec, 200)
	var list map[string][]T
	decode(tb, rec, &list)
	rows, ok := list[member]
	if !ok || len(list) != 1 {
		tb.Fatalf("GET %s: got %s, want the one member %q", target, rec.Body.String(), member)
	}
	return rows
}

// decode decodes rec's JSON body into v, failing the test otherwise.
func decode(tb testing.TB, rec *httptest.ResponseRecorder, v any) {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		tb.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
}

// wantStatus checks rec's status, its request ID and its content type:
// application/json for 2xx, application/problem+json otherwise (with a
// problem body whose status and code agree).
func wantStatus(tb testing.TB, rec *httptest.ResponseRecorder, want int) {
	tb.Helper()
	if rec.Code != want {
		tb.Fatalf("status: got %d, want %d; body %s", rec.Code, want, rec.Body.String())
	}
	// Every answer, problems too, carries a request ID.
	if id := rec.Header().Get("X-Request-ID"); !idgen.ValidRequestID(id) {
		tb.Fatalf("X-Request-ID: got %q, want a request ID", id)
	}
	ct := rec.Header().Get("Content-Type")
	if want < 300 {
		if ct != "application/json" {
			tb.Fatalf("Content-Type: got %q, want application/json", ct)
		}
		return
	}
	checkProblem(tb, rec.Code, ct, rec.Body.Bytes())
}

// documentedCodes are the codes the API documents for each problem status
// but 500.
var documentedCodes = map[int][]string{
	400: {"invalid"},
	401: {"unauthorized"},
	403: {"forbidden"},
	404: {"not_found"},
	405: {"method_not_allowed"},
	409: {"conflict", "namespace_exhausted", "no_worker_available", "lease_lost", "lease_not_held"},
	413: {"too_large"},
	422: {"invalid_release"},
	429: {"too_many"},
	503: {"unavailable"},
}

// problemCodes are the codes the API documents for a problem status:
// those of documentedCodes, else internal.
func problemCodes(status int) []string {
	if codes, ok := documentedCodes[status]; ok {
		return codes
	}
	return []string{"internal"}
}

// checkProblem checks a problem answer: its media type, and a body whose
// status is the answer's and whose code and type are one the API documents
// for that status.
func checkProblem(tb testing.TB, status int, contentType string, body []byte) httpapi.Problem {
	tb.Helper()
	if contentType != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json (status %d, body %s)", contentType, status, body)
	}
	var p httpapi.Problem
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		tb.Fatalf("problem body %q: %v", body, err)
	}
	codes := problemCodes(status)
	if p.Status != status || !slices.Contains(codes, p.Code) || p.Type != "https://idgen.dev/problems/"+p.Code || p.Title == "" {
		tb.Fatalf("problem body: got %+v, want status %d, a code of %q, type https://idgen.dev/problems/<code>, a title",
			p, status, codes)
	}
	return p
}

// failingSegments is a store whose range fetches fail as if the database
// were unreachable; everything else goes to the real store.
type failingSegments struct {
	stores.Store
}

var errInjected = errors.New("injected: database unreachable")

func (f failingSegments) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	return allocator.Segment{}, errInjected
}
