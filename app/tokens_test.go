package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

const (
	alphaSecret = "alpha-secret-0123456789abcdef"
	betaSecret  = "beta-secret-0123456789abcdef"
	gammaSecret = "gamma-secret-0123456789abcdef"
	// rawSecret is what a careless operator pastes in place of a hash.
	rawSecret = "hunter2-pasted-raw-secret"
)

func line(name, secret string) string {
	return name + " ids " + idgen.HashSecret(secret) + "\n"
}

// writeFile replaces path's content at once, as an editor or a
// configuration tool does (a new file renamed over the old one).
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// idsStatus returns the status of GET /ids with secret as the bearer token.
func idsStatus(t *testing.T, base, secret string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/ids", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// metric returns the value of an unlabelled metric on /metrics, -1 when it
// is absent.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

// TestTokensReload checks that a node picks up a changed tokens file by
// itself, keeps its tokens when the new file is malformed or gone (logging
// and counting it once, however often it looks), and takes a fixed file
// again.
func TestTokensReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, line("alpha", alphaSecret))
	logs := &testserver.LogBuffer{}
	s := testserver.MustStart(t, testserver.Options{
		TokensFile:           path,
		TokensReloadInterval: 10 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(logs, nil)),
	})
	if got := idsStatus(t, s.URL, alphaSecret); got != 200 {
		t.Fatalf("alpha before the change: got %d, want 200", got)
	}
	if got := idsStatus(t, s.URL, betaSecret); got != 401 {
		t.Fatalf("beta before the change: got %d, want 401", got)
	}
	if got := metric(t, s.URL, "idgen_tokens"); got != 1 {
		t.Errorf("idgen_tokens: got %v, want 1", got)
	}

	// A valid change is picked up.
	writeFile(t, path, "# alpha is gone\n"+line("beta", betaSecret))
	testkit.WaitFor(t, waitBound, "beta accepted", func() bool { return idsStatus(t, s.URL, betaSecret) == 200 })
	if got := idsStatus(t, s.URL, alphaSecret); got != 401 {
		t.Errorf("alpha after its removal: got %d, want 401", got)
	}
	if got := metric(t, s.URL, "idgen_tokens_reloads_total"); got != 1 {
		t.Errorf("idgen_tokens_reloads_total: got %v, want 1", got)
	}

	// A malformed change keeps the tokens in effect, and is logged with
	// its line, once.
	writeFile(t, path, line("beta", betaSecret)+line("gamma", gammaSecret)+"delta ids "+rawSecret+"\n")
	testkit.WaitFor(t, waitBound, "the malformed file counted", func() bool { return metric(t, s.URL, "idgen_tokens_reload_errors_total") == 1 })
	if got := idsStatus(t, s.URL, betaSecret); got != 200 {
		t.Errorf("beta after a malformed change: got %d, want 200", got)
	}
	if got := idsStatus(t, s.URL, gammaSecret); got != 401 {
		t.Errorf("gamma of the malformed file: got %d, want 401", got)
	}
	wantLog := path + ":3: the third field is not a SHA-256"
	if !strings.Contains(logs.String(), wantLog) {
		t.Errorf("log: want %q, got\n%s", wantLog, logs.String())
	}
	// Looking again and again at the same malformed file adds nothing; a
	// forced reload (SIGHUP) reports it again.
	time.Sleep(100 * time.Millisecond) // ten looks; a count of one below does not rest on how many
	if got := metric(t, s.URL, "idgen_tokens_reload_errors_total"); got != 1 {
		t.Errorf("idgen_tokens_reload_errors_total after more looks: got %v, want 1", got)
	}
	err := s.ReloadTokens()
	if err == nil || !strings.Contains(err.Error(), path+":3:") {
		t.Errorf("ReloadTokens of the malformed file: got %v, want an error naming %s:3", err, path)
	}
	if got := metric(t, s.URL, "idgen_tokens_reload_errors_total"); got != 2 {
		t.Errorf("idgen_tokens_reload_errors_total after ReloadTokens: got %v, want 2", got)
	}

	// A file gone keeps the tokens too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitBound, "the missing file counted", func() bool { return metric(t, s.URL, "idgen_tokens_reload_errors_total") == 3 })
	if got := idsStatus(t, s.URL, betaSecret); got != 200 {
		t.Errorf("beta with the file gone: got %d, want 200", got)
	}

	// Fixed: taken.
	writeFile(t, path, line("beta", betaSecret)+line("gamma", gammaSecret))
	testkit.WaitFor(t, waitBound, "gamma accepted", func() bool { return idsStatus(t, s.URL, gammaSecret) == 200 })
	if got := metric(t, s.URL, "idgen_tokens"); got != 2 {
		t.Errorf("idgen_tokens: got %v, want 2", got)
	}
	if strings.Contains(logs.String(), rawSecret) {
		t.Errorf("the log holds what may be a secret:\n%s", logs.String())
	}
	for _, secret := range []string{alphaSecret, betaSecret, gammaSecret} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the secret %s", secret)
		}
	}
}

