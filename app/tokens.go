package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/periodic"
)

// DefaultTokensReloadInterval is the default Config.TokensReloadInterval.
const DefaultTokensReloadInterval = 2 * time.Second

// envTokensSource names the source of Config.Tokens in messages.
const envTokensSource = "IDGEN_TOKENS"

// loadTokens returns c's token set, from Tokens or TokensFile, or nil.
// Errors read "path:line: message".
func loadTokens(c Config) (*idgen.TokenSet, fileState, error) {
	switch {
	case c.Tokens != "":
		set, err := idgen.ParseTokens(envTokensSource, []byte(c.Tokens))
		return set, fileState{}, err
	case c.TokensFile != "":
		st, data, err := readTokensFile(c.TokensFile)
		if err != nil {
			return nil, st, err
		}
		set, err := idgen.ParseTokens(c.TokensFile, data)
		return set, st, err
	}
	return nil, fileState{}, nil
}

// fileState is what the reloader remembers of the file to tell a change.
type fileState struct {
	modTime time.Time
	size    int64
	sum     [sha256.Size]byte
}

// sameStat reports whether fi shows the file as st saw it.
func (st fileState) sameStat(fi os.FileInfo) bool {
	return fi.ModTime().Equal(st.modTime) && fi.Size() == st.size
}

// maxTokensFileRead bounds what is read; ParseTokens has a smaller bound.
const maxTokensFileRead = 4 << 20

func readTokensFile(path string) (fileState, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileState{}, nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileState{}, nil, fmt.Errorf("tokens file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFileRead))
	if err != nil {
		return fileState{}, nil, fmt.Errorf("tokens file: %w", err)
	}
	return fileState{modTime: fi.ModTime(), size: fi.Size(), sum: sha256.Sum256(data)}, data, nil
}

// tokensReloader keeps the API's tokens in step with the tokens file,
// checked every interval and on ReloadTokens. A file that fails to parse
// leaves the tokens as they are and is reported once per distinct content.
type tokensReloader struct {
	path     string
	interval time.Duration
	auth     *idgen.Authorizer
	log      *slog.Logger

	reloads, failures prometheus.Counter
	loaded            prometheus.Gauge

	// mu serializes reloads and guards the fields below.
	mu       sync.Mutex
	seen     fileState // the file as last read, whether it parsed or not
	lastErr  string    // the error of that read, "" when it parsed
	inEffect [sha256.Size]byte

	loop *periodic.Loop // set by start
}

func newTokensReloader(path string, interval time.Duration, auth *idgen.Authorizer, log *slog.Logger, st fileState, set *idgen.TokenSet) *tokensReloader {
	r := &tokensReloader{
		path:     path,
		interval: interval,
		auth:     auth,
		log:      log,
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_tokens_reloads_total",
			Help: "Times the tokens file changed and its new tokens took effect.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idgen_tokens_reload_errors_total",
			Help: "Times a changed tokens file could not be read or parsed; the tokens in effect stayed.",
		}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idgen_tokens",
			Help: "Tokens in effect, from the tokens file (the admin token not counted).",
		}),
		seen:     st,
		inEffect: st.sum,
	}
	r.loaded.Set(float64(set.Len()))
	return r
}

func (r *tokensReloader) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reloads, r.failures, r.loaded}
}

// start starts the loop; stop stops it and waits.
func (r *tokensReloader) start() {
	r.loop = periodic.Start(r.interval, r.interval, func(context.Context) { _ = r.reload(false) })
}

func (r *tokensReloader) stop() {
	if r.loop != nil {
		r.loop.Stop()
	}
}

// reload reads the file if it changed (or with force) and installs its
// tokens if they differ; it returns the error that kept the old ones.
func (r *tokensReloader) reload(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force {
		fi, err := os.Stat(r.path)
		if err == nil && r.seen.sameStat(fi) {
			return nil
		}
	}
	st, data, err := readTokensFile(r.path)
	if err == nil && st.sum == r.inEffect {
		r.seen, r.lastErr = st, ""
		if force {
			r.log.Info("tokens file unchanged", "file", r.path)
		}
		return nil
	}
	var set *idgen.TokenSet
	if err == nil {
		set, err = idgen.ParseTokens(r.path, data)
	}
	if err != nil {
		// Reported once per distinct failure; a forced reload always reports.
		if msg := err.Error(); force || st.sum != r.seen.sum || msg != r.lastErr {
			r.failures.Inc()
			r.log.Error("tokens file refused; the tokens in effect stay", "file", r.path, "err", msg)
			r.lastErr = msg
		}
		r.seen = st
		return err
	}
	r.auth.SetTokens(set)
	r.seen, r.lastErr, r.inEffect = st, "", st.sum
	r.reloads.Inc()
	r.loaded.Set(float64(set.Len()))
	r.log.Info("tokens reloaded", "file", r.path, "tokens", set.Len(), "names", set.Names())
	warnTokens(r.log, set)
	return nil
}

// warnTokens logs what a token set leaves unreachable.
func warnTokens(log *slog.Logger, set *idgen.TokenSet) {
	if !set.Scopes().Has(idgen.ScopeIDs) {
		log.Warn("no token has the ids scope: every /ids request will be refused")
	}
}
