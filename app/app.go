// Package app is one idgen node as a value: `idgen serve` is flag parsing
// around it, and tests drive it directly. It is the only place the parts
// are wired: Open brings them up in the order they depend on each other
// (listener, database and its checks, migrations, the restore check of
// the state file, keeper, segments, the core, the HTTP and gRPC APIs on
// one listener, the background loops); Drain turns the node not ready and
// keeps it serving for its drain window, so that balancers take it out;
// and Close takes the parts down in the reverse order, so that no request
// finds the allocators closed and the lease is released last before the
// database.
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
// Validate says which values are refused.
type Config struct {
	// DSN names the database: postgres://, mysql://, sqlite: or etcd://. It
	// is ignored when Store is set.
	DSN string
	// Store, when not nil, is used instead of opening DSN. Close leaves it
	// open: it belongs to the caller.
	Store stores.Store
	// Migrate applies the pending schema migrations at Open.
	Migrate bool
	// AllowUnsafeDurability serves on a database that can lose commits it
	// acknowledged, logging each risk, instead of refusing to start.
	AllowUnsafeDurability bool
	// StateFile, when set, names the node's state file (internal/nodestate):
	// what the node saw the store commit, kept on the node's own disk. At
	// start the node refuses a store that is behind it (restored or failed
	// over without idgen restore-fence), with an error wrapping
	// allocator.ErrStoreBehind. Ignored, with a warning, on a store without
	// a restore fence (allocator.RestoreFencer).
	StateFile string

	// Keeper configures the lease keeper: layout, datacenter, worker IDs,
	// holder, lease ttl and heartbeat. Its Clock and Logger are ignored:
	// Open sets them from Clock and Logger.
	Keeper allocator.KeeperSettings
	// Segments configures the segment allocator: the prefetch threshold
	// and the dynamic-step windows among others. Its Logger and Fallback
	// are ignored: Open sets them from Logger and the keeper.
	Segments allocator.SegmentSettings
	// LeaseAPI configures the lease API: its pool, which never overlaps
	// the keeper's, its caps and its ttl bounds (idgen.LeaseSettings).
	LeaseAPI idgen.LeaseSettings

	// Listen is the TCP address to serve on, host:port; port 0 picks a free
	// one (see Addr). Default DefaultListen.
	Listen string
	// MaxCount is the largest count one request may ask for: 1 to
	// idgen.MaxCountLimit, default idgen.DefaultMaxCount.
	MaxCount int
	// Formats are the forms IDs are written in when a request names none:
	// idgen.Settings.Formats (key "" for Snowflake IDs, else a namespace).
	Formats map[string]snowflake.Format
	// AdminToken enables the admin API under /admin/ for requests bearing
	// it; empty leaves the API off unless a token has the admin scope.
	AdminToken string
	// TokensFile names the callers' tokens file (idgen.ParseTokens):
	// with it, every route family needs its scope, and the lease API is on
	// once a token has the leases scope. The node reloads the file when it
	// changes (see ReloadTokens).
	TokensFile string
	// Tokens is the content of a tokens file, for a node whose tokens come
	// from the environment (IDGEN_TOKENS) rather than a file; they are
	// never reloaded. At most one of TokensFile and Tokens may be set.
	Tokens string
	// TokensReloadInterval is how often the node looks at TokensFile for
	// a change. Default DefaultTokensReloadInterval.
	TokensReloadInterval time.Duration
	// PublicStatusDetails, when not nil, says whether /readyz and the
	// status page show every caller the lease holders, fencing versions
	// and namespaces (httpapi.Config.PublicStatusDetails); a request
	// bearing a token with the admin scope sees them either way. Nil
	// means StatusDetailsPublic's default: shown on a node without tokens
	// and without an admin token, where nothing else asks for one either.
	PublicStatusDetails *bool

	// LeaseEventsRetention is how long lease events are kept: a
	// background loop deletes older ones. Default
	// DefaultLeaseEventsRetention (30 days); KeepLeaseEvents (or any
	// negative value) keeps them forever.
	LeaseEventsRetention time.Duration
	// LeaseEventsPruneInterval is how often the loop prunes; the first
	// prune comes after the interval or 30s, whichever is shorter. Default
	// DefaultLeaseEventsPruneInterval (an hour).
	LeaseEventsPruneInterval time.Duration
	// Version is shown on the status page and in the metrics.
	Version string
	// Audit configures the audit trail of lease events, segment fetches
	// and blocks of IDs; off by default.
	Audit AuditConfig

	// EtcdCompactRetention is how much of etcd's history the node keeps:
	// it compacts the revisions older than this, cluster-wide, in the
	// background (etcd keeps every revision until someone compacts, and
	// its backend grows until it refuses writes). Zero compacts with
	// DefaultEtcdCompactRetention when idgen owns the cluster (no keys
	// outside its prefix) and leaves a shared cluster to its operator;
	// NoEtcdCompaction (or any negative value) never compacts. At least
	// MinEtcdCompactRetention when positive. Ignored by the SQL stores.
	EtcdCompactRetention time.Duration
	// SequenceExpiryInterval is how often the node marks expired the
	// numbers of every sequence reserved past their expiry, so that the
	// ledger shows them expired without anyone reading it. Default
	// DefaultSequenceExpiryInterval. Ignored on a store without sequences.
	SequenceExpiryInterval time.Duration
	// SpaceInterval is how often the node samples the space its database
	// takes and its alarms (etcd only), for /metrics, /readyz and the
	// status page. Default DefaultSpaceInterval.
	SpaceInterval time.Duration

	// RateLimit limits the IDs each caller takes, over every transport
	// (idgen.RateLimit): per token name with tokens, per client
	// address without. The zero value sets no limit.
	RateLimit idgen.RateLimit
	// Tracing configures OpenTelemetry tracing (tracing.go); off unless
	// enabled here or by OTEL_TRACES_EXPORTER=otlp.
	Tracing TracingConfig

	// OpenTimeout bounds connecting to the database, checking and
	// migrating it; and, again, starting the keeper (checking the layout
	// the database records). Default DefaultOpenTimeout.
	OpenTimeout time.Duration
	// ShutdownTimeout bounds each step of Close. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// DrainWindow is how long Drain keeps the node serving after it
	// turned not ready, before Close stops accepting connections. Default
	// DefaultDrainWindow; NoDrainWindow (or any negative value) none.
	DrainWindow time.Duration

	// Clock is the wall clock the Snowflake IDs carry; nil means
	// snowflake.SystemClock(). Tests step it to play clock jumps.
	Clock snowflake.Clock
	// Logger receives the node's log; nil discards it.
	Logger *slog.Logger
}

