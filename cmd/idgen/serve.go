package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/snowflake"
)

const serveUsage = `Usage: idgen serve [flags]

Run the HTTP service: claim a worker ID from the lease table, then serve
Snowflake IDs (GET /ids?count=N), segment IDs (GET /ids?count=N&namespace=NS),
ID decomposition (GET /ids/{id}), /healthz, /readyz, /metrics, a status page at /
and, with --admin-token, the admin API under /admin/.

On SIGTERM or SIGINT it stops accepting connections, finishes the requests in
flight, gives back the unused tails of its segment ranges, releases its lease
and exits 0.

Flags (environment variable in brackets):
  --listen ADDR            address to listen on [IDGEN_LISTEN] (default 127.0.0.1:8080)
  --dsn DSN                database [IDGEN_DSN] (default sqlite:idgen.db)
                           postgres://user:pass@host:5432/db?sslmode=disable
                           mysql://user:pass@host:3306/db
                           sqlite:path/to/file.db
  --migrate                apply database migrations at start [IDGEN_MIGRATE] (default true;
                           turn off with --migrate=false)
  --datacenter N           datacenter ID [IDGEN_DATACENTER] (default 0)
  --worker-ids A-B         worker IDs this node may claim [IDGEN_WORKER_IDS]
                           (default every worker ID of the layout, e.g. 0-31)
  --layout T/D/W/S         bit widths of time/datacenter/worker/sequence [IDGEN_LAYOUT]
                           (default 41/5/5/12; must sum to 63)
  --epoch TIME             instant timestamp 0 stands for, RFC 3339 [IDGEN_EPOCH]
                           (default 2026-01-01T00:00:00Z)
  --lease-ttl D            worker lease time to live [IDGEN_LEASE_TTL] (default 30s)
  --heartbeat D            interval between lease heartbeats [IDGEN_HEARTBEAT]
                           (default 10s; at most half of --lease-ttl)
  --holder NAME            this node's name in the lease table [IDGEN_HOLDER]
                           (default host/pid/random)
  --max-count N            largest count one request may ask for [IDGEN_MAX_COUNT] (default 10000)
  --admin-token TOKEN      bearer token of the /admin/ API [IDGEN_ADMIN_TOKEN]
                           (default none: /admin/ is off)
  --log-format FORMAT      text or json [IDGEN_LOG_FORMAT] (default text)
  --log-level LEVEL        debug, info, warn or error [IDGEN_LOG_LEVEL] (default info)
  --shutdown-timeout D     bound on each shutdown step [IDGEN_SHUTDOWN_TIMEOUT] (default 10s)
`

// Limits on serve's flags.
const (
	minLeaseTTL     = time.Second
	openTimeout     = 30 * time.Second // connecting to the database and migrating it
	clockFilePeriod = 100 * time.Millisecond
)

// serveConfig is the validated configuration of idgen serve.
type serveConfig struct {
	listen          string
	dsn             string
	migrate         bool
	datacenter      int64
	workers         *allocator.WorkerRange // nil: every worker ID of the layout
	layout          snowflake.Layout
	ttl             time.Duration
	heartbeat       time.Duration
	holder          string
	maxCount        int
	adminToken      string
	logFormat       string
	logLevel        slog.Level
	shutdownTimeout time.Duration
	// Test-only: the node's clock is moved by clockOffset, or by the
	// duration in clockFile, re-read every clockFilePeriod.
	clockOffset time.Duration
	clockFile   string
}

// serveFlags are serve's flags, bound to a serveConfig and the flag values
// that parseServe validates into it.
type serveFlags struct {
	f         *flagSet
	c         serveConfig
	workers   workerRangeFlag
	bits      layoutFlag
	epoch     timeFlag
	logFormat choiceFlag
	logLevel  choiceFlag
}

