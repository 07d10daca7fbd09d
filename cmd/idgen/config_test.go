package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// writeConfig writes a configuration file into a test directory.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idgen.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedence: for each of several settings, a flag beats its
// variable, which beats the file, which beats the default; and
// --print-config names where the value in force came from.
func TestConfigPrecedence(t *testing.T) {
	// One file sets every key of the table.
	file := writeConfig(t, `
listen: 127.0.0.1:7001
lease-ttl: 40s
max-count: 300
segment-prefetch-threshold: 0.3
log-format: json
migrate: false
max-clock-offset: 3s
random-sequence-start: true
`)
	type key struct {
		name string
		get  func(c serveConfig) string
		// The value of the default, the file, the variable and the flag.
		def, file, env, flag string
	}
	keys := []key{
		{"listen", func(c serveConfig) string { return c.app.Listen }, "127.0.0.1:8080", "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"},
		{"lease-ttl", func(c serveConfig) string { return c.app.Keeper.TTL.String() }, "30s", "40s", "50s", "1m0s"},
		{"max-count", func(c serveConfig) string { return itoa(c.app.MaxCount) }, "10000", "300", "400", "500"},
		{"segment-prefetch-threshold", func(c serveConfig) string { return ftoa(c.app.Segments.Threshold) }, "0.1", "0.3", "0.4", "0.5"},
		{"log-format", func(c serveConfig) string { return c.logFormat }, "text", "json", "text", "json"},
		{"migrate", func(c serveConfig) string { return btoa(c.app.Migrate) }, "true", "false", "true", "false"},
		{"max-clock-offset", func(c serveConfig) string { return c.app.Keeper.MaxClockOffset.String() }, "5s", "3s", "2s", "1s"},
		{"random-sequence-start", func(c serveConfig) string { return btoa(c.app.Keeper.RandomSequenceStart) }, "false", "true", "false", "true"},
	}
	for _, tc := range []struct {
		name                string
		withFile, env, flag bool
		want                func(k key) (value, from string)
	}{
		{"default", false, false, false, func(k key) (string, string) { return k.def, "default" }},
		{"file", true, false, false, func(k key) (string, string) { return k.file, "file" }},
		{"environment beats file", true, true, false, func(k key) (string, string) { return k.env, envName(k.name) }},
		{"flag beats environment and file", true, true, true, func(k key) (string, string) { return k.flag, "--" + k.name }},
		{"flag beats file", true, false, true, func(k key) (string, string) { return k.flag, "--" + k.name }},
		{"environment without file", false, true, false, func(k key) (string, string) { return k.env, envName(k.name) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{}
			var args []string
			if tc.withFile {
				vars["IDGEN_CONFIG"] = file // the file named by its variable
			}
			for _, k := range keys {
				if tc.env {
					vars[envName(k.name)] = k.env
				}
				if tc.flag {
					args = append(args, "--"+k.name+"="+k.flag)
				}
			}
			c, err := parseServe(args, envOf(vars))
			if err != nil {
				t.Fatalf("parseServe(%q, %v): %v", args, vars, err)
			}
			r := cli(t, vars, append([]string{"serve", "--print-config"}, args...)...)
			if r.code != 0 {
				t.Fatalf("serve --print-config: got exit code %d, stderr %q; want 0", r.code, r.stderr)
			}
			for _, k := range keys {
				value, from := tc.want(k)
				if got := k.get(c); got != value {
					t.Errorf("%s: got %s, want %s", k.name, got, value)
				}
				if line := printedLine(r.stdout, k.name); !strings.HasSuffix(line, "# "+from) {
					t.Errorf("%s: --print-config got %q, want it to say it came from %s", k.name, line, from)
				}
			}
		})
	}
}

// TestConfigFileFlag: --config on the command line beats IDGEN_CONFIG.
func TestConfigFileFlag(t *testing.T) {
	a, b := writeConfig(t, "datacenter: 3\n"), writeConfig(t, "datacenter: 4\n")
	c, err := parseServe([]string{"--config", b}, envOf(map[string]string{"IDGEN_CONFIG": a}))
	if err != nil {
		t.Fatal(err)
	}
	if c.app.Keeper.DatacenterID != 4 || c.config != b {
		t.Errorf("got datacenter %d from %q, want 4 from %q", c.app.Keeper.DatacenterID, c.config, b)
	}
}

