package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/tracing"
	"github.com/idgen-project/idgen/snowflake"
)

// serveHelp is idgen serve's --help between its Usage line and its flags.
const serveHelp = `Run the HTTP service: claim a worker ID from the lease table, then serve
Snowflake IDs (GET /ids?count=N), segment IDs (GET /ids?count=N&namespace=NS),
ID decomposition (GET /ids/{id}), /healthz, /readyz, /metrics, a status page at /
and, with --admin-token, the admin API under /admin/.

On SIGTERM or SIGINT it turns not ready (/readyz 503, gRPC health NOT_SERVING)
and keeps serving for --drain-window, so that a balancer takes it out first (a
second SIGTERM or SIGINT ends the window); then it stops accepting connections,
finishes the requests in flight, gives back the unused tails of its segment
ranges, releases its lease and exits 0. On SIGHUP it reloads its --tokens-file.
`

// serveConfig is serve's validated configuration.
type serveConfig struct {
	app       app.Config
	logFormat string
	logLevel  slog.Level
	// addrFile is --addr-file: where the address served on is written.
	addrFile string
	// config is --config: the configuration file read, if any.
	config string
	// printConfig is --print-config; printed is what it prints.
	printConfig bool
	printed     string
	// clock is the test clock's flags (tag idgen_testclock only).
	clock testClock
}

// serveFlags are serve's settings, validated by parseServe.
type serveFlags struct {
	f            *settings
	c            serveConfig
	workers      workerRangeFlag
	apiWorkers   workerRangeFlag
	bits         layoutFlag
	epoch        timeFlag
	formats      formatsFlag
	logFormat    choiceFlag
	logLevel     choiceFlag
	retention    time.Duration
	backwardWait time.Duration
	compact      retentionFlag
	drainWindow  time.Duration
	// publicDetails is --public-status-details; unset, the node decides.
	publicDetails bool
}