// newServeFlags defines serve's flags with their defaults.
func newServeFlags() *serveFlags {
	sf := &serveFlags{
		f:         newFlagSet("serve", serveUsage),
		bits:      defaultLayoutFlag(),
		epoch:     timeFlag{snowflake.DefaultEpoch},
		logFormat: choiceFlag{"text", []string{"text", "json"}},
		logLevel:  choiceFlag{"info", []string{"debug", "info", "warn", "error"}},
	}
	fs, c := sf.f.fs, &sf.c
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "")
	fs.StringVar(&c.dsn, "dsn", "sqlite:idgen.db", "")
	fs.BoolVar(&c.migrate, "migrate", true, "")
	fs.Int64Var(&c.datacenter, "datacenter", 0, "")
	fs.Var(&sf.workers, "worker-ids", "")
	fs.Var(&sf.bits, "layout", "")
	fs.Var(&sf.epoch, "epoch", "")
	fs.DurationVar(&c.ttl, "lease-ttl", allocator.DefaultLeaseTTL, "")
	fs.DurationVar(&c.heartbeat, "heartbeat", 10*time.Second, "")
	fs.StringVar(&c.holder, "holder", "", "")
	fs.IntVar(&c.maxCount, "max-count", 10000, "")
	fs.StringVar(&c.adminToken, "admin-token", "", "")
	fs.Var(&sf.logFormat, "log-format", "")
	fs.Var(&sf.logLevel, "log-level", "")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "")
	// Test-only flags are left out of the usage and have no environment
	// variable, so that no environment can shift a production node's clock.
	fs.DurationVar(&c.clockOffset, "test-clock-offset", 0, "")
	fs.StringVar(&c.clockFile, "test-clock-file", "", "")
	sf.f.noEnv["test-clock-offset"] = true
	sf.f.noEnv["test-clock-file"] = true
	return sf
}

// parseServe parses and validates serve's flags and environment.
func parseServe(args []string, e env) (serveConfig, error) {
	const cmd = "serve"
	sf := newServeFlags()
	pos, err := sf.f.parse(args, e)
	if err != nil {
		return serveConfig{}, err
	}
	if len(pos) > 0 {
		return serveConfig{}, usagef(cmd, "unexpected argument %q (serve takes flags only)", pos[0])
	}
	c := sf.c
	c.logFormat = sf.logFormat.v
	if err := c.logLevel.UnmarshalText([]byte(sf.logLevel.v)); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --log-level: %v", err)
	}
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --listen %q: want host:port, e.g. 127.0.0.1:8080", c.listen)
	}
	if stores.Dialect(c.dsn) == "" {
		return serveConfig{}, usagef(cmd, "invalid --dsn: want postgres://, mysql:// or sqlite: (the DSN is not shown: it may hold a password)")
	}
	if c.layout, err = layoutOf(sf.bits, sf.epoch); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --layout/--epoch: %v", err)
	}
	if c.datacenter < 0 || c.datacenter > c.layout.MaxDatacenter() {
		return serveConfig{}, usagef(cmd, "invalid --datacenter %d: the layout allows 0 to %d",
			c.datacenter, c.layout.MaxDatacenter())
	}
	if sf.workers.set {
		if sf.workers.r.Max > c.layout.MaxWorker() {
			return serveConfig{}, usagef(cmd, "invalid --worker-ids %s: the layout allows 0 to %d",
				sf.workers.String(), c.layout.MaxWorker())
		}
		r := sf.workers.r
		c.workers = &r
	}
	if c.ttl < minLeaseTTL {
		return serveConfig{}, usagef(cmd, "invalid --lease-ttl %s: want at least %s", c.ttl, minLeaseTTL)
	}
	if c.heartbeat <= 0 || 2*c.heartbeat > c.ttl {
		return serveConfig{}, usagef(cmd, "invalid --heartbeat %s: want more than 0 and at most half of --lease-ttl %s",
			c.heartbeat, c.ttl)
	}
	if c.maxCount < 1 || c.maxCount > allocator.MaxDrawCount {
		return serveConfig{}, usagef(cmd, "invalid --max-count %d: want 1 to %d", c.maxCount, allocator.MaxDrawCount)
	}
	if c.shutdownTimeout <= 0 {
		return serveConfig{}, usagef(cmd, "invalid --shutdown-timeout %s: want more than 0", c.shutdownTimeout)
	}
	return c, nil
}