// TestPolicySettings: the clock, lease and segment policy reach the keeper
// and segment settings, resolved.
func TestPolicySettings(t *testing.T) {
	c, err := parseServe([]string{"--lease-ttl", "20s", "--lease-margin", "1500ms", "--max-clock-offset", "750ms",
		"--max-backward-wait", "40ms", "--random-sequence-start", "--segment-prefetch-threshold", "0.25",
		"--segment-grow-below", "5m", "--segment-shrink-above", "1h"}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	k, s := c.app.Keeper, c.app.Segments
	if k.Margin != 1500*time.Millisecond || k.MaxClockOffset != 750*time.Millisecond || k.MaxBackwardWait != 40*time.Millisecond ||
		!k.RandomSequenceStart || s.Threshold != 0.25 || s.GrowBelow != 5*time.Minute || s.ShrinkAbove != time.Hour {
		t.Errorf("got keeper %+v, segments %+v; want the policy given", k, s)
	}
	c, err = parseServe(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	k, s = c.app.Keeper, c.app.Segments
	if k.Margin != 3*time.Second || k.MaxClockOffset != allocator.DefaultMaxClockOffset || k.MaxBackwardWait != 10*time.Millisecond ||
		k.RandomSequenceStart || s.Threshold != 0.1 || s.GrowBelow != 15*time.Minute || s.ShrinkAbove != 30*time.Minute {
		t.Errorf("got keeper %+v, segments %+v; want the documented defaults", k, s)
	}
	c, err = parseServe([]string{"--max-backward-wait", "0"}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.app.Keeper.MaxBackwardWait >= 0 {
		t.Errorf("--max-backward-wait 0: got MaxBackwardWait %s, want negative (never wait)", c.app.Keeper.MaxBackwardWait)
	}
}

// TestConfigBadValues: every bad value, from a flag, a variable or the
// file, is one line and exit code 2, and nothing starts: the database named
// is never created.
func TestConfigBadValues(t *testing.T) {
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "untouched.db")
	base := map[string]string{"IDGEN_DSN": "sqlite:" + dbFile}
	file := func(content string) []string { return []string{"--config", writeConfig(t, content)} }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"lease-margin zero", []string{"--lease-margin", "0"}, nil, "invalid --lease-margin 0s (IDGEN_LEASE_MARGIN): want more than 0"},
		{"lease-margin half the ttl", []string{"--lease-margin", "15s"}, nil, "invalid --lease-margin 15s: want at least 0 and less than half of --lease-ttl 30s"},
		{"lease-margin negative", []string{"--lease-margin=-1s"}, nil, "invalid --lease-margin -1s"},
		{"lease-margin not a duration", []string{"--lease-margin", "soon"}, nil, "lease-margin"},
		{"max-clock-offset zero", []string{"--max-clock-offset", "0s"}, nil, "invalid --max-clock-offset 0s"},
		{"max-clock-offset negative", []string{"--max-clock-offset=-2s"}, nil, "invalid --max-clock-offset -2s: want at least 0"},
		{"max-backward-wait negative", []string{"--max-backward-wait=-1ms"}, nil, "invalid --max-backward-wait -1ms (IDGEN_MAX_BACKWARD_WAIT): want 0 (never wait) or more"},
		{"max-backward-wait too long", []string{"--max-backward-wait", "2s"}, nil, "invalid --max-backward-wait 2s: want at most 1s"},
		{"random-sequence-start not a bool", nil, map[string]string{"IDGEN_RANDOM_SEQUENCE_START": "sometimes"}, "invalid value for IDGEN_RANDOM_SEQUENCE_START"},
		{"prefetch threshold zero", []string{"--segment-prefetch-threshold", "0"}, nil, "invalid --segment-prefetch-threshold 0"},
		{"prefetch threshold above 1", []string{"--segment-prefetch-threshold", "1.5"}, nil, "invalid --segment-prefetch-threshold 1.5: want more than 0 and at most 1"},
		{"prefetch threshold negative", []string{"--segment-prefetch-threshold=-0.1"}, nil, "invalid --segment-prefetch-threshold -0.1"},
		{"prefetch threshold NaN", []string{"--segment-prefetch-threshold", "NaN"}, nil, "invalid --segment-prefetch-threshold NaN"},
		{"prefetch threshold not a number", nil, map[string]string{"IDGEN_SEGMENT_PREFETCH_THRESHOLD": "ten percent"}, "invalid value for IDGEN_SEGMENT_PREFETCH_THRESHOLD"},
		{"grow-below zero", []string{"--segment-grow-below", "0"}, nil, "invalid --segment-grow-below 0s"},
		{"grow-below negative", []string{"--segment-grow-below=-1m"}, nil, "invalid --segment-grow-below -1m0s: want more than 0"},
		{"shrink-above zero", []string{"--segment-shrink-above", "0s"}, nil, "invalid --segment-shrink-above 0s"},
		{"windows crossed", []string{"--segment-grow-below", "40m"}, nil, "invalid --segment-grow-below 40m0s: want less than --segment-shrink-above 30m0s"},
		{"windows equal", []string{"--segment-grow-below", "10m", "--segment-shrink-above", "10m"}, nil, "want less than --segment-shrink-above 10m0s"},
		{"rate-limit negative", []string{"--rate-limit=-1"}, nil, "invalid --rate-limit -1: want IDs per second"},
		{"rate-limit not a number", nil, map[string]string{"IDGEN_RATE_LIMIT": "lots"}, "invalid value for IDGEN_RATE_LIMIT"},
		{"rate-burst negative", []string{"--rate-limit", "10", "--rate-burst=-1"}, nil, "invalid --rate-burst -1: want 0 (the default) or more"},
		{"rate-limit-addresses negative", []string{"--rate-limit", "10", "--rate-limit-addresses=-5"}, nil, "invalid --rate-limit-addresses -5: want 0 (the default) or more"},
		{"trace-sample-ratio above 1", []string{"--trace-sample-ratio", "2"}, nil, "invalid --trace-sample-ratio 2: want 0 to 1"},
		{"tracing not a bool", file("tracing: maybe\n"), nil, "invalid value for tracing"},
		{"config file missing", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, "cannot read the configuration file"},
		{"config file from the environment missing", nil, map[string]string{"IDGEN_CONFIG": filepath.Join(dir, "nope.yaml")}, "cannot read the configuration file"},
		{"config file not YAML", file("lease-ttl: [30s\n"), nil, "configuration file"},
		{"config file unknown key", file("lease_ttl: 30s\n"), nil, `unknown key "lease_ttl"`},
		{"config file nested key", file("lease:\n  ttl: 30s\n"), nil, `unknown key "lease.ttl"`},
		{"config file list", file("lease-ttl: [30s, 40s]\n"), nil, "invalid value for lease-ttl: want one value"},
		{"config file not a map", file("lease-ttl 30s\n"), nil, "want a map of settings"},
		{"config file names a config", file("config: other.yaml\n"), nil, `unknown key "config"`},
		{"config file print-config", file("print-config: true\n"), nil, `unknown key "print-config"`},
		{"config file bad duration", file("lease-ttl: soon\n"), nil, "invalid value for lease-ttl"},
		{"config file empty value", file("heartbeat:\n"), nil, "invalid value for heartbeat"},
		{"config file zero ttl", file("lease-ttl: 0s\n"), nil, "invalid --lease-ttl 0s"},
		{"config file bad layout", file("layout: 41/5/5/13\n"), nil, "bit widths sum to 64"},
		{"config file bad threshold", file("segment-prefetch-threshold: 2\n"), nil, "invalid --segment-prefetch-threshold 2"},
		{"config file bad dsn", file("dsn: redis://h:6379\n"), map[string]string{"IDGEN_DSN": ""}, "want postgres://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, mergeVars(base, tc.env), append([]string{"serve"}, tc.args...)...)
			if r.code != 2 {
				t.Fatalf("idgen serve %q: got exit code %d, want 2 (stderr %q)", tc.args, r.code, r.stderr)
			}
			var ue *usageError
			if !errors.As(r.err, &ue) {
				t.Errorf("got error %T %v, want a *usageError", r.err, r.err)
			}
			got := lines(r.stderr)
			if len(got) != 2 || !strings.HasPrefix(got[0], "idgen: ") || got[1] != "Run 'idgen serve --help' for usage." {
				t.Fatalf("got stderr %q, want one line \"idgen: …\" and the hint", r.stderr)
			}
			if !strings.Contains(got[0], tc.want) {
				t.Errorf("got message %q, want it to contain %q", got[0], tc.want)
			}
			if f := fieldName.FindString(got[0]); f != "" {
				t.Errorf("got message %q, which names the field %s; want its flag", got[0], f)
			}
			if r.stdout != "" {
				t.Errorf("got stdout %q, want nothing", r.stdout)
			}
		})
	}
	if _, err := os.Stat(dbFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bad value touched the database: stat %s: got %v, want not exist", dbFile, err)
	}
}