// Validate reports a configuration Open would refuse, with a message that
// names the field ("invalid Config.MaxCount 0: …"): a DSN of
// no known database or with an '@' not percent-encoded (dburl.ErrNotEncoded,
// never showing the DSN), a listen address that is not host:port, keeper
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
	// The node's pool and the lease API's are set apart first: the
	// keeper's settings are checked with the pool in force.
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

// App is a running idgen node: built by Open, serving from Serve on,
// taken down by Close.
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
	// tokens reloads the tokens file; nil without one.
	tokens *tokensReloader
	// pruner prunes the lease events; nil when they are kept forever.
	pruner *eventsPruner
	// space samples the database's space and alarms, and spaceLoop
	// samples it; nil for a store that cannot say (the SQL stores).
	space     *probe.Space
	spaceLoop *periodic.Loop
	// compactor compacts the etcd history; nil when the node does not.
	compactor *compactor
	// sweeper expires the sequences' due reservations; nil on a store
	// without sequences.
	sweeper *sequenceSweeper
	// tracer is the tracer provider Open built, shut down last by stop;
	// nil when tracing is off or its provider is the caller's.
	tracer *tracing.Provider
	// state keeps the state file; nil without one.
	state *nodestate.Store
	// audit sends the audit trail; nil when it is off.
	audit *audit.Recorder

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
// listener but not serving yet. It listens before it opens the store: an
// address it cannot bind fails Open with the database untouched. On an
// error it undoes what it did: a lease it claimed is released, the store
// it opened is closed and the listener too. Besides the
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
	// The address first: a node that cannot listen (the port is taken,
	// say) fails before it touches the database, so that a pod restarting
	// in a loop neither migrates nor writes lease events.
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(ctx, "tcp", c.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s (Config.Listen): %w", c.Listen, err)
	}
	// Whatever fails from here on, what was started is stopped again.
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

	// From here on the parts use data: the store, traced when tracing is on.
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

	// The core: who may call, the draws and the lease API, one copy of
	// their rules for both transports.
	a.auth = idgen.NewAuthorizer(c.AdminToken, tokens)
	a.svc, err = idgen.NewService(keeper, a.segments, idgen.Settings{MaxCount: c.MaxCount, RateLimit: c.RateLimit, Formats: c.Formats})
	if err != nil {
		return nil, err
	}
	broker, err := idgen.NewBroker(data, ks, c.LeaseAPI, a.log)
	if err != nil {
		return nil, err
	}

	// One cached ping of the database for /readyz, the status page and
	// /metrics.
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

		Sequences: a.api.Sequences(),
		// As the HTTP server bounds the reading of a request.
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
	// One listener for both APIs: HTTP/1.1 and HTTP/2 without TLS (h2c,
	// with prior knowledge); gRPC-Web and Connect work on both. Serve hands
	// the h2c connections whose first request is a gRPC call to grpc-go
	// instead (rpcapi.Server.Listen).
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

