// Package testserver starts a whole idgen node for a test: the app.App that
// `idgen serve` runs, on a fresh migrated database of its own (SQLite unless
// the test asks for another), serving HTTP on a loopback port the system
// picks, and closed when the test ends (requests finished, tails returned,
// lease released). Tests reach it over HTTP at URL, or in-process through
// Handler and the App's accessors. OpenStore gives a test a migrated Store
// of its own on any dialect, for tests that need a store but not a node.
package testserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/snowflake"
)

// Bounds on waiting for a node; generous, because a loaded machine may be
// slow. They bound waits only: no test passes or fails on how long
// anything took.
const (
	readyTimeout = 30 * time.Second
	closeTimeout = 30 * time.Second
)

// Options configure a server. The zero value is a node on a fresh SQLite
// database with the defaults of idgen serve, ready when MustStart returns.
type Options struct {
	// Dialect is the database: "sqlite" (the default), "postgres" or
	// "mysql", a fresh one from OpenStore.
	Dialect string
	// Store, when not nil, is used instead of a fresh database: to share
	// one between two nodes, or to wrap one with injected faults. It must
	// be migrated; the test closes it.
	Store stores.Store
	// AdminToken enables the admin API.
	AdminToken string
	// Tokens is the content of a tokens file (idgen.ParseTokens), as
	// IDGEN_TOKENS gives it; TokensFile names a tokens file, which the
	// node reloads when it changes, every TokensReloadInterval. Set at
	// most one of them; neither leaves the node without tokens.
	Tokens               string
	TokensFile           string
	TokensReloadInterval time.Duration
	// LeaseEventsRetention and LeaseEventsPruneInterval are those of
	// app.Config; zero means the defaults.
	LeaseEventsRetention     time.Duration
	LeaseEventsPruneInterval time.Duration
	// MaxCount is the largest count of a request; 0 means the default.
	MaxCount int
	// Formats are app.Config's: the forms IDs take by default.
	Formats map[string]snowflake.Format
	// Keeper configures the lease keeper; Holder defaults to
	// "testserver/<test name>".
	Keeper allocator.KeeperSettings
	// Segments configures the segment allocator.
	Segments allocator.SegmentSettings
	// Clock is the clock IDs carry; nil means the system's.
	Clock snowflake.Clock
	// Logger receives the node's log; nil discards it.
	Logger *slog.Logger
	// NoWait returns without waiting for the lease: for a node whose pool
	// another holder holds (see HoldWorker).
	NoWait bool
	// RateLimit and Tracing are those of app.Config; the zero values are
	// no limit and no tracing (whatever OTEL_TRACES_EXPORTER says: a test
	// node never exports unless Tracing asks for it).
	RateLimit idgen.RateLimit
	Tracing   app.TracingConfig
	// Audit is app.Config's: the audit trail, off when zero.
	Audit app.AuditConfig
	// LeaseAPI is app.Config's: the lease API's pool, caps and bounds;
	// the zero value is idgen serve's defaults.
	LeaseAPI idgen.LeaseSettings
	// PublicStatusDetails is that of app.Config: nil shows the details of
	// /readyz and the status page to all on a node without tokens only.
	PublicStatusDetails *bool
}

// Server is a running node. Its App is closed when the test ends.
type Server struct {
	*app.App
	// URL is http://host:port of the node.
	URL string
}

// MustStart starts a node for tb, waits until it holds its lease (unless
// o.NoWait), and closes it when tb ends, failing tb if Close or Serve
// reports an error. It fails tb at once if the node does not start.
func MustStart(tb testing.TB, o Options) *Server {
	tb.Helper()
	store := o.Store
	if store == nil {
		d := o.Dialect
		if d == "" {
			d = "sqlite"
		}
		store = OpenStore(tb, d)
	}
	ks := o.Keeper
	if ks.Holder == "" {
		ks.Holder = "testserver/" + strings.ReplaceAll(tb.Name(), "/", "-")
		ks.Holder = ks.Holder[:min(len(ks.Holder), allocator.MaxHolderLen)]
	}
	a, err := app.Open(context.Background(), app.Config{
		Store:      store,
		Keeper:     ks,
		Segments:   o.Segments,
		Listen:     "127.0.0.1:0",
		MaxCount:   o.MaxCount,
		Formats:    o.Formats,
		AdminToken: o.AdminToken,
		Tokens:     o.Tokens,
		TokensFile: o.TokensFile,
		Version:    "test-version",
		Clock:      o.Clock,
		Logger:     o.Logger,
		RateLimit:  o.RateLimit,
		LeaseAPI:   o.LeaseAPI,
		Tracing:    tracingOf(o),
		Audit:      o.Audit,

		TokensReloadInterval:     o.TokensReloadInterval,
		LeaseEventsRetention:     o.LeaseEventsRetention,
		LeaseEventsPruneInterval: o.LeaseEventsPruneInterval,
		PublicStatusDetails:      o.PublicStatusDetails,
	})
	if err != nil {
		tb.Fatalf("testserver: open: %v", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := a.Close(ctx); err != nil {
			tb.Errorf("testserver: close: %v", err)
		}
		// ErrClosed: the test ended before Serve got going.
		if err := <-serveErr; err != nil && !errors.Is(err, app.ErrClosed) {
			tb.Errorf("testserver: serve: %v", err)
		}
	})
	s := &Server{App: a, URL: "http://" + a.Addr().String()}
	if !o.NoWait {
		s.WaitReady(tb)
	}
	return s
}

