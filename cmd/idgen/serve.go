package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/snowflake"
)

const serveUsage = `Usage: idgen serve [flags]

Run the HTTP service: claim a worker ID from the lease table, then serve
Snowflake IDs (GET /ids?count=N), segment IDs (GET /ids?count=N&namespace=NS),
ID decomposition (GET /ids/{id}), /healthz, /readyz, /metrics, a status page at /
and, with --admin-token, the admin API under /admin/.

On SIGTERM or SIGINT it stops accepting connections, finishes the requests in
flight, gives back the unused tails of its segment ranges, releases its lease
and exits 0. On SIGHUP it reloads its --tokens-file.

Flags (environment variable in brackets):
  --listen ADDR            address to listen on [IDGEN_LISTEN] (default 127.0.0.1:8080)
                           port 0 picks a free port: see --addr-file
  --addr-file PATH         once listening, write the address served on (host:port)
                           to PATH, atomically; removed at start and at exit
                           [IDGEN_ADDR_FILE] (default none)
  --dsn DSN                database [IDGEN_DSN] (default sqlite:idgen.db)
                           postgres://user:pass@host:5432/db?sslmode=disable
                           mysql://user:pass@host:3306/db
                           sqlite:path/to/file.db
                           etcd://user:pass@host1:2379,host2:2379,host3:2379/prefix (etcds:// for TLS)
  --migrate                apply database migrations at start [IDGEN_MIGRATE] (default true;
                           turn off with --migrate=false)
  --datacenter N           datacenter ID [IDGEN_DATACENTER] (default 0)
  --worker-ids A-B         worker IDs this node may claim [IDGEN_WORKER_IDS]
                           (default every worker ID of the layout, e.g. 0-31;
                           at most 65536 IDs)
  --layout T/D/W/S         bit widths of time/datacenter/worker/sequence [IDGEN_LAYOUT]
                           (default 41/5/5/12; must sum to 63)
  --epoch TIME             instant timestamp 0 stands for, RFC 3339 [IDGEN_EPOCH]
                           (default 2026-01-01T00:00:00Z)
  --lease-ttl D            worker lease time to live [IDGEN_LEASE_TTL] (default 30s;
                           at least 1s)
  --heartbeat D            interval between lease heartbeats [IDGEN_HEARTBEAT]
                           (default a third of --lease-ttl, 10s with the default;
                           more than 0 and at most half of --lease-ttl)
  --holder NAME            this node's name in the lease table [IDGEN_HOLDER]
                           (default host/pid/random)
  --lease-api-min-ttl D    shortest lease the lease API (/v1/leases) grants
                           [IDGEN_LEASE_API_MIN_TTL] (default 3s; at least 1s)
  --lease-api-max-ttl D    longest lease the lease API grants
                           [IDGEN_LEASE_API_MAX_TTL] (default 5m)
  --max-count N            largest count one request may ask for [IDGEN_MAX_COUNT] (default 10000)
  --admin-token TOKEN      bearer token of the /admin/ API [IDGEN_ADMIN_TOKEN]
                           (default none: /admin/ is off unless a token has the
                           admin scope); with --tokens-file, a caller named
                           admin-token with the admin scope
  --tokens-file PATH       the callers' tokens, one per line: NAME SCOPES SHA256HEX
                           (see idgen tokens --help) [IDGEN_TOKENS_FILE]. With it,
                           /ids needs the ids scope, /admin/ the admin scope and
                           the lease API (/v1/leases, off without a token with
                           the leases scope) the leases scope. Reloaded when it
                           changes and on SIGHUP; a malformed file refuses the
                           start, and on reload keeps the tokens in effect.
                           IDGEN_TOKENS may hold the file's content instead
                           (never reloaded). Default none: /ids is open
  --lease-events-retention D  how long lease events are kept; older ones are
                           deleted hourly [IDGEN_LEASE_EVENTS_RETENTION]
                           (default 720h, 30 days; 0 keeps them forever)
  --log-format FORMAT      text or json [IDGEN_LOG_FORMAT] (default text)
  --log-level LEVEL        debug, info, warn or error [IDGEN_LOG_LEVEL] (default info)
  --shutdown-timeout D     bound on each shutdown step [IDGEN_SHUTDOWN_TIMEOUT] (default 10s)
  --allow-unsafe-durability  serve even though the database can lose acknowledged
                           commits (e.g. synchronous_commit=off), which can hand
                           out the same IDs twice [IDGEN_ALLOW_UNSAFE_DURABILITY]
                           (default false: such a database is refused at start)
`

