// Package app is one idgen node as a value: `idgen serve` wraps it, tests
// drive it directly. Open wires the parts in dependency order, Drain turns
// the node not ready while it keeps serving, Close takes the parts down in
// reverse order (lease released last, before the database).
//
//	a, err := app.Open(ctx, app.Config{DSN: "sqlite:idgen.db", Migrate: true})
//	if err != nil {
//		return err
//	}
//	go func() { serveErr <- a.Serve() }()
//	…
//	_ = a.Drain(ctx) // at SIGTERM: not ready, serving for Config.DrainWindow
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/httpapi/statuspage"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/metrics"
	"github.com/idgen-project/idgen/internal/nodestate"
	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/internal/probe"
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
	// ErrUnsafeDurability is returned (wrapped) by Open when the database
	// can lose acknowledged commits and AllowUnsafeDurability is not set.
	ErrUnsafeDurability = errors.New("the database can lose acknowledged commits, and the same IDs could be handed out twice")

	// ErrClosed is returned by Serve after Close.
	ErrClosed = errors.New("idgen node closed")

	// ErrNoTokensFile is returned by ReloadTokens without a tokens file.
	ErrNoTokensFile = errors.New("the node has no tokens file to reload")
)

// Config configures a node; a zero field means its default.
type Config struct {
	// DSN names the database (postgres://, mysql://, sqlite:, etcd://).
	DSN string
	// Store, when set, is used instead of DSN; Close leaves it open.
	Store stores.Store
	// Migrate applies the pending schema migrations at Open.
	Migrate bool
	// AllowUnsafeDurability serves on a database that can lose
	// acknowledged commits, with a warning, instead of refusing.
	AllowUnsafeDurability bool
	// StateFile names the node's state file (internal/nodestate); at start
	// the node refuses a store behind it (allocator.ErrStoreBehind).
	// Ignored, with a warning, on a store without a restore fence.
	StateFile string

	// Keeper configures the lease keeper; Open sets its Clock and Logger.
	Keeper allocator.KeeperSettings
	// Segments configures the segment allocator; Open sets Logger, Fallback.
	Segments allocator.SegmentSettings
	// LeaseAPI configures the lease API (idgen.LeaseSettings).
	LeaseAPI idgen.LeaseSettings

	// Listen is the host:port to serve on (port 0: any); default DefaultListen.
	Listen string
	// MaxCount is the largest count per request, 1 to idgen.MaxCountLimit;
	// default idgen.DefaultMaxCount.
	MaxCount int
	// Formats are the default ID forms (idgen.Settings.Formats).
	Formats map[string]snowflake.Format
	// AdminToken enables the admin API under /admin/ for requests bearing it.
	AdminToken string
	// TokensFile names the callers' tokens file (idgen.ParseTokens), reloaded
	// when it changes (see ReloadTokens).
	TokensFile string
	// Tokens is a tokens file's content (from IDGEN_TOKENS), never
	// reloaded. At most one of TokensFile and Tokens may be set.
	Tokens string
	// TokensReloadInterval is how often TokensFile is checked; default
	// DefaultTokensReloadInterval.
	TokensReloadInterval time.Duration
	// PublicStatusDetails says whether /readyz and the status page show
	// details to every caller; nil means StatusDetailsPublic's default.
	PublicStatusDetails *bool

	// LeaseEventsRetention is how long lease events are kept. Default
	// DefaultLeaseEventsRetention; KeepLeaseEvents (or negative) forever.
	LeaseEventsRetention time.Duration
	// LeaseEventsPruneInterval is how often they are pruned (first after
	// at most 30s). Default DefaultLeaseEventsPruneInterval.
	LeaseEventsPruneInterval time.Duration
	// Version is shown on the status page and in the metrics.
	Version string
	// Audit configures the audit trail; off by default.
	Audit AuditConfig

	// EtcdCompactRetention is how much etcd history the node keeps. Zero
	// compacts with DefaultEtcdCompactRetention only if idgen owns the
	// cluster; NoEtcdCompaction (or negative) never compacts.
	EtcdCompactRetention time.Duration
	// SequenceExpiryInterval is how often expired sequence reservations
	// are marked expired. Default DefaultSequenceExpiryInterval.
	SequenceExpiryInterval time.Duration
	// SpaceInterval is how often the database's space and alarms are
	// sampled (etcd only). Default DefaultSpaceInterval.
	SpaceInterval time.Duration

	// RateLimit limits the IDs each caller takes over every transport
	// (idgen.RateLimit); zero sets no limit.
	RateLimit idgen.RateLimit
	// Tracing configures OpenTelemetry tracing; off unless enabled here or
	// by OTEL_TRACES_EXPORTER=otlp.
	Tracing TracingConfig

	// OpenTimeout bounds opening, checking and migrating the database, and
	// starting the keeper. Default DefaultOpenTimeout.
	OpenTimeout time.Duration
	// ShutdownTimeout bounds each step of Close. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// DrainWindow is how long Drain keeps serving after turning not ready.
	// Default DefaultDrainWindow; NoDrainWindow (or negative) none.
	DrainWindow time.Duration

	// Clock is the wall clock for Snowflake IDs; nil means the system clock.
	Clock snowflake.Clock
	// Logger receives the node's log; nil discards it.
	Logger *slog.Logger
}