// TestPrintConfigMasksSecrets: --print-config shows neither the DSN's
// password, nor the admin token, nor IDGEN_TOKENS, wherever they came
// from; and what it prints, read back as the file, gives the same
// configuration.
func TestPrintConfigMasksSecrets(t *testing.T) {
	const (
		password = "pa55w0rd-s3cret"
		admin    = "admin-t0ken-s3cret"
		tokens   = "alice ids 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n"
	)
	file := writeConfig(t, "dsn: postgres://idgen:"+password+"@db.example:5432/idgen?sslmode=disable\nlease-ttl: 45s\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"from the file and a flag", []string{"--config", file, "--admin-token", admin}, nil},
		{"from the environment", []string{"--print-config"}, map[string]string{
			"IDGEN_DSN": "mysql://root:" + password + "@127.0.0.1:3306/idgen", "IDGEN_ADMIN_TOKEN": admin, "IDGEN_TOKENS": tokens}},
		{"password in a parameter", nil, map[string]string{
			"IDGEN_DSN": "postgres://db.example/idgen?password=" + password, "IDGEN_ADMIN_TOKEN": admin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--print-config"}, tc.args...)
			r := cli(t, tc.env, args...)
			if r.code != 0 {
				t.Fatalf("idgen %q: got exit code %d, stderr %q; want 0", args, r.code, r.stderr)
			}
			for _, secret := range []string{password, admin, "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"} {
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("got output holding the secret %q:\n%s", secret, r.stdout)
				}
			}
			if line := printedLine(r.stdout, "admin-token"); !strings.HasPrefix(line, "admin-token: xxxxx") {
				t.Errorf("got %q, want the admin token masked as xxxxx", line)
			}
			if line := printedLine(r.stdout, "dsn"); !strings.Contains(line, "xxxxx") {
				t.Errorf("got %q, want the DSN with its password masked as xxxxx", line)
			}
			if tc.env["IDGEN_TOKENS"] != "" && !strings.Contains(r.stdout, "# tokens: xxxxx") {
				t.Errorf("got\n%s\nwant a line saying IDGEN_TOKENS holds (masked) tokens", r.stdout)
			}
		})
	}

	// Round trip: the printed configuration, as the file, is the one in
	// force (but the masked secrets, given again here).
	r := cli(t, map[string]string{"IDGEN_DSN": "sqlite:" + filepath.Join(t.TempDir(), "x.db")},
		"serve", "--print-config", "--config", writeConfig(t, "lease-ttl: 45s\nworker-ids: 3-9\nmax-backward-wait: 0\nholder: node a\n"),
		"--segment-prefetch-threshold", "0.2", "--epoch", "2025-06-01T00:00:00Z")
	if r.code != 0 {
		t.Fatalf("got exit code %d, stderr %q", r.code, r.stderr)
	}
	again := cli(t, nil, "serve", "--print-config", "--config", writeConfig(t, r.stdout))
	if again.code != 0 {
		t.Fatalf("reading back --print-config: got exit code %d, stderr %q", again.code, again.stderr)
	}
	strip := func(s string) string { // the values, without where they came from
		var out []string
		for _, l := range lines(s) {
			out = append(out, strings.TrimSpace(strings.SplitN(l, "  # ", 2)[0]))
		}
		return strings.Join(out, "\n")
	}
	if got, want := strip(again.stdout), strip(r.stdout); got != want {
		t.Errorf("read back, --print-config got\n%s\nwant\n%s", got, want)
	}
	for _, want := range []string{"heartbeat: 15s", "lease-margin: 4.5s", "worker-ids: 3-9", "max-backward-wait: 0s", `holder: "node a"`} {
		if !strings.Contains(r.stdout, want+"  # ") {
			t.Errorf("got\n%s\nwant a line %q", r.stdout, want)
		}
	}
}