// newServeFlags defines serve's settings in --help order. A new setting is
// one line here, plus its field (and fieldFlags entry).
func newServeFlags() *serveFlags {
	sf := &serveFlags{
		f:         newSettings("serve"),
		bits:      defaultLayoutFlag(),
		epoch:     timeFlag{snowflake.DefaultEpoch},
		logFormat: choiceFlag{"text", []string{"text", "json"}},
		logLevel:  choiceFlag{"info", []string{"debug", "info", "warn", "error"}},
	}
	d, c := sf.f, &sf.c.app

	d.group = "Service"
	d.String(&c.Listen, "listen", "ADDR", app.DefaultListen,
		"address to listen on, `host:port`; port 0 picks a free port (see `--addr-file`)")
	d.String(&sf.c.addrFile, "addr-file", "PATH", "",
		"once listening, write the address served on, `host:port` and a newline, to PATH, atomically; removed at start and at exit")
	d.Int(&c.MaxCount, "max-count", "N", idgen.DefaultMaxCount,
		fmt.Sprintf("largest `count` one request may ask for, of any transport: 1 to %d, so that the largest answer, "+
			"built whole in memory, fits in what a node is given", idgen.MaxCountLimit)).positiveValue()
	d.Var(&sf.formats, "id-format", "[NS=]FORMAT,…",
		"the form IDs are written in when a request names none (its `format` parameter): `decimal`, `base32`, "+
			"`base62` or `hex`; a bare FORMAT is for Snowflake IDs, `NS=FORMAT` for namespace NS, comma-separated").
		defaultText("`decimal` for every ID")
	d.Duration(&c.ShutdownTimeout, "shutdown-timeout", "D", app.DefaultShutdownTimeout,
		"bound on each shutdown step (finishing requests, returning segment tails, releasing the lease)").positiveValue()
	d.Duration(&sf.drainWindow, "drain-window", "D", app.DefaultDrainWindow,
		"on SIGTERM or SIGINT, how long the node keeps serving after `/readyz` turned 503, before it stops accepting "+
			"connections: long enough for a balancer or Kubernetes, checking readiness, to take it out; "+
			"a second signal ends it; `0` stops at once")

	d.group = "Database"
	d.String(&c.DSN, "dsn", "DSN", "sqlite:idgen.db",
		"the database: `postgres://user:pass@host:5432/db?sslmode=disable`, `mysql://user:pass@host:3306/db`, "+
			"`sqlite:path/to/file.db` or `etcd://user:pass@host1:2379,host2:2379/prefix` (`etcds://` for TLS)").maskedBy(dburl.Redact)
	d.Bool(&c.Migrate, "migrate", true,
		"apply the pending migrations at start; `--migrate=false` leaves the schema to `idgen migrate`")
	d.Bool(&c.AllowUnsafeDurability, "allow-unsafe-durability", false,
		"serve even though the database can lose acknowledged commits (e.g. `synchronous_commit=off`), "+
			"which can hand out the same IDs twice; such a database is refused at start without it")
	d.Var(&sf.compact, "etcd-compact-retention", "D",
		"etcd only: compact the cluster's history, keeping the revisions of the last D (etcd keeps every revision until "+
			"someone compacts, and refuses every write once its backend passes its quota, etcd's `quota-backend-bytes`). Compaction is "+
			"cluster-wide: it drops old revisions of every user's keys. `auto` compacts with `5m` when idgen owns the cluster "+
			"(no keys outside its prefix) and leaves a shared one to its operator; `off` never compacts. "+
			"Defragmentation is left to the operator (docs/operations.md)")
	d.String(&c.StateFile, "state-file", "PATH", "",
		"the node's state file, on its own disk (never beside a backup of the database): what it saw the store commit. "+
			"At start the node refuses a store that went back behind it (restored from a backup or failed over "+
			"without `idgen restore-fence`). Empty: no such check")

	d.group = "Snowflake layout and worker lease"
	d.Int64(&c.Keeper.DatacenterID, "datacenter", "N", 0,
		"datacenter ID in every Snowflake ID; 0 to the layout's maximum (31 by default)")
	d.Var(&sf.workers, "worker-ids", "A-B",
		"the pool this node claims its worker ID from: a range `A-B` or one ID `N`, of at most 65536 IDs "+
			"(a layout of more than 16 worker bits needs a range)").
		defaultText("every worker ID of the layout outside `--lease-api-worker-ids`, `0-31` with the default layout and no lease API pool")
	d.Var(&sf.bits, "layout", "T/D/W/S|PRESET",
		"bit widths of time/datacenter/worker/sequence, or a preset; they sum to at most 63 (53 or fewer keep every ID "+
			"a JavaScript number), and the timestamp must last at least 10 more years. "+presetHelp())
	d.Var(&sf.epoch, "epoch", "TIME", "the instant timestamp 0 stands for, RFC 3339")
	d.Duration(&c.Keeper.TTL, "lease-ttl", "D", allocator.DefaultLeaseTTL,
		"worker lease time to live; at least `1s`").positiveValue()
	d.Duration(&c.Keeper.Heartbeat, "heartbeat", "D", 0,
		"interval between lease heartbeats; more than 0 and at most half of `--lease-ttl`, "+
			"so that a failed heartbeat can be tried again before the lease runs out").
		positiveValue().defaultText("a third of `--lease-ttl` (`10s`)")
	d.String(&c.Keeper.Holder, "holder", "NAME", "", "this node's name in the lease table, at most 255 bytes, not starting with `api:` (the lease API's holders)").
		defaultText("`host/pid/random`")
	d.Duration(&sf.retention, "lease-events-retention", "D", app.DefaultLeaseEventsRetention,
		"how long lease events are kept: a background loop deletes older ones, hourly; `0` keeps them forever").
		defaultText("`720h` (30 days)")

	d.group = "Clock and lease policy"
	d.Duration(&c.Keeper.Margin, "lease-margin", "D", 0,
		"taken off the local lease deadline (the monotonic time before a claim or heartbeat was sent plus `--lease-ttl`): "+
			"past it the node issues nothing until a heartbeat succeeds; less than half of `--lease-ttl`").
		positiveValue().defaultText("a tenth of `--lease-ttl` (`3s`)")
	d.Duration(&c.Keeper.MaxClockOffset, "max-clock-offset", "D", allocator.DefaultMaxClockOffset,
		"largest offset of the node's clock from database time, measured at every heartbeat; "+
			"beyond it the node refuses to issue; no committed ceiling lies further than `--lease-ttl` + this "+
			"ahead of database time; at most `1m`").positiveValue()
	d.Duration(&sf.backwardWait, "max-backward-wait", "D", snowflake.DefaultMaxBackwardWait,
		"largest backward clock step a request waits out; a larger one moves the node to another worker ID "+
			"or makes it unready until the clock catches up; `0` never waits; at most `1s`")
	d.Bool(&c.Keeper.RandomSequenceStart, "random-sequence-start", false,
		"start each millisecond's sequence at a random value in the lower half of its range, "+
			"which hides how many IDs a node issues and spreads IDs across shards keyed on their low bits; "+
			"lowers the most IDs per millisecond by a quarter on average")

	d.group = "Segments"
	d.Float(&c.Segments.Threshold, "segment-prefetch-threshold", "F", allocator.DefaultSegmentThreshold,
		"fraction of a namespace's current range consumed before the next range is fetched in the background; "+
			"more than 0 and at most 1").positiveValue()
	d.Duration(&c.Segments.GrowBelow, "segment-grow-below", "D", allocator.DefaultSegmentGrowBelow,
		"a range that lasted less than this doubles the next step (up to the namespace's `max_step`)").
		positiveValue().defaultText("`15m`")
	d.Duration(&c.Segments.ShrinkAbove, "segment-shrink-above", "D", allocator.DefaultSegmentShrinkAbove,
		"a range that lasted more than this halves the next step (down to `min_step`); more than `--segment-grow-below`").
		positiveValue().defaultText("`30m`")

	d.group = "Lease API"
	d.Duration(&c.LeaseAPI.MinTTL, "lease-api-min-ttl", "D", idgen.DefaultLeaseMinTTL,
		"shortest lease the lease API (`/v1/leases`) grants; at least `1s`, whole milliseconds").positiveValue()
	d.Duration(&c.LeaseAPI.MaxTTL, "lease-api-max-ttl", "D", idgen.DefaultLeaseMaxTTL,
		"longest lease the lease API grants; at least `--lease-api-min-ttl`").positiveValue().defaultText("`5m`")
	d.Var(&sf.apiWorkers, "lease-api-worker-ids", "A-B",
		"the pool the lease API grants worker IDs from, in every datacenter: a range `A-B` or one ID `N`, never overlapping `--worker-ids`; "+
			"give every node of a cluster the same two pools").
		defaultText("the worker IDs of the layout outside `--worker-ids` (the larger side); none, so no lease is granted, when neither is set")
	d.Int(&c.LeaseAPI.MaxLeases, "lease-api-max-leases", "N", idgen.DefaultLeaseMaxLeases,
		"most live leases one caller (token) may hold through the lease API; past it an acquire answers 429 `too_many`").positiveValue()
	d.Float(&c.LeaseAPI.AcquireRate, "lease-api-acquire-rate", "R", idgen.DefaultLeaseAcquireRate,
		"acquires per second each caller may send to the lease API, on average, per node; heartbeats and releases are never limited").positiveValue()
	d.Int(&c.LeaseAPI.AcquireBurst, "lease-api-acquire-burst", "N", idgen.DefaultLeaseAcquireBurst,
		"acquires a caller may send at once after a quiet spell").positiveValue()

	d.group = "Callers"
	d.String(&c.AdminToken, "admin-token", "TOKEN", "",
		"bearer token of the admin API under `/admin/`; without one (and without a token with the `admin` scope) "+
			"every `/admin/` route answers 404. With `--tokens-file`, a caller named `admin-token` with the `admin` scope").secretValue()
	d.String(&c.TokensFile, "tokens-file", "PATH", "",
		"the callers' tokens, one per line `NAME SCOPES SHA256HEX` (see `idgen tokens`). With it, `/ids` needs the `ids` scope, "+
			"`/admin/` the `admin` scope and the lease API the `leases` scope. Reloaded when it changes and on SIGHUP; "+
			"a malformed file refuses the start and, on a reload, leaves the tokens in effect. "+
			"`IDGEN_TOKENS` may hold the file's content instead (never reloaded; not both). Without either, `/ids` is open")

	d.Bool(&sf.publicDetails, "public-status-details", false,
		"show every caller of `/readyz` and the status page the lease holders, fencing versions and namespaces; "+
			"a request with a token of the `admin` scope (or the admin token) sees them either way. "+
			"What failed is said in words to all; the store's own error text only to the `admin` scope, and in the log").
		defaultText("on without `--admin-token` and tokens, off with either")
	d.Float(&c.RateLimit.Rate, "rate-limit", "R", 0,
		"IDs per second each caller may take from `/ids`, the compatibility routes and gRPC's IdService (streams "+
			"included), on average, per node; a call that takes none (`/ids/{id}`, `Parse`, the admin API) counts as one. "+
			"Per token name with tokens, else per client address "+
			"(IPv6 by /64); past it the answer is 429 with `Retry-After`. The lease API has its own limit on acquires "+
			"(`--lease-api-acquire-rate`); `0` is off")
	d.Int(&c.RateLimit.Burst, "rate-burst", "N", 0,
		"IDs a caller may take at once after a quiet spell; at least `--max-count`").defaultText("the larger of `--max-count` and `--rate-limit` rounded up")
	d.Int(&c.RateLimit.MaxAddresses, "rate-limit-addresses", "N", idgen.DefaultRateLimitAddresses,
		"most client addresses whose rate is tracked at once (callers without a token); past it, idle ones are forgotten first")

	d.group = "Tracing"
	d.Bool(&c.Tracing.Enabled, "tracing", false,
		"send OpenTelemetry traces over OTLP, configured by the standard `OTEL_EXPORTER_OTLP_*` variables; "+
			"`OTEL_TRACES_EXPORTER=otlp` turns it on too and `OTEL_SDK_DISABLED=true` off")
	d.Float(&c.Tracing.SampleRatio, "trace-sample-ratio", "F", tracing.DefaultRequestSampleRatio,
		"share of requests traced that come without a sampled trace of their caller, 0 to 1, "+
			"unless `OTEL_TRACES_SAMPLER` is set; the node's own lease and segment calls are always traced")

	d.group = "Audit trail"
	d.String(&c.Audit.Sink, "audit-sink", "SINK", "",
		"send an audit record of every lease event (acquire, heartbeat, release, takeover, lost, evict), segment fetch and block of IDs to "+
			"`stdout` or `file:PATH` (JSON lines) or `clickhouse://user:pass@host:8123/db?table=idgen_audit` (its HTTP interface; "+
			"idgen creates the table). Empty: off. Never slows issuance: events wait in a bounded buffer, and past it are dropped and counted").
		maskedBy(audit.RedactSink)
	d.Int(&c.Audit.Settings.Buffer, "audit-buffer", "N", audit.DefaultBuffer,
		fmt.Sprintf("most audit events waiting for the sink (while it is down, say), 1 to %d; past it new events are dropped and counted (`idgen_audit_dropped_total`)", audit.MaxBuffer)).positiveValue()
	d.Int(&c.Audit.Settings.BatchSize, "audit-batch", "N", audit.DefaultBatchSize,
		"most audit events sent in one write; at most `--audit-buffer` (which, when smaller, is the default)").positiveValue()
	d.Duration(&c.Audit.Settings.FlushInterval, "audit-flush-interval", "D", audit.DefaultFlushInterval,
		"longest an audit event waits before its batch is sent").positiveValue()
	d.Duration(&c.Audit.Settings.BlockInterval, "audit-block-interval", "D", audit.DefaultBlockInterval,
		"at most one block record (IDs issued, by holder and lease) per holder per interval; reports in between add up").positiveValue()

	d.group = "Logging"
	d.Var(&sf.logFormat, "log-format", "FORMAT", "`text` (logfmt) or `json`, on stderr")
	d.Var(&sf.logLevel, "log-level", "LEVEL", "`debug`, `info`, `warn` or `error`; `debug` adds one line per request")

	d.group = "Configuration"
	d.String(&sf.c.config, "config", "PATH", "",
		"read settings from this YAML file, whose keys are the flags' names (`lease-ttl: 1m`); "+
			"a flag or a variable beats the file").notInFile()
	d.Bool(&sf.c.printConfig, "print-config", false,
		"print the configuration in effect, as a file for `--config` with where each value came from, "+
			"the DSN's password and the tokens masked, and exit without starting").notInFile()

	sf.c.clock.define(d)
	return sf
}