// TestReloadTokensNow checks ReloadTokens, what SIGHUP calls: the change
// takes effect when it returns, without waiting for the next look.
func TestReloadTokensNow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, line("alpha", alphaSecret))
	s := testserver.MustStart(t, testserver.Options{TokensFile: path, TokensReloadInterval: time.Hour})
	writeFile(t, path, line("beta", betaSecret))
	if got := idsStatus(t, s.URL, betaSecret); got != 401 {
		t.Fatalf("beta before ReloadTokens: got %d, want 401 (the next look is an hour away)", got)
	}
	if err := s.ReloadTokens(); err != nil {
		t.Fatalf("ReloadTokens: got %v, want nil", err)
	}
	if got := idsStatus(t, s.URL, betaSecret); got != 200 {
		t.Errorf("beta after ReloadTokens: got %d, want 200", got)
	}
	if got := idsStatus(t, s.URL, alphaSecret); got != 401 {
		t.Errorf("alpha after ReloadTokens: got %d, want 401", got)
	}
	// Unchanged: nothing to do, no error.
	if err := s.ReloadTokens(); err != nil {
		t.Errorf("ReloadTokens of an unchanged file: got %v, want nil", err)
	}

	// Nodes whose tokens come from no file have nothing to reload.
	for name, o := range map[string]testserver.Options{
		"no tokens":    {},
		"IDGEN_TOKENS": {Tokens: line("alpha", alphaSecret)},
	} {
		if err := testserver.MustStart(t, o).ReloadTokens(); !errors.Is(err, app.ErrNoTokensFile) {
			t.Errorf("%s: ReloadTokens got %v, want ErrNoTokensFile", name, err)
		}
	}
}

func TestValidateTokens(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(line("alpha", alphaSecret)+"beta ids,admin,ids "+idgen.HashSecret(betaSecret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(line("alpha", alphaSecret)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*app.Config)
		want   string
	}{
		{"file malformed", func(c *app.Config) { c.TokensFile = bad }, bad + ":2: scope ids listed twice"},
		{"file missing", func(c *app.Config) { c.TokensFile = filepath.Join(dir, "nope") }, "tokens file: open"},
		{"content malformed", func(c *app.Config) { c.Tokens = "alpha ids " + rawSecret }, "IDGEN_TOKENS:1: the third field is not a SHA-256"},
		{"both", func(c *app.Config) { c.TokensFile, c.Tokens = good, line("alpha", alphaSecret) }, "invalid Config.TokensFile and Config.Tokens: tokens given twice"},
		{"negative reload interval", func(c *app.Config) { c.TokensReloadInterval = -time.Second }, "invalid Config.TokensReloadInterval -1s"},
		{"negative prune interval", func(c *app.Config) { c.LeaseEventsPruneInterval = -time.Second }, "invalid Config.LeaseEventsPruneInterval -1s"},
	} {
		c := app.Config{DSN: "sqlite:" + filepath.Join(dir, "untouched.db")}
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate got %v, want an error containing %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), rawSecret) {
			t.Errorf("%s: the error quotes what may be a secret: %v", tc.name, err)
		}
		if a, err := app.Open(context.Background(), c); err == nil || a != nil {
			t.Errorf("%s: Open got %v, %v; want no App and an error", tc.name, a, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "untouched.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused configuration touched the database: %v", err)
	}
	if err := (app.Config{DSN: "sqlite:x.db", TokensFile: good}).Validate(); err != nil {
		t.Errorf("Validate with a good tokens file: got %v, want nil", err)
	}
}