// newLogger returns the logger of format "text" or "json" on w.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runServe is idgen serve.
func runServe(ctx context.Context, args []string, e env) error {
	c, err := parseServe(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(c.dsn, c.adminToken)
	return sc.err(serve(ctx, c, newLogger(sc.writer(e.stderr), c.logFormat, c.logLevel)))
}

// serve runs the service until ctx is cancelled, then shuts it down.
//
// It starts the parts in this order and stops them in the reverse one:
// the database store, the test clock watcher, the lease keeper, the segment
// allocator and the HTTP server. Shutting down, the HTTP server stops
// accepting and finishes the requests in flight first, so that no request
// finds the allocators closed; then the segment allocator returns its
// tails, the keeper releases the lease (its ceiling lowered to the last
// timestamp used), and the store closes last, because both write to it.
func serve(ctx context.Context, c serveConfig, log *slog.Logger) (err error) {
	version := versionString()
	log.Info("idgen starting", "version", version, "dsn", stores.Redact(c.dsn),
		"layout", c.layout.String(), "datacenter", c.datacenter, "worker_ids", workerIDsText(c),
		"lease_ttl", c.ttl, "heartbeat", c.heartbeat)
	if w := c.layout.Warning(); w != "" {
		log.Warn("snowflake layout", "warning", w)
	}

	openCtx, cancelOpen := context.WithTimeout(ctx, openTimeout)
	defer cancelOpen()
	store, err := stores.Open(openCtx, c.dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err) // the store names the (redacted) DSN
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
		}
		if err == nil {
			log.Info("idgen stopped")
		}
	}()
	if c.migrate {
		n, err := migrateUp(openCtx, store)
		if err != nil {
			return fmt.Errorf("migrate database %s: %w", stores.Redact(c.dsn), err)
		}
		log.Info("database migrated", "applied", n)
	}
	cancelOpen()

	// The wall clock IDs carry: the system's, or for tests one shifted by
	// --test-clock-offset and --test-clock-file.
	clock := snowflake.SystemClock()
	if c.clockOffset != 0 || c.clockFile != "" {
		shifted := snowflake.NewShiftedClock(clock, c.clockOffset)
		if c.clockFile != "" {
			w := startClockWatcher(shifted, c.clockFile, clockFilePeriod, log)
			defer w.stop()
		}
		log.Warn("test clock in use: IDs carry a shifted time", "offset", shifted.Offset(), "file", c.clockFile)
		clock = shifted
	}

	keeper, err := allocator.NewKeeper(store, allocator.KeeperSettings{
		Layout:       c.layout,
		DatacenterID: c.datacenter,
		WorkerIDs:    c.workers,
		Holder:       c.holder,
		TTL:          c.ttl,
		Heartbeat:    c.heartbeat,
		Clock:        clock,
		Logger:       log,
	})
	if err != nil {
		return fmt.Errorf("lease keeper: %w", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, openTimeout)
	err = keeper.Start(startCtx)
	cancelStart()
	if err != nil {
		_ = keeper.Close(ctx)
		return fmt.Errorf("start lease keeper: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
		defer cancel()
		if cerr := keeper.Close(rctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("release lease: %w", cerr))
			return
		}
		log.Info("lease keeper stopped")
	}()

	segments := allocator.NewSegments(store, allocator.SegmentSettings{Logger: log, Fallback: keeper})
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
		defer cancel()
		if cerr := segments.Close(tctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("return segment tails: %w", cerr))
			return
		}
		log.Info("segment allocator stopped")
	}()

	api, err := httpapi.New(httpapi.Config{
		Keeper:     keeper,
		Segments:   segments,
		Store:      store,
		MaxCount:   c.maxCount,
		AdminToken: c.adminToken,
		Logger:     log,
		Version:    version,
	})
	if err != nil {
		return fmt.Errorf("http api: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := api.HTTPServer(c.listen)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("idgen serving", "addr", ln.Addr().String(), "admin", c.adminToken != "")

	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing requests in flight")
	case err := <-serveErr:
		// Serve never returns nil; the listener failed.
		return fmt.Errorf("serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		err = fmt.Errorf("shutdown: requests still in flight after %s: %w", c.shutdownTimeout, serr)
		_ = srv.Close()
	}
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serve: %w", serr))
	}
	log.Info("http server stopped")
	return err
}

// workerIDsText describes the worker ID pool for the start-up log line.
func workerIDsText(c serveConfig) string {
	if c.workers == nil {
		return fmt.Sprintf("0-%d", c.layout.MaxWorker())
	}
	return fmt.Sprintf("%d-%d", c.workers.Min, c.workers.Max)
}