// serveConfig is the validated configuration of idgen serve: the node's
// (app.Config, whose Logger, Clock and Version serve fills in) and the
// process's own.
type serveConfig struct {
	app       app.Config
	logFormat string
	logLevel  slog.Level
	// addrFile is --addr-file: where the address served on is written.
	addrFile string
	// clock is the test clock's flags, in builds with the tag
	// idgen_testclock only (see testclock.go).
	clock testClock
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
	retention time.Duration
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
	fs, c := sf.f.fs, &sf.c.app
	fs.StringVar(&c.Listen, "listen", app.DefaultListen, "")
	fs.StringVar(&sf.c.addrFile, "addr-file", "", "")
	fs.StringVar(&c.DSN, "dsn", "sqlite:idgen.db", "")
	fs.BoolVar(&c.Migrate, "migrate", true, "")
	fs.Int64Var(&c.Keeper.DatacenterID, "datacenter", 0, "")
	fs.Var(&sf.workers, "worker-ids", "")
	fs.Var(&sf.bits, "layout", "")
	fs.Var(&sf.epoch, "epoch", "")
	fs.DurationVar(&c.Keeper.TTL, "lease-ttl", allocator.DefaultLeaseTTL, "")
	fs.DurationVar(&c.Keeper.Heartbeat, "heartbeat", 0, "")
	fs.StringVar(&c.Keeper.Holder, "holder", "", "")
	fs.DurationVar(&c.LeaseAPI.MinTTL, "lease-api-min-ttl", app.DefaultLeaseAPIMinTTL, "")
	fs.DurationVar(&c.LeaseAPI.MaxTTL, "lease-api-max-ttl", app.DefaultLeaseAPIMaxTTL, "")
	fs.IntVar(&c.MaxCount, "max-count", httpapi.DefaultMaxCount, "")
	fs.StringVar(&c.AdminToken, "admin-token", "", "")
	fs.StringVar(&c.TokensFile, "tokens-file", "", "")
	fs.DurationVar(&sf.retention, "lease-events-retention", app.DefaultLeaseEventsRetention, "")
	fs.Var(&sf.logFormat, "log-format", "")
	fs.Var(&sf.logLevel, "log-level", "")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", app.DefaultShutdownTimeout, "")
	fs.BoolVar(&c.AllowUnsafeDurability, "allow-unsafe-durability", false, "")
	sf.c.clock.define(sf.f)
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
	// app.Config takes a zero in these for "the default"; given on the
	// command line or in the environment, a zero is a mistake (a ttl of 0
	// is no lease) and refused rather than silently replaced.
	for _, name := range []string{"lease-ttl", "heartbeat", "max-count", "shutdown-timeout"} {
		if v := sf.f.fs.Lookup(name).Value.String(); sf.f.isSet(name) && (v == "0" || v == "0s") {
			return serveConfig{}, usagef(cmd, "invalid --%s %s (%s): want more than 0; leave it out for the default", name, v, envName(name))
		}
	}
	for _, name := range []string{"lease-api-min-ttl", "lease-api-max-ttl"} {
		if v := sf.f.fs.Lookup(name).Value.String(); sf.f.isSet(name) && v == "0s" {
			return serveConfig{}, usagef(cmd, "invalid --%s 0s (%s): want more than 0; leave it out for the default", name, envName(name))
		}
	}
	c := sf.c
	switch {
	case sf.retention < 0:
		return serveConfig{}, usagef(cmd, "invalid --lease-events-retention %s (%s): want 0 (keep forever) or more", sf.retention, envName("lease-events-retention"))
	case sf.retention == 0:
		c.app.LeaseEventsRetention = app.KeepLeaseEvents
	default:
		c.app.LeaseEventsRetention = sf.retention
	}
	// IDGEN_TOKENS is a tokens file's content, for deployments that pass
	// configuration in the environment; it has no flag.
	c.app.Tokens = e.getenv("IDGEN_TOKENS")
	if c.app.Tokens != "" && c.app.TokensFile != "" {
		return serveConfig{}, usagef(cmd, "tokens given twice: use --tokens-file (IDGEN_TOKENS_FILE) or IDGEN_TOKENS, not both")
	}
	if c.addrFile != "" {
		// Refused now rather than after the node has claimed a lease.
		if fi, err := os.Stat(filepath.Dir(c.addrFile)); err != nil || !fi.IsDir() {
			return serveConfig{}, usagef(cmd, "invalid --addr-file %q: its directory does not exist", c.addrFile)
		}
	}
	c.logFormat = sf.logFormat.v
	if err := c.logLevel.UnmarshalText([]byte(sf.logLevel.v)); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --log-level: %v", err)
	}
	if c.app.Keeper.Layout, err = layoutOf(sf.bits, sf.epoch); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --layout/--epoch: %v", err)
	}
	if sf.workers.set {
		r := sf.workers.r
		c.app.Keeper.WorkerIDs = &r
	}
	// The keeper's settings decide the lease rules; resolved here so that
	// the heartbeat left out becomes a third of the ttl.
	if c.app.Keeper, err = c.app.Keeper.Resolve(); err != nil {
		return serveConfig{}, usagef(cmd, "%v", err)
	}
	if err := c.app.Validate(); err != nil {
		return serveConfig{}, usagef(cmd, "%v", err)
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
	sc := newScrubber(c.app.DSN, c.app.AdminToken)
	return sc.err(serve(ctx, c, newLogger(sc.writer(e.stderr), c.logFormat, c.logLevel), e.hangups))
}