// Validate reports a configuration Open would refuse, naming the field
// ("invalid Config.MaxCount 0: …"); the DSN itself is never shown.
func (c Config) Validate() error {
	c, err := c.resolve()
	if err != nil {
		return err
	}
	_, _, err = loadTokens(c)
	return err
}

// resolve returns c with defaults filled in, or the error Validate reports.
func (c Config) resolve() (Config, error) {
	if c.Store == nil && stores.Dialect(c.DSN) == "" {
		return Config{}, fmt.Errorf("invalid Config.DSN: %w; the DSN is not shown, as it may hold a password", stores.ErrUnknownScheme)
	}
	if c.Store == nil {
		if err := dburl.Check(c.DSN); err != nil {
			return Config{}, fmt.Errorf("invalid Config.DSN (not shown): %w", err)
		}
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return Config{}, fmt.Errorf("invalid Config.Listen %q: want host:port, e.g. 127.0.0.1:8080", c.Listen)
	}
	ks, err := c.Keeper.Resolve()
	if err != nil {
		return Config{}, err
	}
	// Split the pools first: the keeper's settings depend on its pool.
	if c.LeaseAPI, ks, err = c.LeaseAPI.Resolve(ks); err != nil {
		return Config{}, err
	}
	if ks, err = ks.Resolve(); err != nil {
		return Config{}, err
	}
	c.Keeper = ks
	if err := c.Audit.validate(); err != nil {
		return Config{}, err
	}
	if c.Segments, err = c.Segments.Resolve(); err != nil {
		return Config{}, err
	}
	if c.MaxCount == 0 {
		c.MaxCount = idgen.DefaultMaxCount
	}
	if c.MaxCount < 1 || c.MaxCount > idgen.MaxCountLimit {
		return Config{}, fmt.Errorf("invalid Config.MaxCount %d: want 1 to %d; a larger request would not fit in a node's memory", c.MaxCount, idgen.MaxCountLimit)
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.OpenTimeout < 0 {
		return Config{}, fmt.Errorf("invalid Config.OpenTimeout %s: want more than 0", c.OpenTimeout)
	}
	if c.ShutdownTimeout < 0 {
		return Config{}, fmt.Errorf("invalid Config.ShutdownTimeout %s: want more than 0", c.ShutdownTimeout)
	}
	if c.DrainWindow == 0 {
		c.DrainWindow = DefaultDrainWindow
	}
	if c.DrainWindow < 0 {
		c.DrainWindow = NoDrainWindow
	}
	if c.TokensFile != "" && c.Tokens != "" {
		return Config{}, errors.New("invalid Config.TokensFile and Config.Tokens: tokens given twice, set one")
	}
	if c.TokensReloadInterval == 0 {
		c.TokensReloadInterval = DefaultTokensReloadInterval
	}
	if c.TokensReloadInterval < 0 {
		return Config{}, fmt.Errorf("invalid Config.TokensReloadInterval %s: want more than 0", c.TokensReloadInterval)
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
		return Config{}, fmt.Errorf("invalid Config.LeaseEventsPruneInterval %s: want more than 0", c.LeaseEventsPruneInterval)
	}
	if c.EtcdCompactRetention < 0 {
		c.EtcdCompactRetention = NoEtcdCompaction
	}
	if c.EtcdCompactRetention > 0 && c.EtcdCompactRetention < MinEtcdCompactRetention {
		return Config{}, fmt.Errorf("invalid Config.EtcdCompactRetention %s: want at least %s, or off", c.EtcdCompactRetention, MinEtcdCompactRetention)
	}
	if c.SequenceExpiryInterval == 0 {
		c.SequenceExpiryInterval = DefaultSequenceExpiryInterval
	}
	if c.SequenceExpiryInterval < 0 {
		return Config{}, fmt.Errorf("invalid Config.SequenceExpiryInterval %s: want more than 0", c.SequenceExpiryInterval)
	}
	if c.SpaceInterval == 0 {
		c.SpaceInterval = DefaultSpaceInterval
	}
	if c.SpaceInterval < 0 {
		return Config{}, fmt.Errorf("invalid Config.SpaceInterval %s: want more than 0", c.SpaceInterval)
	}
	if err := c.RateLimit.Validate(c.MaxCount); err != nil {
		return Config{}, err
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

// App is a running idgen node, built by Open and taken down by Close.
type App struct {
	cfg        Config // resolved
	log        *slog.Logger
	store      stores.Store
	ownStore   bool // opened by Open, closed by Close
	durability string
	keeper     *allocator.Keeper
	ready      *readiness // the keeper as the probes see it, off once draining
	segments   *allocator.Segments
	auth       *idgen.Authorizer
	svc        *idgen.Service
	api        *httpapi.Server
	status     *statuspage.Page
	metrics    *prometheus.Registry // what /metrics serves
	rpc        *rpcapi.Server
	srv        *http.Server
	ln         net.Listener
	tokens     *tokensReloader
	pruner     *eventsPruner
	// space and spaceLoop sample the database's space; nil for SQL stores.
	space     *probe.Space
	spaceLoop *periodic.Loop
	compactor *compactor
	sweeper   *sequenceSweeper
	// tracer is shut down last; nil when off or owned by the caller.
	tracer *tracing.Provider
	state  *nodestate.Store
	audit  *audit.Recorder

	// mu guards serving and closed; serveDone closes when Serve returns.
	mu        sync.Mutex
	serving   bool
	closed    bool
	serveDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open brings a node up, bound to its listener but not serving yet. On an
// error it undoes what it did (lease released, store and listener closed).
// Besides Validate's errors it may return ErrUnsafeDurability,
// allocator.ErrLayoutMismatch, or the store's errors.
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
	// Listen first: a node that cannot bind fails before touching the
	// database, so a crash-looping pod neither migrates nor writes events.
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(ctx, "tcp", c.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s (Config.Listen): %w", c.Listen, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.stop(context.WithoutCancel(ctx)))
			_ = a.ln.Close()
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
	var comp probe.Compaction // who compacts a history of revisions (etcd)
	if hs, ok := a.store.(historyStore); ok {
		if comp = planCompaction(openCtx, hs, c.EtcdCompactRetention, a.log); comp.ByNode {
			a.compactor = newCompactor(hs, comp.Retention, c.Clock, a.log)
		}
	}
	if sr, ok := a.store.(allocator.SpaceReporter); ok {
		a.space = probe.NewSpace(sr, comp, c.Clock.Now, a.log)
		a.space.Sample(openCtx) // /readyz and the page show it from the start
	}
	if c.Migrate {
		n, err := migrateUp(openCtx, a.store)
		if err != nil {
			return nil, fmt.Errorf("migrate database %s: %w", dburl.Redact(c.DSN), err)
		}
		a.log.Info("database migrated", "applied", n)
	}

	cancelOpen()

	data, tracingCfg, err := a.openTracing(ctx, c)
	if err != nil {
		return nil, err
	}
	restoreCtx, cancelRestore := context.WithTimeout(ctx, c.OpenTimeout)
	data, a.state, err = checkRestore(restoreCtx, c, a.store, data, a.log)
	cancelRestore()
	if err != nil {
		return nil, err
	}
	if data, err = a.openAudit(c, data); err != nil {
		return nil, err
	}
	keeper, err := allocator.NewKeeper(data, ks)
	if err != nil {
		return nil, fmt.Errorf("lease keeper: %w", err)
	}
	if a.audit != nil {
		a.audit.SetNode(keeper.Holder())
	}
	startCtx, cancelStart := context.WithTimeout(ctx, c.OpenTimeout)
	err = keeper.Start(startCtx)
	cancelStart()
	if err != nil {
		_ = keeper.Close(ctx)
		return nil, fmt.Errorf("start lease keeper: %w", err)
	}
	a.keeper = keeper
	a.ready = &readiness{Keeper: keeper}

	ss := c.Segments
	ss.Fallback = keeper
	if a.segments, err = allocator.NewSegments(data, ss); err != nil {
		return nil, fmt.Errorf("segment allocator: %w", err)
	}

	// The core, shared by both transports.
	a.auth = idgen.NewAuthorizer(c.AdminToken, tokens)
	a.svc, err = idgen.NewService(keeper, a.segments, idgen.Settings{MaxCount: c.MaxCount, RateLimit: c.RateLimit, Formats: c.Formats})
	if err != nil {
		return nil, err
	}
	broker, err := idgen.NewBroker(data, ks, c.LeaseAPI, a.log)
	if err != nil {
		return nil, err
	}

	ping := probe.NewPing(data, a.log)
	a.status, err = statuspage.New(statuspage.Config{
		Service: a.svc, Auth: a.auth, Lease: keeper, Segments: a.segments, Store: data, Database: ping,
		Logger: a.log, Version: c.Version, Durability: a.durability, PublicDetails: c.StatusDetailsPublic(), Space: a.spaceReporter(),
		Clock: c.Clock, LeaseTTL: ks.TTL, MaxClockOffset: ks.MaxClockOffset, Policy: policy(ks, c.Segments),
		Sequences: sequenceReader(a.store),
		Audit:     a.auditNotice(),
	})
	if err != nil {
		return nil, err
	}
	a.metrics = prometheus.NewRegistry()
	seqSvc, seqAPI := sequencesOf(a.store, a.svc, a.audit)
	a.api, err = httpapi.New(httpapi.Config{
		Sequences:  seqAPI,
		Service:    a.svc,
		Auth:       a.auth,
		Leases:     broker,
		Lease:      a.ready,
		Segments:   a.segments,
		Admin:      data,
		Database:   ping,
		Status:     a.status.Serve,
		Metrics:    metrics.Handler(a.metrics),
		Logger:     a.log,
		Clock:      c.Clock,
		Durability: a.durability,
		Space:      a.spaceReporter(),
		Tracing:    tracingCfg,

		AuditClickHouse: a.auditClickHouse(),

		PublicStatusDetails: c.StatusDetailsPublic(),
	})
	if err != nil {
		return nil, fmt.Errorf("http api: %w", err)
	}
	a.rpc, err = rpcapi.New(rpcapi.Config{
		Service: a.svc,
		Auth:    a.auth,
		Leases:  broker,
		Ready:   a.ready,
		Logger:  a.log,
		Tracer:  tracingCfg.Tracer,

		Sequences:   a.api.Sequences(),
		ReadTimeout: httpapi.ReadTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("grpc api: %w", err)
	}
	retries, _ := a.store.(allocator.RetryCounter)
	collectors := metrics.Collectors(metrics.Config{Service: a.svc, Lease: keeper, Segments: a.segments, Leases: data,
		Database: ping, Retries: retries, Version: c.Version, Space: a.spaceReporter()})
	collectors = append(append(collectors, a.api.Collectors()...), a.rpc.Collectors()...)
	if tokens != nil {
		a.log.Info("callers' tokens loaded", "source", tokensSource(c), "tokens", tokens.Len(), "names", tokens.Names())
		warnTokens(a.log, tokens)
	}
	if c.TokensFile != "" {
		a.tokens = newTokensReloader(c.TokensFile, c.TokensReloadInterval, a.auth, a.log, tokensState, tokens)
		collectors = append(collectors, a.tokens.collectors()...)
	}
	if a.compactor != nil {
		collectors = append(collectors, a.compactor.collectors()...)
	}
	if seqSvc != nil {
		a.sweeper = newSequenceSweeper(seqSvc, c.SequenceExpiryInterval, a.log)
		collectors = append(collectors, a.sweeper.collectors()...)
	}
	if a.audit != nil {
		collectors = append(collectors, a.audit.Collectors()...)
	}
	if c.LeaseEventsRetention > 0 {
		a.pruner = newEventsPruner(data, c.LeaseEventsRetention, c.LeaseEventsPruneInterval, c.Clock, a.log)
		collectors = append(collectors, a.pruner.collectors()...)
	} else {
		a.log.Info("lease events are kept forever: no retention set")
	}
	for _, m := range collectors {
		if err := a.metrics.Register(m); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	a.srv = a.api.HTTPServer(c.Listen)
	// One listener for both APIs: HTTP/1.1 and h2c; Serve hands gRPC
	// connections to grpc-go (rpcapi.Server.Listen).
	a.srv.Handler = a.rpc.Mount(a.api.Handler())
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	a.srv.Protocols = &protocols
	a.status.History().Start() // stopped by stop
	if a.tokens != nil {
		a.tokens.start()
	}
	if a.pruner != nil {
		a.pruner.start()
	}
	if a.compactor != nil {
		a.compactor.start()
	}
	if a.sweeper != nil {
		a.sweeper.start()
	}
	if a.space != nil {
		a.spaceLoop = periodic.Start(c.SpaceInterval, c.SpaceInterval, a.space.Sample)
	}
	return a, nil
}

// StatusDetailsPublic reports whether /readyz and the status page show
// details to every caller: PublicStatusDetails when set, else true only
// without any token.
func (c Config) StatusDetailsPublic() bool {
	if c.PublicStatusDetails != nil {
		return *c.PublicStatusDetails
	}
	return c.AdminToken == "" && c.TokensFile == "" && c.Tokens == ""
}

func tokensSource(c Config) string {
	if c.TokensFile != "" {
		return c.TokensFile
	}
	return envTokensSource
}

// ReloadTokens rereads the tokens file now (as on SIGHUP) and returns why
// the old tokens stayed, if they did; ErrNoTokensFile without a file.
func (a *App) ReloadTokens() error {
	if a.tokens == nil {
		return ErrNoTokensFile
	}
	return a.tokens.reload(true)
}

// Serve serves on Open's listener until Close, then returns nil; it
// returns ErrClosed after Close, and an error when called twice.
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
	err := a.srv.Serve(a.rpc.Listen(a.ln, a.srv.ReadHeaderTimeout))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// Close takes the node down, each step bounded by ctx and ShutdownTimeout,
// errors joined, once Serve has returned; later calls return the first result.
func (a *App) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		serving := a.serving
		a.mu.Unlock()
		if a.ready != nil {
			a.ready.draining.Store(true) // probes say so while requests finish
		}

		a.log.Info("shutting down: finishing requests in flight")
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		// End the ID streams (UNAVAILABLE, so callers fail over), not wait.
		a.rpc.Drain()
		err := a.srv.Shutdown(sctx)
		if gerr := a.rpc.Shutdown(sctx); gerr != nil && err == nil {
			err = gerr
		}
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

// stop stops what Open started after the HTTP server, in reverse order,
// skipping parts not started.
func (a *App) stop(ctx context.Context) (err error) {
	if a.tokens != nil {
		a.tokens.stop()
	}
	if a.pruner != nil {
		a.pruner.stop()
	}
	if a.compactor != nil {
		a.compactor.stop()
	}
	if a.sweeper != nil {
		a.sweeper.stop()
	}
	if a.spaceLoop != nil {
		a.spaceLoop.Stop()
	}
	type step struct {
		part interface{ Close(context.Context) error }
		what string // what failed, for the error
		done string // the log line once stopped
	}
	var steps []step
	if a.status != nil {
		steps = append(steps, step{a.status.History(), "stop history sampler", "history sampler stopped"})
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
	// After the keeper, so its release is in the trail.
	sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	if cerr := a.closeAudit(sctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("audit trail: %w", cerr))
	}
	cancel()
	if a.state != nil {
		if cerr := a.state.Flush(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("write state file: %w", cerr))
		}
	}
	if a.ownStore && a.store != nil {
		if cerr := a.store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
		}
	}
	// Last, as the steps above end spans too.
	if a.tracer != nil {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		if cerr := a.tracer.Shutdown(sctx); cerr != nil {
			a.log.Warn("traces not all sent at shutdown", "err", cerr)
		}
		cancel()
	}
	return err
}

// Addr returns the address the node listens on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Handler returns the HTTP API with the gRPC API mounted, for serving with
// one's own server; gRPC needs HTTP/2.
func (a *App) Handler() http.Handler { return a.srv.Handler }

// RPC returns the gRPC API.
func (a *App) RPC() *rpcapi.Server { return a.rpc }

// API returns the HTTP API.
func (a *App) API() *httpapi.Server { return a.api }

// Status returns the status page.
func (a *App) Status() *statuspage.Page { return a.status }

// Metrics returns the registry /metrics serves.
func (a *App) Metrics() *prometheus.Registry { return a.metrics }

// Service returns the node's application core.
func (a *App) Service() *idgen.Service { return a.svc }

// Authorizer returns who may call what on the node.
func (a *App) Authorizer() *idgen.Authorizer { return a.auth }

// Keeper returns the node's lease keeper.
func (a *App) Keeper() *allocator.Keeper { return a.keeper }

// Segments returns the node's segment allocator.
func (a *App) Segments() *allocator.Segments { return a.segments }

// Store returns the node's store.
func (a *App) Store() stores.Store { return a.store }

// Durability returns the durability check's result as /readyz shows it.
func (a *App) Durability() string { return a.durability }

// Space returns the latest space sample; false for a store that cannot say.
func (a *App) Space() (probe.SpaceReport, bool) {
	if a.space == nil {
		return probe.SpaceReport{}, false
	}
	return a.space.Report(), true
}

// spaceReporter returns a.space, or a true nil interface without one.
func (a *App) spaceReporter() interface{ Report() probe.SpaceReport } {
	if a.space == nil {
		return nil
	}
	return a.space
}

func migrateUp(ctx context.Context, store stores.Store) (int, error) {
	p, err := store.Migrations()
	if err != nil {
		return 0, err
	}
	defer p.Close()
	res, err := p.Up(ctx)
	return len(res), err
}

func workerIDsText(s allocator.KeeperSettings) string {
	if s.WorkerIDs == nil {
		return fmt.Sprintf("0-%d", s.Layout.MaxWorker())
	}
	return fmt.Sprintf("%d-%d", s.WorkerIDs.Min, s.WorkerIDs.Max)
}