// parseServe parses and validates serve's flags, environment and file.
func parseServe(args []string, e env) (serveConfig, error) {
	const cmd = "serve"
	sf := newServeFlags()
	pos, err := sf.f.parse(args, e)
	if err != nil {
		return serveConfig{}, err
	}
	if err := noArgs(cmd, pos, "serve takes flags only"); err != nil {
		return serveConfig{}, err
	}
	if err := sf.f.checkPositive(); err != nil {
		return serveConfig{}, err
	}
	// Resolved in place so --print-config shows the values in force.
	c := &sf.c
	switch {
	case sf.retention < 0:
		return serveConfig{}, usagef(cmd, "invalid --lease-events-retention %s (%s): want 0 (keep forever) or more", sf.retention, envName("lease-events-retention"))
	case sf.retention == 0:
		c.app.LeaseEventsRetention = app.KeepLeaseEvents
	default:
		c.app.LeaseEventsRetention = sf.retention
	}
	switch {
	case sf.backwardWait < 0:
		return serveConfig{}, usagef(cmd, "invalid --max-backward-wait %s (%s): want 0 (never wait) or more", sf.backwardWait, envName("max-backward-wait"))
	case sf.backwardWait == 0:
		c.app.Keeper.MaxBackwardWait = -1 // never wait
	default:
		c.app.Keeper.MaxBackwardWait = sf.backwardWait
	}
	switch {
	case sf.drainWindow < 0:
		return serveConfig{}, usagef(cmd, "invalid --drain-window %s (%s): want 0 (none) or more", sf.drainWindow, envName("drain-window"))
	case sf.drainWindow == 0:
		c.app.DrainWindow = app.NoDrainWindow
	default:
		c.app.DrainWindow = sf.drainWindow
	}
	c.app.EtcdCompactRetention = sf.compact.d
	if !sf.f.isSet("audit-batch") {
		// The default batch is at most the buffer.
		c.app.Audit.Settings.BatchSize = min(c.app.Audit.Settings.BatchSize, c.app.Audit.Settings.Buffer)
	}
	// IDGEN_TOKENS is a tokens file's content; it has no flag.
	c.app.Tokens = e.getenv("IDGEN_TOKENS")
	// The OTEL_* variables come from the command's environment too.
	c.app.Tracing.Getenv = e.getenv
	if c.app.Tokens != "" && c.app.TokensFile != "" {
		return serveConfig{}, usagef(cmd, "tokens given twice: use --tokens-file (IDGEN_TOKENS_FILE) or IDGEN_TOKENS, not both")
	}
	if c.addrFile != "" {
		// Refused before the node claims a lease.
		if fi, err := os.Stat(filepath.Dir(c.addrFile)); err != nil || !fi.IsDir() {
			return serveConfig{}, usagef(cmd, "invalid --addr-file %q: its directory does not exist", c.addrFile)
		}
	}
	c.logFormat = sf.logFormat.v
	if err := c.logLevel.UnmarshalText([]byte(sf.logLevel.v)); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --log-level: %v", err)
	}
	if sf.f.isSet("public-status-details") {
		c.app.PublicStatusDetails = &sf.publicDetails
	}
	if c.app.Keeper.Layout, err = layoutOf(sf.bits, sf.epoch); err != nil {
		return serveConfig{}, usagef(cmd, "invalid --layout/--epoch: %v", err)
	}
	c.app.Formats = sf.formats.m
	if sf.workers.set {
		r := sf.workers.r
		c.app.Keeper.WorkerIDs = &r
	}
	if sf.apiWorkers.set {
		r := sf.apiWorkers.r
		c.app.LeaseAPI.WorkerIDs = &r
	}
	// Resolved so an omitted heartbeat and margin show as shares of the ttl.
	if c.app.Keeper, err = c.app.Keeper.Resolve(); err != nil {
		return serveConfig{}, fieldUsage(cmd, err)
	}
	if c.app.LeaseAPI, c.app.Keeper, err = c.app.LeaseAPI.Resolve(c.app.Keeper); err != nil {
		return serveConfig{}, fieldUsage(cmd, err)
	}
	if c.app.Segments, err = c.app.Segments.Resolve(); err != nil {
		return serveConfig{}, fieldUsage(cmd, err)
	}
	if err := c.app.Validate(); err != nil {
		return serveConfig{}, fieldUsage(cmd, err)
	}
	if c.printConfig {
		// Shown as the pools in force.
		if r := c.app.Keeper.WorkerIDs; r != nil {
			sf.workers = workerRangeFlag{r: *r, set: true}
		} else {
			sf.workers = workerRangeFlag{r: allocator.WorkerRange{Min: 0, Max: c.app.Keeper.Layout.MaxWorker()}, set: true}
		}
		if r := c.app.LeaseAPI.WorkerIDs; r != nil {
			sf.apiWorkers = workerRangeFlag{r: *r, set: true}
		}
		if c.app.Keeper.MaxBackwardWait < 0 {
			sf.backwardWait = 0
		}
		sf.publicDetails = c.app.StatusDetailsPublic() // as in force
		c.printed = sf.f.printConfig(c.app.Tokens != "")
	}
	return *c, nil
}

