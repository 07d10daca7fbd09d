// Package app is one idgen node as a value: `idgen serve` is flag parsing
// around it, and tests drive it directly.
//
// Open brings a node up in the order its parts depend on each other: it
// opens the database (and refuses one that can lose acknowledged commits,
// before writing anything to it), applies the schema migrations, starts the
// lease keeper, builds the segment allocator on it, builds the HTTP API
// (with the callers' tokens, when configured) and the gRPC API beside it
// (package rpcapi, on the same listener), binds the listener and
// starts its background loops: the history behind the status page's
// charts, one that reloads the tokens file when it changes, and one that
// prunes lease events past their retention. With tracing on (tracing.go)
// the parts after the database checks use the store through a tracing
// decorator, and the HTTP API traces requests. Serve serves the API until
// Close, which takes the node down in the reverse order: the gRPC API ends
// its open streams with UNAVAILABLE (they would otherwise run until their
// callers cancel), the HTTP server stops accepting and finishes the
// requests in flight, so that no request
// finds the allocators closed; the background loops stop; the segment
// allocator gives back the unused tails of its ranges; the keeper releases
// its lease, lowering the ceiling to the last timestamp used; the
// database closes, because the parts before write to it; and the spans
// still buffered are sent last.
//
//	a, err := app.Open(ctx, app.Config{DSN: "sqlite:idgen.db", Migrate: true})
//	if err != nil {
//		return err
//	}
//	go func() { serveErr <- a.Serve() }()
//	…
//	err = a.Close(ctx)
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/tracing"
	"github.com/idgen-project/idgen/rpcapi"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults for the zero fields of Config.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultOpenTimeout     = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
)

// Errors returned by Open and Serve.
var (
	// ErrUnsafeDurability is returned (wrapped, naming each setting, its
	// value and the fix) by Open when the database can lose commits it
	// acknowledged and Config.AllowUnsafeDurability is not set.
	ErrUnsafeDurability = errors.New("the database can lose acknowledged commits, and the same IDs could be handed out twice")

	// ErrClosed is returned by Serve after Close.
	ErrClosed = errors.New("idgen node closed")

	// ErrNoTokensFile is returned by ReloadTokens on a node whose tokens
	// do not come from a file.
	ErrNoTokensFile = errors.New("the node has no tokens file to reload")
)

// Config configures a node. The zero value of a field means its default;
// Validate says which values are refused. Flags of idgen serve that set a
// field are named in brackets.
type Config struct {
	// DSN names the database: postgres://, mysql://, sqlite: or etcd:// [--dsn]. It
	// is ignored when Store is set.
	DSN string
	// Store, when not nil, is used instead of opening DSN. Close leaves it
	// open: it belongs to the caller.
	Store stores.Store
	// Migrate applies the pending schema migrations at Open [--migrate].
	Migrate bool
	// AllowUnsafeDurability serves on a database that can lose commits it
	// acknowledged, logging each risk, instead of refusing to start
	// [--allow-unsafe-durability].
	AllowUnsafeDurability bool

	// Keeper configures the lease keeper: layout, datacenter, worker IDs,
	// holder, lease ttl and heartbeat. Its Clock and Logger are ignored:
	// Open sets them from Clock and Logger.
	Keeper allocator.KeeperSettings
	// Segments configures the segment allocator: the prefetch threshold
	// and the dynamic-step windows among others. Its Logger and Fallback
	// are ignored: Open sets them from Logger and the keeper.
	Segments allocator.SegmentSettings
	// LeaseAPI configures the lease API (leaseapi.go).
	LeaseAPI LeaseAPIConfig

	// Listen is the TCP address to serve on, host:port; port 0 picks a free
	// one (see Addr). Default DefaultListen [--listen].
	Listen string
	// MaxCount is the largest count one request may ask for: 1 to
	// allocator.MaxDrawCount, default httpapi.DefaultMaxCount [--max-count].
	MaxCount int
	// AdminToken enables the admin API under /admin/ for requests bearing
	// it; empty leaves the API off unless a token has the admin scope
	// [--admin-token].
	AdminToken string
	// TokensFile names the callers' tokens file (httpapi.ParseTokens):
	// with it, every route family needs its scope, and the lease API is on
	// once a token has the leases scope. The node reloads the file when it
	// changes (see ReloadTokens) [--tokens-file].
	TokensFile string
	// Tokens is the content of a tokens file, for a node whose tokens come
	// from the environment (IDGEN_TOKENS) rather than a file; they are
	// never reloaded. At most one of TokensFile and Tokens may be set.
	Tokens string
	// TokensReloadInterval is how often the node looks at TokensFile for
	// a change. Default DefaultTokensReloadInterval.
	TokensReloadInterval time.Duration

	// LeaseEventsRetention is how long lease events are kept: a
	// background loop deletes older ones. Default
	// DefaultLeaseEventsRetention (30 days); KeepLeaseEvents (or any
	// negative value) keeps them forever [--lease-events-retention, where
	// 0 keeps them forever].
	LeaseEventsRetention time.Duration
	// LeaseEventsPruneInterval is how often the loop prunes; the first
	// prune comes after the interval or 30s, whichever is shorter. Default
	// DefaultLeaseEventsPruneInterval (an hour).
	LeaseEventsPruneInterval time.Duration
	// Version is shown on the status page and in the metrics.
	Version string

	// RateLimit limits each caller's request rate on /ids and the admin
	// API (httpapi.RateLimit): per token name with tokens, per client
	// address without. The zero value sets no limit [--rate-limit,
	// --rate-burst].
	RateLimit httpapi.RateLimit
	// Tracing configures OpenTelemetry tracing (tracing.go); off unless
	// enabled here or by OTEL_TRACES_EXPORTER=otlp.
	Tracing TracingConfig

	// OpenTimeout bounds connecting to the database, checking and
	// migrating it; and, again, starting the keeper (checking the layout
	// the database records). Default DefaultOpenTimeout.
	OpenTimeout time.Duration
	// ShutdownTimeout bounds each step of Close. Default
	// DefaultShutdownTimeout [--shutdown-timeout].
	ShutdownTimeout time.Duration

	// Clock is the wall clock the Snowflake IDs carry; nil means
	// snowflake.SystemClock(). Tests step it to play clock jumps.
	Clock snowflake.Clock
	// Logger receives the node's log; nil discards it.
	Logger *slog.Logger
}