// failingPrune is a store whose lease events cannot be pruned.
type failingPrune struct{ stores.Store }

func (failingPrune) PruneLeaseEvents(context.Context, time.Time) (int64, error) {
	return 0, errors.New("injected: connection refused")
}

// TestLeaseEventsPruned checks the retention loop on every database: events
// older than the retention go, the count is logged and exported; a failing
// prune is counted and changes nothing else; a retention of forever runs
// no loop.
func TestLeaseEventsPruned(t *testing.T) {
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			logs := &testserver.LogBuffer{}
			store := testserver.OpenStore(t, dialect)
			// Another holder's claim and release: two events, besides the
			// node's own claim.
			release := testserver.HoldWorker(t, store, 9)
			release()
			s := testserver.MustStart(t, testserver.Options{
				Store:                    store,
				LeaseEventsRetention:     time.Millisecond,
				LeaseEventsPruneInterval: 20 * time.Millisecond,
				Logger:                   slog.New(slog.NewTextHandler(logs, nil)),
			})
			// The count is added once a prune returns, after its deletions
			// show: wait for the count.
			testkit.WaitFor(t, waitBound, "three events pruned", func() bool { return metric(t, s.URL, "idgen_lease_events_pruned_total") >= 3 })
			if got := metric(t, s.URL, "idgen_lease_events_pruned_total"); got != 3 {
				t.Errorf("idgen_lease_events_pruned_total: got %v, want 3", got)
			}
			evs, err := store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Limit: 10})
			if err != nil || len(evs) != 0 {
				t.Errorf("events after pruning: got %+v (%v), want none", evs, err)
			}
			if !regexp.MustCompile(`msg="lease events pruned" pruned=[1-3] `).MatchString(logs.String()) {
				t.Errorf("log: want the pruned count, got\n%s", logs.String())
			}
		})
	}
	t.Run("failing", func(t *testing.T) {
		store := failingPrune{testserver.OpenStore(t, "sqlite")}
		s := testserver.MustStart(t, testserver.Options{Store: store, LeaseEventsRetention: time.Millisecond, LeaseEventsPruneInterval: 20 * time.Millisecond})
		testkit.WaitFor(t, waitBound, "the failure counted", func() bool { return metric(t, s.URL, "idgen_lease_events_prune_errors_total") >= 1 })
		if got := idsStatus(t, s.URL, ""); got != 401 && got != 200 {
			t.Errorf("GET /ids while pruning fails: got %d", got)
		}
		evs, err := store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Limit: 10})
		if err != nil || len(evs) != 1 {
			t.Errorf("events: got %d (%v), want the node's claim", len(evs), err)
		}
	})
	t.Run("forever", func(t *testing.T) {
		logs := &testserver.LogBuffer{}
		s := testserver.MustStart(t, testserver.Options{LeaseEventsRetention: app.KeepLeaseEvents, LeaseEventsPruneInterval: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if got := metric(t, s.URL, "idgen_lease_events_pruned_total"); got != -1 {
			t.Errorf("idgen_lease_events_pruned_total: got %v, want no such metric (no loop)", got)
		}
		if !strings.Contains(logs.String(), "lease events are kept forever") {
			t.Errorf("log: want the retention named, got\n%s", logs.String())
		}
	})
}