// StatusDetailsPublic returns whether the node shows the details of
// /readyz and the status page to every caller: PublicStatusDetails when
// set, else true on a node without tokens (TokensFile, Tokens) and
// without an admin token, false on one with any.
func (c Config) StatusDetailsPublic() bool {
	if c.PublicStatusDetails != nil {
		return *c.PublicStatusDetails
	}
	return c.AdminToken == "" && c.TokensFile == "" && c.Tokens == ""
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
	// gRPC calls over h2c go to grpc-go, the rest to the HTTP server
	// (rpcapi.Server.Listen).
	err := a.srv.Serve(a.rpc.Listen(a.ln, a.srv.ReadHeaderTimeout))
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
		if a.ready != nil {
			a.ready.draining.Store(true) // probes say so while requests finish
		}

		a.log.Info("shutting down: finishing requests in flight")
		sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
		// Streams of IDs run until their caller cancels: end them (with
		// UNAVAILABLE, so that callers go to another node) rather than
		// wait for them, then let the server finish the rest.
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

// stop stops what Open started after the HTTP server, in reverse order: the
// background loops (tokens reload, events pruner, sequences' sweep, the status page's
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
	// After the keeper: its release and last block are in the trail.
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

// Status returns the status page.
func (a *App) Status() *statuspage.Page { return a.status }

// Metrics returns the registry /metrics serves.
func (a *App) Metrics() *prometheus.Registry { return a.metrics }

// Service returns the node's application core: what every transport
// draws IDs through.
func (a *App) Service() *idgen.Service { return a.svc }

// Authorizer returns who may call what on the node.
func (a *App) Authorizer() *idgen.Authorizer { return a.auth }

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

// Space returns the latest sample of the database's space and alarms, and
// who compacts etcd's history; false for a store that cannot say.
func (a *App) Space() (probe.SpaceReport, bool) {
	if a.space == nil {
		return probe.SpaceReport{}, false
	}
	return a.space.Report(), true
}

// spaceReporter returns a.space as the consumers take it: nil (no
// interface value holding a nil pointer) for a store that cannot say.
func (a *App) spaceReporter() interface{ Report() probe.SpaceReport } {
	if a.space == nil {
		return nil
	}
	return a.space
}

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