// printedLine returns the line of --print-config's output for key.
func printedLine(out, key string) string {
	for _, l := range lines(out) {
		if strings.HasPrefix(l, key+": ") {
			return l
		}
	}
	return ""
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
func btoa(b bool) string    { return strconv.FormatBool(b) }

// TestPublicStatusDetailsDefault: --public-status-details left out is on
// for a node without tokens and without an admin token, off for one with
// either; given, it wins. --print-config shows the value in force.
func TestPublicStatusDetailsDefault(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"no tokens", nil, nil, "public-status-details: true  # default"},
		{"admin token", []string{"--admin-token", "t0ken-of-admin"}, nil, "public-status-details: false  # default"},
		{"tokens", nil, map[string]string{"IDGEN_TOKENS": "orders-api ids " + hash}, "public-status-details: false  # default"},
		{"admin token, given", []string{"--admin-token", "t0ken-of-admin", "--public-status-details"}, nil, "public-status-details: true  # --public-status-details"},
		{"no tokens, refused", nil, map[string]string{"IDGEN_PUBLIC_STATUS_DETAILS": "false"}, "public-status-details: false  # IDGEN_PUBLIC_STATUS_DETAILS"},
	} {
		r := cli(t, tc.vars, append([]string{"serve", "--print-config"}, tc.args...)...)
		if r.code != 0 || !slices.Contains(lines(r.stdout), tc.want) {
			t.Errorf("%s: serve --print-config: got exit code %d, stdout:\n%s\nwant the line %q", tc.name, r.code, r.stdout, tc.want)
		}
	}
}