// newLogger returns the logger of format "text" or "json" on w.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runServe(ctx context.Context, args []string, e env) error {
	c, err := parseServe(args, e)
	if err != nil {
		return err
	}
	sc := newScrubber(c.app.DSN, c.app.AdminToken)
	if c.printConfig {
		_, err := io.WriteString(e.stdout, sc.scrub(c.printed))
		return err
	}
	if err := serve(ctx, c, newLogger(sc.writer(e.stderr), c.logFormat, c.logLevel), e.hangups, e.hurry); err != nil {
		return sc.err(flagWorded{err})
	}
	return nil
}

// serve runs a node until ctx is cancelled, drains it until its window or
// hurry ends (nil in tests), and shuts it down. --addr-file is written once
// listening and removed at start and exit.
func serve(ctx context.Context, c serveConfig, log *slog.Logger, hangups func(chan<- os.Signal) func(), hurry context.Context) (err error) {
	if c.addrFile != "" {
		if err := removeAddrFile(c.addrFile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, removeAddrFile(c.addrFile)) }()
	}
	// Test clock builds only; stopped after the node, which reads it.
	clock, stopClock := c.clock.start(log)
	defer stopClock()

	// SIGHUP is caught from here, so one sent during start does not end
	// the process; it is acted on once the node is open.
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
		if hurry == nil {
			hurry = context.WithoutCancel(ctx)
		}
		_ = a.Drain(hurry) // ended early by a second signal, which it logs
	case err = <-serveErr: // the listener failed
	}
	// Close waits for Serve to return; after a shutdown it returns nil.
	return errors.Join(err, a.Close(context.WithoutCancel(ctx)))
}

// reloadOnHangup reloads a's tokens at every SIGHUP until stop, which waits
// for a reload under way.
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
