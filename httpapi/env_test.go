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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/teststore"
)

const testToken = "s3cret-admin-token-for-tests"

// envOptions configure newEnv.
type envOptions struct {
	store     stores.Store                                        // nil: a fresh store of the dialect
	dialect   string                                              // "" means sqlite
	token     string                                              // admin token; "" disables the admin API
	noStart   bool                                                // leave the keeper unstarted (no lease)
	noWait    bool                                                // start the keeper but do not wait for its lease
	segStore  func(allocator.SegmentStore) allocator.SegmentStore // wraps the segment store
	maxCount  int
	workers   *allocator.WorkerRange
	holder    string
	logBuffer *syncBuffer
	keeperTTL time.Duration
}

// env is one idgen node: a store, a lease keeper, a segment allocator and
// the HTTP server on top, all stopped when the test ends.
type env struct {
	tb       testing.TB
	store    stores.Store
	keeper   *allocator.Keeper
	segments *allocator.Segments
	srv      *httpapi.Server
	h        http.Handler
}

func newEnv(tb testing.TB, o envOptions) *env {
	tb.Helper()
	if o.dialect == "" {
		o.dialect = "sqlite"
	}
	store := o.store
	if store == nil {
		store = teststore.Open(tb, o.dialect)
	}
	logger := slog.New(slog.DiscardHandler)
	if o.logBuffer != nil {
		logger = slog.New(slog.NewTextHandler(o.logBuffer, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.holder == "" {
		o.holder = "httpapi-test/" + strings.ReplaceAll(tb.Name(), "/", "-")
	}
	keeper, err := allocator.NewKeeper(store, allocator.KeeperSettings{
		Holder:    o.holder,
		WorkerIDs: o.workers,
		TTL:       o.keeperTTL,
		Logger:    logger,
	})
	if err != nil {
		tb.Fatalf("NewKeeper: %v", err)
	}
	var segStore allocator.SegmentStore = store
	if o.segStore != nil {
		segStore = o.segStore(store)
	}
	segments := allocator.NewSegments(segStore, allocator.SegmentSettings{
		Fallback:     keeper,
		FetchTimeout: 2 * time.Second,
		RetryMin:     10 * time.Millisecond,
		RetryMax:     100 * time.Millisecond,
		Logger:       logger,
	})
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := segments.Close(ctx); err != nil {
			tb.Errorf("Segments.Close: %v", err)
		}
		if err := keeper.Close(ctx); err != nil {
			tb.Errorf("Keeper.Close: %v", err)
		}
	})
	srv, err := httpapi.New(httpapi.Config{
		Keeper:     keeper,
		Segments:   segments,
		Store:      store,
		MaxCount:   o.maxCount,
		AdminToken: o.token,
		Logger:     logger,
		Version:    "test-version",
	})
	if err != nil {
		tb.Fatalf("httpapi.New: %v", err)
	}
	e := &env{tb: tb, store: store, keeper: keeper, segments: segments, srv: srv, h: srv.Handler()}
	if !o.noStart {
		if err := keeper.Start(context.Background()); err != nil {
			tb.Fatalf("Keeper.Start: %v", err)
		}
		if !o.noWait {
			e.waitReady()
		}
	}
	return e
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

// decode decodes rec's JSON body into v, failing the test otherwise.
func decode(tb testing.TB, rec *httptest.ResponseRecorder, v any) {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		tb.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
}

// wantStatus checks rec's status and content type: application/json for
// 2xx, application/problem+json otherwise (with a problem body whose
// status and code agree).
func wantStatus(tb testing.TB, rec *httptest.ResponseRecorder, want int) {
	tb.Helper()
	if rec.Code != want {
		tb.Fatalf("status: got %d, want %d; body %s", rec.Code, want, rec.Body.String())
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

// problem is an application/problem+json body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// problemCode is the code the API documents for each problem status.
func problemCode(status int) string {
	switch status {
	case 400:
		return "invalid"
	case 401:
		return "unauthorized"
	case 403:
		return "forbidden"
	case 404:
		return "not_found"
	case 405:
		return "method_not_allowed"
	case 409:
		return "conflict"
	case 413:
		return "too_large"
	case 429:
		return "too_many"
	case 503:
		return "unavailable"
	}
	return "internal"
}

func checkProblem(tb testing.TB, status int, contentType string, body []byte) problem {
	tb.Helper()
	if contentType != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json (status %d, body %s)", contentType, status, body)
	}
	var p problem
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		tb.Fatalf("problem body %q: %v", body, err)
	}
	if code := problemCode(status); p.Status != status || p.Code != code || p.Type != "https://idgen.dev/problems/"+code || p.Title == "" {
		tb.Fatalf("problem body: got %+v, want status %d, code %q, type https://idgen.dev/problems/%s, a title",
			p, status, code, code)
	}
	return p
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (the logger).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failingSegments is a SegmentStore whose range fetches fail as if the
// database were unreachable; everything else goes to the real store.
type failingSegments struct {
	allocator.SegmentStore
}

var errInjected = errors.New("injected: database unreachable")

func (f failingSegments) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	return allocator.Segment{}, errInjected
}