// serve runs an idgen node (app.App) until ctx is cancelled, then shuts it
// down; see package app for the order of both. With --addr-file it writes
// the address it serves on to that file once listening (and removes the
// file at start and at exit, so that it never names a node that is gone
// after a graceful exit).
func serve(ctx context.Context, c serveConfig, log *slog.Logger, hangups func(chan<- os.Signal) func()) (err error) {
	if c.addrFile != "" {
		if err := removeAddrFile(c.addrFile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, removeAddrFile(c.addrFile)) }()
	}
	// The test clock, in builds with the tag idgen_testclock only; it is
	// stopped after the node, which reads it until its keeper stops.
	clock, stopClock := c.clock.start(log)
	defer stopClock()

	// SIGHUP is caught from here on, so that one sent while the node
	// starts does not end it (its default action); it is acted on once
	// the node is open.
	var hup chan os.Signal
	if hangups != nil {
		hup = make(chan os.Signal, 1)
		stopSignals := hangups(hup)
		defer stopSignals()
	}

	cfg := c.app
	cfg.Logger, cfg.Clock, cfg.Version = log, clock, versionString()
	a, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	if hup != nil {
		stopReloads := reloadOnHangup(a, hup, log)
		defer stopReloads()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	if c.addrFile != "" {
		if werr := writeAddrFile(c.addrFile, a.Addr().String()); werr != nil {
			return errors.Join(werr, a.Close(context.WithoutCancel(ctx)))
		}
	}
	select {
	case <-ctx.Done():
	case err = <-serveErr: // the listener failed
	}
	// Close waits for Serve to return; after a shutdown it returns nil.
	return errors.Join(err, a.Close(context.WithoutCancel(ctx)))
}

// reloadOnHangup reloads a's tokens file at every SIGHUP that arrives on
// hup, until the function it returns is called, which waits for the
// reload under way, if any.
func reloadOnHangup(a *app.App, hup <-chan os.Signal, log *slog.Logger) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-hup:
				log.Info("SIGHUP: reloading the tokens file")
				// ReloadTokens logs what it did, and why a file was refused.
				if err := a.ReloadTokens(); errors.Is(err, app.ErrNoTokensFile) {
					log.Warn("SIGHUP ignored: no --tokens-file to reload")
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