// Validate reports a configuration Open would refuse, with a message that
// names the setting (and the flag of idgen serve that sets it): a DSN of
// no known database, a listen address that is not host:port, keeper
// settings that break a rule of allocator.KeeperSettings, a MaxCount out of
// range, a negative timeout or interval, tokens given twice, or a tokens
// file that cannot be read or parsed ("path:line: message").
func (c Config) Validate() error {
	c, err := c.resolve()
	if err != nil {
		return err
	}
	_, _, err = loadTokens(c)
	return err
}

// resolve returns c with its defaults filled in and the keeper settings
// resolved, or the error Validate reports.
func (c Config) resolve() (Config, error) {
	if c.Store == nil && stores.Dialect(c.DSN) == "" {
		// The DSN is not shown: it may hold a password.
		return Config{}, fmt.Errorf("invalid DSN (--dsn): %w; the DSN is not shown, as it may hold a password", stores.ErrUnknownScheme)
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return Config{}, fmt.Errorf("invalid listen address %q (--listen): want host:port, e.g. 127.0.0.1:8080", c.Listen)
	}
	ks, err := c.Keeper.Resolve()
	if err != nil {
		return Config{}, err
	}
	c.Keeper = ks
	if c.Segments, err = c.Segments.Resolve(); err != nil {
		return Config{}, err
	}
	if c.LeaseAPI, err = c.LeaseAPI.resolve(); err != nil {
		return Config{}, err
	}
	if c.MaxCount == 0 {
		c.MaxCount = httpapi.DefaultMaxCount
	}
	if c.MaxCount < 1 || c.MaxCount > allocator.MaxDrawCount {
		return Config{}, fmt.Errorf("invalid max count %d (--max-count): want 1 to %d", c.MaxCount, allocator.MaxDrawCount)
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.OpenTimeout < 0 {
		return Config{}, fmt.Errorf("invalid open timeout %s: want more than 0", c.OpenTimeout)
	}
	if c.ShutdownTimeout < 0 {
		return Config{}, fmt.Errorf("invalid shutdown timeout %s (--shutdown-timeout): want more than 0", c.ShutdownTimeout)
	}
	if c.TokensFile != "" && c.Tokens != "" {
		return Config{}, errors.New("tokens given twice: use --tokens-file or IDGEN_TOKENS, not both")
	}
	if c.TokensReloadInterval == 0 {
		c.TokensReloadInterval = DefaultTokensReloadInterval
	}
	if c.TokensReloadInterval < 0 {
		return Config{}, fmt.Errorf("invalid tokens reload interval %s: want more than 0", c.TokensReloadInterval)
	}
	if c.LeaseEventsRetention == 0 {
		c.LeaseEventsRetention = DefaultLeaseEventsRetention
	}
	if c.LeaseEventsRetention < 0 {
		c.LeaseEventsRetention = KeepLeaseEvents
	}
	if c.LeaseEventsPruneInterval == 0 {
		c.LeaseEventsPruneInterval = DefaultLeaseEventsPruneInterval
	}
	if c.LeaseEventsPruneInterval < 0 {
		return Config{}, fmt.Errorf("invalid lease events prune interval %s: want more than 0", c.LeaseEventsPruneInterval)
	}
	if err := c.RateLimit.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid rate limit (--rate-limit, --rate-burst): %w", err)
	}
	if err := c.Tracing.validate(); err != nil {
		return Config{}, err
	}
	if c.Clock == nil {
		c.Clock = snowflake.SystemClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Keeper.Clock, c.Keeper.Logger = c.Clock, c.Logger
	c.Segments.Logger = c.Logger
	return c, nil
}

// App is a running idgen node: built by Open, serving from Serve on,
// taken down by Close.
type App struct {
	cfg        Config // resolved
	log        *slog.Logger
	store      stores.Store
	ownStore   bool // opened by Open, closed by Close
	durability string
	keeper     *allocator.Keeper
	segments   *allocator.Segments
	api        *httpapi.Server
	rpc        *rpcapi.Server
	srv        *http.Server
	ln         net.Listener
	// tokens reloads the tokens file; nil without one.
	tokens *tokensReloader
	// pruner prunes the lease events; nil when they are kept forever.
	pruner *eventsPruner
	// tracer is the tracer provider Open built, shut down last by stop;
	// nil when tracing is off or its provider is the caller's.
	tracer *tracing.Provider

	// mu guards serving and closed; serveDone is closed when a Serve that
	// started returns.
	mu        sync.Mutex
	serving   bool
	closed    bool
	serveDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open brings a node up (see the package doc) and returns it, bound to its
// listener but not serving yet. On an error it undoes what it did: a lease
// it claimed is released and the store it opened is closed. Besides the
// Validate errors, it returns an error wrapping ErrUnsafeDurability for a
// database that can lose acknowledged commits, allocator.ErrLayoutMismatch
// when the database records another Snowflake layout, and the store's
// errors for a database it cannot open or migrate.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	a := &App{cfg: c, log: c.Logger, serveDone: make(chan struct{})}
	ks := c.Keeper
	a.log.Info("idgen starting", "version", c.Version, "dsn", dburl.Redact(c.DSN),
		"layout", ks.Layout.String(), "datacenter", ks.DatacenterID, "worker_ids", workerIDsText(ks),
		"lease_ttl", ks.TTL, "heartbeat", ks.Heartbeat)
	if w := ks.Layout.Warning(); w != "" {
		a.log.Warn("snowflake layout", "warning", w)
	}
	tokens, tokensState, err := loadTokens(c)
	if err != nil {
		return nil, err
	}
	// Whatever fails from here on, what was started is stopped again.
	defer func() {
		if err != nil {
			err = errors.Join(err, a.stop(context.WithoutCancel(ctx)))
		}
	}()

	openCtx, cancelOpen := context.WithTimeout(ctx, c.OpenTimeout)
	defer cancelOpen()
	if a.store = c.Store; a.store == nil {
		if a.store, err = stores.Open(openCtx, c.DSN); err != nil {
			return nil, fmt.Errorf("open database: %w", err) // the store names the (redacted) DSN
		}
		a.ownStore = true
	}
	if a.durability, err = checkDurability(openCtx, a.store, c.AllowUnsafeDurability, a.log); err != nil {
		return nil, err
	}
	if c.Migrate {
		n, err := migrateUp(openCtx, a.store)
		if err != nil {
			return nil, fmt.Errorf("migrate database %s: %w", dburl.Redact(c.DSN), err)
		}
		a.log.Info("database migrated", "applied", n)
	}

	cancelOpen()

	// From here on the parts use data: the store, traced when tracing is on.
	data, tracingCfg, err := a.openTracing(ctx, c)
	if err != nil {
		return nil, err
	}
	keeper, err := allocator.NewKeeper(data, ks)
	if err != nil {
		return nil, fmt.Errorf("lease keeper: %w", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, c.OpenTimeout)
	err = keeper.Start(startCtx)
	cancelStart()
	if err != nil {
		_ = keeper.Close(ctx)
		return nil, fmt.Errorf("start lease keeper: %w", err)
	}
	a.keeper = keeper

	ss := c.Segments
	ss.Fallback = keeper
	a.segments = allocator.NewSegments(data, ss)

	retries, _ := a.store.(allocator.RetryCounter)
	a.api, err = httpapi.New(httpapi.Config{
		Snowflakes: keeper,
		Lease:      keeper,
		Segments:   a.segments,
		Admin:      data,
		Database:   data,
		Retries:    retries,
		MaxCount:   c.MaxCount,
		AdminToken: c.AdminToken,
		Tokens:     tokens,
		Logger:     a.log,
		Version:    c.Version,
		Durability: a.durability,
		Status: httpapi.StatusSettings{Clock: c.Clock, LeaseTTL: ks.TTL, MaxClockOffset: ks.MaxClockOffset,
			Policy: policy(ks, c.Segments)},
		LeaseAPI:  c.LeaseAPI.httpapi(c, data),
		RateLimit: c.RateLimit,
		Tracing:   tracingCfg,
	})
	if err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	// The gRPC API: the same keeper, segments, tokens (through the HTTP
	// API, which the tokens file reloads into) and lease broker.
	a.rpc, err = rpcapi.New(rpcapi.Config{
		Snowflakes: keeper,
		Segments:   a.segments,
		Ready:      keeper,
		Auth:       a.api,
		Leases:     a.api.LeaseBroker(),
		MaxCount:   c.MaxCount,
		Logger:     a.log,
		Tracer:     tracingCfg.Tracer,
	})
	if err != nil {
		return nil, fmt.Errorf("grpc api: %w", err)
	}
	if err := a.api.RegisterMetrics(a.rpc.Collectors()...); err != nil {
		return nil, fmt.Errorf("grpc api: %w", err)
	}
	if tokens != nil {
		a.log.Info("callers' tokens loaded", "source", tokensSource(c), "tokens", tokens.Len(), "names", tokens.Names())
		warnTokens(a.log, tokens)
	}
	if c.TokensFile != "" {
		a.tokens = newTokensReloader(c.TokensFile, c.TokensReloadInterval, a.api, a.log, tokensState, tokens)
		if err := a.api.RegisterMetrics(a.tokens.collectors()...); err != nil {
			return nil, fmt.Errorf("http api: %w", err)
		}
	}
	if c.LeaseEventsRetention > 0 {
		a.pruner = newEventsPruner(data, c.LeaseEventsRetention, c.LeaseEventsPruneInterval, c.Clock, a.log)
		if err := a.api.RegisterMetrics(a.pruner.collectors()...); err != nil {
			return nil, fmt.Errorf("http api: %w", err)
		}
	} else {
		a.log.Info("lease events are kept forever (--lease-events-retention 0)")
	}
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(ctx, "tcp", c.Listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	a.srv = a.api.HTTPServer(c.Listen)
	// One listener for both APIs: HTTP/1.1 and, for gRPC, HTTP/2 without
	// TLS (h2c, with prior knowledge); gRPC-Web and Connect work on both.
	a.srv.Handler = a.rpc.Mount(a.api.Handler())
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	a.srv.Protocols = &protocols
	a.api.History().Start() // stopped by stop
	if a.tokens != nil {
		a.tokens.start()
	}
	if a.pruner != nil {
		a.pruner.start()
	}
	return a, nil
}

// tokensSource names where c's tokens come from, for the log.
func tokensSource(c Config) string {
	if c.TokensFile != "" {
		return c.TokensFile
	}
	return envTokensSource
}

// ReloadTokens reads the tokens file now, as the node does by itself when
// the file changes, and returns why the tokens in effect stayed, if they
// did: the file cannot be read, or does not parse ("path:line: message").
// idgen serve calls it on SIGHUP. It returns ErrNoTokensFile on a node
// without a tokens file.
func (a *App) ReloadTokens() error {
	if a.tokens == nil {
		return ErrNoTokensFile
	}
	return a.tokens.reload(true)
}

// Serve serves the HTTP API on the listener Open bound until Close, and
// then returns nil; if the listener fails first, it returns that error.
// It returns ErrClosed after Close, and an error when called twice.
func (a *App) Serve() error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		return ErrClosed
	case a.serving:
		a.mu.Unlock()
		return errors.New("idgen node already serving")
	}
	a.serving = true
	a.mu.Unlock()
	defer close(a.serveDone)

	a.log.Info("idgen serving", "addr", a.ln.Addr().String(), "admin", a.cfg.AdminToken != "")
	err := a.srv.Serve(a.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// Close takes the node down (see the package doc): each step is bounded
// by ctx and by Config.ShutdownTimeout. A step that fails does not stop
// the ones after it; the errors are joined. Close returns once Serve has
// returned. Calling it again returns the first call's result.
func (a *App) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		serving := a.serving
		a.mu.Unlock()

		a.log.Info("shutting down: finishing requests in flight")
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		// Streams of IDs run until their caller cancels: end them (with
		// UNAVAILABLE, so that callers go to another node) rather than
		// wait for them, then let the server finish the rest.
		a.rpc.Drain()
		err := a.srv.Shutdown(sctx)
		if werr := a.rpc.Wait(sctx); werr != nil && err == nil {
			err = werr
		}
		cancel()
		if err != nil {
			err = fmt.Errorf("shutdown: requests still in flight after %s: %w", a.cfg.ShutdownTimeout, err)
			_ = a.srv.Close()
		}
		if serving {
			<-a.serveDone
		} else {
			_ = a.ln.Close() // Shutdown closes only the listeners Serve was given
		}
		a.log.Info("http server stopped")

		a.closeErr = errors.Join(err, a.stop(ctx))
		if a.closeErr == nil {
			a.log.Info("idgen stopped")
		}
	})
	return a.closeErr
}