// tracingOf returns the node's tracing settings: o.Tracing, reading an
// empty environment unless the test gave a Getenv of its own.
func tracingOf(o Options) app.TracingConfig {
	t := o.Tracing
	if t.Getenv == nil {
		t.Getenv = func(string) string { return "" }
	}
	return t
}

// WaitReady waits, bounded, until the node can issue Snowflake IDs.
func (s *Server) WaitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := s.Keeper().Ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testserver: no lease after %s: %v", readyTimeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CreateNamespace creates the namespace spec describes, with the defaults
// and rules of allocator.NamespaceSpec, in the node's database.
func (s *Server) CreateNamespace(tb testing.TB, spec allocator.NamespaceSpec) allocator.Namespace {
	tb.Helper()
	ns, err := spec.Namespace(s.Keeper().SmallestIDNow())
	if err != nil {
		tb.Fatalf("testserver: namespace %q: %v", spec.Name, err)
	}
	created, err := s.Store().CreateNamespace(context.Background(), ns)
	if err != nil {
		tb.Fatalf("testserver: create namespace %q: %v", spec.Name, err)
	}
	return created
}

// HoldWorker claims worker ID worker of datacenter 0 in store for another
// holder, with a lease of an hour, so that a node whose pool is only that
// worker ID holds no lease: it answers 503 to Snowflake requests and on
// /readyz. The function returned releases the lease, its ceiling where the
// claim found it (0 on a worker ID nobody used), so that the node can claim
// it and start at once.
func HoldWorker(tb testing.TB, store allocator.LeaseStore, worker int64) (release func()) {
	tb.Helper()
	ctx := context.Background()
	const holder = "testserver/another-node"
	res, err := store.Claim(ctx, allocator.ClaimRequest{
		MinWorkerID: worker, MaxWorkerID: worker, Holder: holder, TTL: time.Hour,
	})
	if err != nil {
		tb.Fatalf("testserver: hold worker %d: %v", worker, err)
	}
	return func() {
		tb.Helper()
		// Nothing was issued: the ceiling goes back to where the claim found it.
		if _, err := store.Release(ctx, allocator.ReleaseRequest{
			Key: res.Lease.LeaseKey, Holder: holder, FencingVersion: res.Lease.FencingVersion,
		}); err != nil {
			tb.Fatalf("testserver: release worker %d: %v", worker, err)
		}
	}
}

// LeaseLister is what LeaseRow reads: a store's lease rows.
type LeaseLister interface {
	ListLeases(ctx context.Context) ([]allocator.Lease, error)
}

// LeaseRow returns the row of worker_leases of worker ID worker of
// datacenter dc in store, failing the test if there is none.
func LeaseRow(tb testing.TB, store LeaseLister, dc, worker int64) allocator.Lease {
	tb.Helper()
	rows, err := store.ListLeases(context.Background())
	if err != nil {
		tb.Fatalf("testserver: ListLeases: %v", err)
	}
	for _, r := range rows {
		if r.DatacenterID == dc && r.WorkerID == worker {
			return r
		}
	}
	tb.Fatalf("testserver: no lease row for worker %d/%d in %+v", dc, worker, rows)
	return allocator.Lease{}
}

// LogBuffer collects a node's log: a bytes.Buffer safe for the node's
// goroutines. Give slog.NewTextHandler(buf, …) a *LogBuffer.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