// stop stops what Open started after the HTTP server, in reverse order: the
// background loops (tokens reload, events pruner, the status page's
// history sampler), the segment allocator (tails returned), the keeper
// (lease released), the store (when Open opened it). Parts not started are
// skipped.
func (a *App) stop(ctx context.Context) (err error) {
	// The background loops first: they use the API and the store.
	if a.tokens != nil {
		a.tokens.stop()
	}
	if a.pruner != nil {
		a.pruner.stop()
	}
	type step struct {
		part interface{ Close(context.Context) error }
		what string // what failed, for the error
		done string // the log line once stopped
	}
	var steps []step
	if a.api != nil {
		steps = append(steps, step{a.api.History(), "stop history sampler", "history sampler stopped"})
	}
	if a.segments != nil {
		steps = append(steps, step{a.segments, "return segment tails", "segment allocator stopped"})
	}
	if a.keeper != nil {
		steps = append(steps, step{a.keeper, "release lease", "lease keeper stopped"})
	}
	for _, st := range steps {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		if cerr := st.part.Close(sctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%s: %w", st.what, cerr))
		} else {
			a.log.Info(st.done)
		}
		cancel()
	}
	if a.ownStore && a.store != nil {
		if cerr := a.store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
		}
	}
	// Last: the steps above end spans too, which this sends. A collector
	// that is gone costs the spans, not a clean shutdown.
	if a.tracer != nil {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		if cerr := a.tracer.Shutdown(sctx); cerr != nil {
			a.log.Warn("traces not all sent at shutdown", "err", cerr)
		}
		cancel()
	}
	return err
}

// Addr returns the address the node listens on: with port 0 in
// Config.Listen, the port the system picked.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Handler returns the handler of the HTTP API with the gRPC API mounted
// on it, for a program that serves it with its own server (or behind
// middleware of its own) instead of Serve; gRPC needs HTTP/2.
func (a *App) Handler() http.Handler { return a.srv.Handler }

// RPC returns the gRPC API.
func (a *App) RPC() *rpcapi.Server { return a.rpc }

// API returns the HTTP API.
func (a *App) API() *httpapi.Server { return a.api }

// Keeper returns the node's lease keeper.
func (a *App) Keeper() *allocator.Keeper { return a.keeper }

// Segments returns the node's segment allocator.
func (a *App) Segments() *allocator.Segments { return a.segments }

// Store returns the node's store.
func (a *App) Store() stores.Store { return a.store }

// Durability returns what the durability check at Open found, as /readyz
// shows it: "ok", "ok (warning: …)", "unsafe: … (overridden)" or
// "unchecked…".
func (a *App) Durability() string { return a.durability }

// migrateUp applies the pending migrations of store and returns how many.
func migrateUp(ctx context.Context, store stores.Store) (int, error) {
	p, err := store.Migrations()
	if err != nil {
		return 0, err
	}
	defer p.Close()
	res, err := p.Up(ctx)
	return len(res), err
}

// workerIDsText describes the worker ID pool for the start-up log line.
func workerIDsText(s allocator.KeeperSettings) string {
	if s.WorkerIDs == nil {
		return fmt.Sprintf("0-%d", s.Layout.MaxWorker())
	}
	return fmt.Sprintf("%d-%d", s.WorkerIDs.Min, s.WorkerIDs.Max)
}
