package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// result is what one in-process run of idgen left behind.
type result struct {
	code           int
	stdout, stderr string
	err            error
}

// cli runs idgen in-process as main does, with the environment vars (and
// nothing else), and returns its exit code and output.
func cli(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	return cliCtx(context.Background(), t, vars, args...)
}

// mergeVars returns the environment variables of all sets, a later set's
// value of a variable winning.
func mergeVars(sets ...map[string]string) map[string]string {
	vars := map[string]string{}
	for _, set := range sets {
		maps.Copy(vars, set)
	}
	return vars
}

func cliCtx(ctx context.Context, t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, func(k string) string { return vars[k] }, &stdout, &stderr)
	code := exitCode(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestUsageErrors(t *testing.T) {
	// Every case must fail before touching the database: IDGEN_DSN names a
	// file that must still not exist afterwards.
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "untouched.db")
	base := map[string]string{"IDGEN_DSN": "sqlite:" + dbFile}
	// Tokens files for serve: one that parses, and one malformed at line 3
	// whose hash column holds what looks like a raw secret.
	hash := strings.Repeat("ab", 32)
	goodTokens := filepath.Join(dir, "tokens")
	badTokens := filepath.Join(dir, "bad-tokens")
	for path, content := range map[string]string{
		goodTokens: "orders-api ids " + hash + "\n",
		badTokens:  "# callers\norders-api ids " + hash + "\nbilling ids,leases hunter2-not-a-hash\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // in the message line
		hint string // the command in the hint line
	}{
		{"no command", nil, nil, "no command given", "idgen"},
		{"unknown command", []string{"frobnicate"}, nil, `unknown command "frobnicate"`, "idgen"},
		{"flag before command", []string{"--nope"}, nil, "unknown flag --nope", "idgen"},
		{"help of unknown command", []string{"help", "frobnicate"}, nil, `unknown command "frobnicate"`, "idgen"},
		{"unknown flag", []string{"serve", "--nope"}, nil, "flag provided but not defined: -nope", "idgen serve"},
		// One parser for every command: a bad value or a missing one reads
		// the same whichever command it is given to.
		{"serve bad value", []string{"serve", "--lease-margin", "soon"}, nil, `invalid value "soon" for flag -lease-margin: parse error`, "idgen serve"},
		{"events bad value", []string{"leases", "events", "--limit", "soon"}, nil, `invalid value "soon" for flag -limit: parse error`, "idgen leases events"},
		{"serve missing value", []string{"serve", "--lease-ttl"}, nil, "flag needs an argument: -lease-ttl", "idgen serve"},
		{"create missing value", []string{"namespaces", "create", "orders", "--step"}, nil, "flag needs an argument: -step", "idgen namespaces create"},
		{"serve bad bool", []string{"serve", "--migrate=perhaps"}, nil, `invalid boolean value "perhaps" for -migrate: parse error`, "idgen serve"},
		{"serve argument", []string{"serve", "extra"}, nil, `unexpected argument "extra"`, "idgen serve"},
		{"worker-ids reversed", []string{"serve", "--worker-ids", "7-3"}, nil, "range 7-3 is empty", "idgen serve"},
		{"worker-ids not a range", []string{"serve", "--worker-ids", "abc"}, nil, "want a range of worker IDs", "idgen serve"},
		{"worker-ids negative", []string{"serve", "--worker-ids", "-1-3"}, nil, "want a range of worker IDs", "idgen serve"},
		{"worker-ids beyond layout", []string{"serve", "--worker-ids", "0-32"}, nil, "the layout allows 0 to 31", "idgen serve"},
		{"worker-ids default pool too large", []string{"serve", "--layout", "41/0/17/5"}, nil, "--worker-ids", "idgen serve"},
		{"worker-ids pool too large", []string{"serve", "--layout", "41/0/17/5", "--worker-ids", "0-65536"}, nil, "at most 65536", "idgen serve"},
		{"worker-ids beyond custom layout", []string{"serve", "--layout", "41/5/4/13", "--worker-ids", "16"}, nil, "the layout allows 0 to 15", "idgen serve"},
		{"layout sum", []string{"serve", "--layout", "41/5/5/13"}, nil, "bit widths sum to 64, want at most 63", "idgen serve"},
		{"layout three parts", []string{"serve", "--layout", "41/10/12"}, nil, "want four bit widths", "idgen serve"},
		{"layout unknown preset", []string{"serve", "--layout", "js52"}, nil, "or a preset: classic, js53", "idgen serve"},
		{"layout not numbers", []string{"serve", "--layout", "x/5/5/12"}, nil, `bit width "x"`, "idgen serve"},
		{"layout too short-lived", []string{"serve", "--layout", "30/5/5/23"}, nil, "invalid --layout/--epoch", "idgen serve"},
		{"epoch not a time", []string{"serve", "--epoch", "yesterday"}, nil, "RFC 3339", "idgen serve"},
		{"datacenter beyond layout", []string{"serve", "--datacenter", "32"}, nil, "the layout allows 0 to 31", "idgen serve"},
		{"heartbeat too long", []string{"serve", "--heartbeat", "20s"}, nil, "invalid --heartbeat 20s: want more than 0 and at most half of --lease-ttl 30s", "idgen serve"},
		{"heartbeat too long for the ttl", []string{"serve", "--lease-ttl", "2s", "--heartbeat", "1001ms"}, nil, "invalid --heartbeat 1.001s: want more than 0 and at most half of --lease-ttl 2s", "idgen serve"},
		{"heartbeat negative", []string{"serve", "--heartbeat", "-1s"}, nil, "invalid --heartbeat -1s", "idgen serve"},
		{"lease-ttl too short", []string{"serve", "--lease-ttl", "10ms"}, nil, "invalid --lease-ttl 10ms: want at least 1s", "idgen serve"},
		{"lease-ttl just too short", []string{"serve", "--lease-ttl", "999ms"}, nil, "want at least 1s", "idgen serve"},
		{"holder too long", []string{"serve", "--holder", strings.Repeat("h", 256)}, nil, "invalid --holder of 256 bytes: want at most 255", "idgen serve"},
		{"max-count zero", []string{"serve", "--max-count", "0"}, nil, "invalid --max-count 0", "idgen serve"},
		{"max-count negative", []string{"serve", "--max-count", "-1"}, nil, "invalid --max-count -1: want 1 to 262144", "idgen serve"},
		{"max-count above the limit", []string{"serve", "--max-count", "262145"}, nil, "invalid --max-count 262145: want 1 to 262144", "idgen serve"},
		{"max-count of the old limit", []string{"serve", "--max-count", "16777216"}, nil, "want 1 to 262144", "idgen serve"},
		{"lease-ttl zero", []string{"serve", "--lease-ttl", "0"}, nil, "invalid --lease-ttl 0s (IDGEN_LEASE_TTL): want more than 0; leave it out for the default", "idgen serve"},
		{"lease-ttl zero in the environment", []string{"serve"}, map[string]string{"IDGEN_LEASE_TTL": "0s"}, "invalid --lease-ttl 0s", "idgen serve"},
		{"heartbeat zero", []string{"serve", "--heartbeat", "0"}, nil, "invalid --heartbeat 0s (IDGEN_HEARTBEAT): want more than 0; leave it out for the default", "idgen serve"},
		{"heartbeat zero in the environment", []string{"serve"}, map[string]string{"IDGEN_HEARTBEAT": "0"}, "invalid --heartbeat 0s", "idgen serve"},
		{"shutdown-timeout zero", []string{"serve", "--shutdown-timeout", "0s"}, nil, "invalid --shutdown-timeout 0s", "idgen serve"},
		{"shutdown-timeout negative", []string{"serve", "--shutdown-timeout", "-1s"}, nil, "invalid --shutdown-timeout -1s: want more than 0", "idgen serve"},
		{"drain-window negative", []string{"serve", "--drain-window", "-1s"}, nil, "invalid --drain-window -1s (IDGEN_DRAIN_WINDOW): want 0 (none) or more", "idgen serve"},
		{"addr-file in a missing directory", []string{"serve", "--addr-file", "/nonexistent/dir/addr", "--listen", "127.0.0.1:0"}, nil, "invalid --addr-file", "idgen serve"},
		{"log-format", []string{"serve", "--log-format", "xml"}, nil, "want text or json", "idgen serve"},
		{"listen without port", []string{"serve", "--listen", "localhost"}, nil, "want host:port", "idgen serve"},
		{"dsn scheme", []string{"serve", "--dsn", "redis://127.0.0.1:6379"}, nil, "want postgres://, mysql://, sqlite: or etcd://", "idgen serve"},
		{"dsn @ not encoded", []string{"serve", "--dsn", "postgres://alice:abc@s3cret@127.0.0.1:5432/x"}, nil, "write an '@' in a user name, password, database name or parameter as %40", "idgen serve"},
		{"dsn @ not encoded in the environment", []string{"serve"}, map[string]string{"IDGEN_DSN": "etcd://alice:abc@s3cret@127.0.0.1:2379/x"}, "as %40", "idgen serve"},
		{"migrate dsn @ not encoded", []string{"migrate", "up", "--dsn", "mysql://alice:abc@s3cret@127.0.0.1:3306/x"}, nil, "invalid --dsn (not shown)", "idgen migrate"},
		{"leases dsn @ not encoded", []string{"leases"}, map[string]string{"IDGEN_DSN": "postgres://alice:abc/s3cret@127.0.0.1:5432/x"}, "as %40", "idgen leases"},
		{"import from @ not encoded", []string{"namespaces", "import", "leaf", "--from", "mysql://alice:abc@s3cret@127.0.0.1:3306/x"}, nil, "invalid --from (not shown)", "idgen namespaces import"},
		{"bad environment value", []string{"serve"}, map[string]string{"IDGEN_LEASE_TTL": "abc"}, "invalid value for IDGEN_LEASE_TTL", "idgen serve"},
		{"bad environment bool", []string{"serve"}, map[string]string{"IDGEN_MIGRATE": "perhaps"}, "invalid value for IDGEN_MIGRATE", "idgen serve"},
		{"migrate without command", []string{"migrate"}, nil, "want one of up, down or status", "idgen migrate"},
		{"migrate sideways", []string{"migrate", "sideways"}, nil, `unknown migrate command "sideways"`, "idgen migrate"},
		{"leases argument", []string{"leases", "all"}, nil, `unexpected argument "all"`, "idgen leases"},
		{"namespaces without command", []string{"namespaces"}, nil, "want list, create, delete or import", "idgen namespaces"},
		{"namespaces rename", []string{"namespaces", "rename", "orders"}, nil, `unknown namespaces command "rename"`, "idgen namespaces"},
		{"delete missing NAME", []string{"namespaces", "delete"}, nil, "missing namespace NAME", "idgen namespaces delete"},
		{"delete two names", []string{"namespaces", "delete", "a", "b"}, nil, `unexpected argument "b"`, "idgen namespaces delete"},
		{"delete bad NAME", []string{"namespaces", "delete", "Orders!"}, nil, `invalid NAME "Orders!"`, "idgen namespaces delete"},
		{"delete unknown flag", []string{"namespaces", "delete", "orders", "--force"}, nil, "flag provided but not defined: -force", "idgen namespaces delete"},
		{"events argument", []string{"leases", "events", "7"}, nil, `unexpected argument "7"`, "idgen leases events"},
		{"events limit 0", []string{"leases", "events", "--limit", "0"}, nil, "invalid --limit 0: want 1 to 1000", "idgen leases events"},
		{"events limit 1001", []string{"leases", "events", "--limit", "1001"}, nil, "invalid --limit 1001", "idgen leases events"},
		{"events negative after", []string{"leases", "events", "--after", "-1"}, nil, "want a non-negative integer", "idgen leases events"},
		{"events negative worker", []string{"leases", "events", "--worker", "-3"}, nil, "want a non-negative integer", "idgen leases events"},
		{"events worker not a number", []string{"leases", "events", "--worker", "seven"}, nil, "want a non-negative integer", "idgen leases events"},
		{"events bad kind", []string{"leases", "events", "--kind", "stolen"}, nil, `invalid --kind "stolen"`, "idgen leases events"},
		{"events bad since", []string{"leases", "events", "--since", "yesterday"}, nil, "RFC 3339", "idgen leases events"},
		{"events until before since", []string{"leases", "events", "--since", "2026-03-02T00:00:00Z", "--until", "2026-03-01T00:00:00Z"}, nil, "until 2026-03-01T00:00:00Z is before since", "idgen leases events"},
		{"events holder too long", []string{"leases", "events", "--holder", strings.Repeat("h", 256)}, nil, "holder must have at most 255 bytes", "idgen leases events"},
		{"evict nothing", []string{"leases", "evict"}, nil, "want DC WORKER", "idgen leases evict"},
		{"evict one number", []string{"leases", "evict", "0"}, nil, "want DC WORKER", "idgen leases evict"},
		{"evict bad DC", []string{"leases", "evict", "x", "3"}, nil, `invalid DC "x"`, "idgen leases evict"},
		{"evict negative WORKER", []string{"leases", "evict", "0", "--", "-3"}, nil, `invalid WORKER "-3"`, "idgen leases evict"},
		{"evict version 0", []string{"leases", "evict", "0", "3", "--fencing-version", "0"}, nil, "invalid --fencing-version 0", "idgen leases evict"},
		{"evict reason too long", []string{"leases", "evict", "0", "3", "--reason", strings.Repeat("r", 1025)}, nil, "reason of 1025 bytes is longer than 1024", "idgen leases evict"},
		{"restore-fence argument", []string{"restore-fence", "now"}, nil, `unexpected argument "now"`, "idgen restore-fence"},
		{"restore-fence gap 0", []string{"restore-fence", "--gap", "0"}, nil, "invalid --gap 0: want 1 or more", "idgen restore-fence"},
		{"restore-fence negative gap", []string{"restore-fence", "--gap", "-4"}, nil, "invalid --gap -4", "idgen restore-fence"},
		{"restore-fence short ttl", []string{"restore-fence", "--max-ttl", "10ms"}, nil, "invalid --max-ttl 10ms: want at least 1s", "idgen restore-fence"},
		{"restore-fence negative offset", []string{"restore-fence", "--max-clock-offset", "-1s"}, nil, "invalid --max-clock-offset -1s", "idgen restore-fence"},
		{"restore-fence bad up-to", []string{"restore-fence", "--up-to", "yesterday"}, nil, "invalid value \"yesterday\" for flag -up-to", "idgen restore-fence"},
		{"restore-fence up-to 1970", []string{"restore-fence", "--up-to", "1960-01-01T00:00:00Z"}, nil, "invalid --up-to 1960-01-01T00:00:00Z", "idgen restore-fence"},
		{"restore-fence reason too long", []string{"restore-fence", "--reason", strings.Repeat("r", 1025)}, nil, "reason of 1025 bytes is longer than 1024", "idgen restore-fence"},
		{"tokens without command", []string{"tokens"}, nil, "want hash or new", "idgen tokens"},
		{"tokens unknown command", []string{"tokens", "list"}, nil, `unknown tokens command "list"`, "idgen tokens"},
		{"tokens hash argument", []string{"tokens", "hash", "s3cret"}, nil, "give the secret on standard input", "idgen tokens hash"},
		{"tokens hash empty", []string{"tokens", "hash"}, nil, "no secret on standard input", "idgen tokens hash"},
		{"tokens new nothing", []string{"tokens", "new"}, nil, "want NAME SCOPES", "idgen tokens new"},
		{"tokens new no scopes", []string{"tokens", "new", "orders-api"}, nil, "want NAME SCOPES", "idgen tokens new"},
		{"tokens new bad NAME", []string{"tokens", "new", "Orders", "ids"}, nil, `invalid NAME "Orders"`, "idgen tokens new"},
		{"tokens new reserved NAME", []string{"tokens", "new", "admin-token", "admin"}, nil, "admin-token is reserved", "idgen tokens new"},
		{"tokens new bad scope", []string{"tokens", "new", "orders-api", "ids,everything"}, nil, "unknown scope", "idgen tokens new"},
		{"tokens new scope twice", []string{"tokens", "new", "orders-api", "ids,ids"}, nil, "scope ids listed twice", "idgen tokens new"},
		{"serve tokens file missing", []string{"serve", "--tokens-file", filepath.Join(dir, "nope")}, nil, "no such file", "idgen serve"},
		{"serve tokens file malformed", []string{"serve", "--tokens-file", badTokens}, nil, badTokens + ":3: the third field is not a SHA-256", "idgen serve"},
		{"serve tokens file from the environment", []string{"serve"}, map[string]string{"IDGEN_TOKENS_FILE": badTokens}, badTokens + ":3:", "idgen serve"},
		{"serve IDGEN_TOKENS malformed", []string{"serve"}, map[string]string{"IDGEN_TOKENS": "orders-api ids"}, "IDGEN_TOKENS:1: got 2 fields, want 3", "idgen serve"},
		{"serve tokens twice", []string{"serve", "--tokens-file", goodTokens}, map[string]string{"IDGEN_TOKENS": "orders-api ids " + hash}, "tokens given twice", "idgen serve"},
		{"serve negative retention", []string{"serve", "--lease-events-retention", "-1h"}, nil, "invalid --lease-events-retention -1h0m0s", "idgen serve"},
		{"serve bad compact retention", []string{"serve", "--etcd-compact-retention", "weekly"}, nil, "want auto, off or a duration of at least 1s", "idgen serve"},
		{"serve compact retention too short", []string{"serve", "--etcd-compact-retention", "500ms"}, nil, "want auto, off or a duration of at least 1s", "idgen serve"},
		{"create missing NAME", []string{"namespaces", "create"}, nil, "missing namespace NAME", "idgen namespaces create"},
		{"create missing NAME with flags", []string{"namespaces", "create", "--step", "10"}, nil, "missing namespace NAME", "idgen namespaces create"},
		{"create two names", []string{"namespaces", "create", "a", "b"}, nil, `unexpected argument "b"`, "idgen namespaces create"},
		{"create bad NAME", []string{"namespaces", "create", "Orders!"}, nil, `invalid NAME "Orders!"`, "idgen namespaces create"},
		{"create start 0", []string{"namespaces", "create", "orders", "--start", "0"}, nil, "invalid --start 0", "idgen namespaces create"},
		{"create bad mode", []string{"namespaces", "create", "orders", "--mode", "fast"}, nil, "want buffered or strict", "idgen namespaces create"},
		{"create bad fallback", []string{"namespaces", "create", "orders", "--fallback", "uuid"}, nil, "want none or snowflake", "idgen namespaces create"},
		{"create min-step above step", []string{"namespaces", "create", "orders", "--step", "100", "--min-step", "5000"}, nil, "invalid --min-step 5000", "idgen namespaces create"},
		{"create step too large", []string{"namespaces", "create", "orders", "--step", "1073741825"}, nil, "invalid --step 1073741825", "idgen namespaces create"},
		{"create stride 0", []string{"namespaces", "create", "orders", "--stride", "0"}, nil, "invalid --stride 0: want 1 to 65536", "idgen namespaces create"},
		{"create offset at the stride", []string{"namespaces", "create", "orders", "--stride", "2", "--offset", "2"}, nil, "invalid --offset 2: want 0 to the stride minus 1, 1", "idgen namespaces create"},
		{"create offset without a stride", []string{"namespaces", "create", "orders", "--offset", "1"}, nil, "invalid --offset 1", "idgen namespaces create"},
		{"create start whose ID overflows", []string{"namespaces", "create", "orders", "--stride", "2", "--start", "4611686018427387904"}, nil, "invalid --start 4611686018427387904: want at most 4611686018427387903", "idgen namespaces create"},
		{"create max-step below step", []string{"namespaces", "create", "orders", "--step", "50", "--max-step", "10"}, nil, "invalid --max-step 10", "idgen namespaces create"},
		{"list argument", []string{"namespaces", "list", "orders"}, nil, `unexpected argument "orders"`, "idgen namespaces list"},
		{"parse missing ID", []string{"parse"}, nil, "missing ID", "idgen parse"},
		{"parse bad ID", []string{"parse", "abc"}, nil, `invalid ID "abc"`, "idgen parse"},
		{"parse negative ID", []string{"parse", "--", "-5"}, nil, `invalid ID "-5"`, "idgen parse"},
		{"parse two IDs", []string{"parse", "1", "2"}, nil, `unexpected argument "2"`, "idgen parse"},
		{"parse bad layout", []string{"parse", "1", "--layout", "41/5/5/13"}, nil, "bit widths sum to 64", "idgen parse"},
		{"parse above the width", []string{"parse", "9007199254740992", "--layout", "js53"}, nil, "the largest ID of the layout's width", "idgen parse"},
		{"parse not in its format", []string{"parse", "03ADS4J1W00ZA", "--format", "hex"}, nil, "hex IDs of 63 bits have 16", "idgen parse"},
		{"parse unknown format", []string{"parse", "1", "--format", "b64"}, nil, "want one of decimal, base32, base62, hex", "idgen parse"},
		{"compose without time", []string{"compose"}, nil, "missing --time", "idgen compose"},
		{"compose bad time", []string{"compose", "--time", "noon"}, nil, "RFC 3339", "idgen compose"},
		{"compose before the epoch", []string{"compose", "--time", "2025-12-31T23:59:59.999Z"}, nil, "outside the layout's range", "idgen compose"},
		{"compose argument", []string{"compose", "--time", "2026-02-01T00:00:00Z", "x"}, nil, `unexpected argument "x"`, "idgen compose"},
		{"serve bad id format", []string{"serve", "--id-format", "orders=b64"}, nil, "none of decimal, base32, base62, hex", "idgen serve"},
		{"serve id format twice", []string{"serve", "--id-format", "hex,base32"}, nil, "given twice", "idgen serve"},
		{"version argument", []string{"version", "now"}, nil, `unexpected argument "now"`, "idgen version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, mergeVars(base, tt.env), tt.args...)
			if r.code != 2 {
				t.Fatalf("idgen %q: got exit code %d, want 2 (stderr %q)", tt.args, r.code, r.stderr)
			}
			var ue *usageError
			if !errors.As(r.err, &ue) {
				t.Errorf("got error %T %v, want a *usageError", r.err, r.err)
			}
			if r.stdout != "" {
				t.Errorf("got stdout %q, want nothing", r.stdout)
			}
			got := lines(r.stderr)
			wantHint := "Run '" + tt.hint + " --help' for usage."
			if len(got) != 2 || !strings.HasPrefix(got[0], "idgen: ") || got[1] != wantHint {
				t.Fatalf("got stderr %q, want one line \"idgen: …\" then %q", r.stderr, wantHint)
			}
			if !strings.Contains(got[0], tt.want) {
				t.Errorf("got message %q, want it to contain %q", got[0], tt.want)
			}
			if f := fieldName.FindString(got[0]); f != "" {
				t.Errorf("got message %q, which names the field %s; want its flag", got[0], f)
			}
			// Nothing that may be a secret is echoed.
			for _, secret := range []string{"hunter2", "s3cret"} {
				if strings.Contains(r.stderr, secret) {
					t.Errorf("got stderr %q, which holds %q", r.stderr, secret)
				}
			}
		})
	}
	if _, err := os.Stat(dbFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a usage error touched the database: stat %s: got %v, want not exist", dbFile, err)
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want string // first line of the usage
	}{
		{[]string{"--help"}, "Usage: idgen <command> [arguments]"},
		{[]string{"-h"}, "Usage: idgen <command> [arguments]"},
		{[]string{"help"}, "Usage: idgen <command> [arguments]"},
		{[]string{"help", "serve"}, "Usage: idgen serve [flags]"},
		{[]string{"serve", "--help"}, "Usage: idgen serve [flags]"},
		{[]string{"serve", "-h"}, "Usage: idgen serve [flags]"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--help"}, "Usage: idgen serve [flags]"},
		{[]string{"migrate", "--help"}, "Usage: idgen migrate up|down|status [--dsn DSN]"},
		{[]string{"migrate", "up", "--help"}, "Usage: idgen migrate up|down|status [--dsn DSN]"},
		{[]string{"leases", "--help"}, "Usage: idgen leases [--all] [--dsn DSN]"},
		{[]string{"namespaces", "--help"}, "Usage: idgen namespaces list [--dsn DSN]"},
		{[]string{"namespaces", "list", "--help"}, "Usage: idgen namespaces list [--dsn DSN]"},
		{[]string{"namespaces", "create", "--help"}, "Usage: idgen namespaces list [--dsn DSN]"},
		{[]string{"namespaces", "create", "orders", "--help"}, "Usage: idgen namespaces list [--dsn DSN]"},
		{[]string{"parse", "--help"}, "Usage: idgen parse ID [--layout T/D/W/S] [--epoch TIME] [--format FORMAT]"},
		{[]string{"compose", "--help"}, "Usage: idgen compose --time TIME [--layout T/D/W/S] [--epoch TIME] [--format FORMAT]"},
		{[]string{"version", "--help"}, "Usage: idgen version"},
	}
	for _, tt := range tests {
		r := cli(t, nil, tt.args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("idgen %q: got exit code %d, stderr %q; want 0 and nothing", tt.args, r.code, r.stderr)
			continue
		}
		if got := lines(r.stdout)[0]; got != tt.want {
			t.Errorf("idgen %q: got first line %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestCommandForms checks the command list (commands.go) against what the
// commands do: idgen --help lists every command, each command's --help
// starts with the Usage lines of its forms, and each subcommand a form
// names answers --help with its own usage or its command's.
func TestCommandForms(t *testing.T) {
	top := cli(t, nil, "--help").stdout
	for _, c := range commands() {
		if !strings.Contains(top, "\n  "+c.name+" ") {
			t.Errorf("idgen --help does not list %s", c.name)
		}
		for _, args := range [][]string{{c.name, "--help"}, {"help", c.name}} {
			r := cli(t, nil, args...)
			if r.code != 0 || r.stdout != c.usage() {
				t.Errorf("idgen %q: got exit code %d and\n%s\nwant 0 and\n%s", args, r.code, r.stdout, c.usage())
			}
		}
		var want []string
		for i, f := range c.forms {
			lead := "       idgen "
			if i == 0 {
				lead = "Usage: idgen "
			}
			want = append(want, lead+f.synopsis)
			sub := f.sub()
			if sub == "" {
				continue
			}
			r := cli(t, nil, c.name, sub, "--help")
			wantUsage := c.usage()
			if f.help != "" {
				wantUsage = "Usage: idgen " + f.synopsis + "\n\n" + f.help
			}
			if r.code != 0 || r.stdout != wantUsage || r.stdout != usageOf(c.name+" "+sub) {
				t.Errorf("idgen %s %s --help: got exit code %d and\n%s\nwant 0 and\n%s", c.name, sub, r.code, r.stdout, wantUsage)
			}
		}
		if got := lines(c.usage())[:len(c.forms)]; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("idgen %s --help: got Usage lines %q, want %q", c.name, got, want)
		}
	}
}

// TestServeFlagsDocumented checks that every serve flag but the test-only
// ones is in serve's --help and in docs/cli.md, with its environment variable.
func TestServeFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatalf("read the CLI reference: %v", err)
	}
	sf := newServeFlags()
	n := 0
	sf.f.fs.VisitAll(func(fl *flag.Flag) {
		if sf.f.noEnv[fl.Name] {
			if strings.Contains(usageOf("serve"), "--"+fl.Name) {
				t.Errorf("serve --help shows the test-only flag --%s", fl.Name)
			}
			return
		}
		n++
		for _, want := range []string{"--" + fl.Name + " ", "[" + envName(fl.Name) + "]"} {
			if !strings.Contains(usageOf("serve"), want) {
				t.Errorf("serve --help does not mention %q", want)
			}
		}
		for _, want := range []string{"--" + fl.Name, envName(fl.Name)} {
			if !strings.Contains(string(doc), want) {
				t.Errorf("docs/cli.md does not mention %q", want)
			}
		}
	})
	if n < 15 {
		t.Errorf("got %d documented serve flags, want at least 15", n)
	}
}

func TestParseServe(t *testing.T) {
	custom := snowflake.Layout{TimeBits: 41, DatacenterBits: 4, WorkerBits: 6, SequenceBits: 12,
		Epoch: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)}
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c serveConfig)
	}{
		{"defaults", nil, nil, func(t *testing.T, c serveConfig) {
			a, k := c.app, c.app.Keeper
			if a.Listen != "127.0.0.1:8080" || a.DSN != "sqlite:idgen.db" || !a.Migrate || k.DatacenterID != 0 ||
				k.WorkerIDs != nil || k.TTL != 30*time.Second || k.Heartbeat != 10*time.Second ||
				a.MaxCount != 10000 || a.AdminToken != "" || c.logFormat != "text" || k.Holder != "" ||
				a.ShutdownTimeout != 10*time.Second || a.AllowUnsafeDurability || c.addrFile != "" || c.clock != (testClock{}) {
				t.Errorf("got %+v, want the documented defaults", c)
			}
			if d := snowflake.DefaultLayout().Diff(k.Layout); d != "" {
				t.Errorf("got layout %s, want the default: %s", k.Layout, d)
			}
		}},
		{"environment", nil, map[string]string{
			"IDGEN_LISTEN": "127.0.0.1:9000", "IDGEN_DSN": "mysql://root@127.0.0.1:3306/x", "IDGEN_DATACENTER": "3",
			"IDGEN_WORKER_IDS": "4-9", "IDGEN_LEASE_TTL": "20s", "IDGEN_HEARTBEAT": "5s", "IDGEN_MAX_COUNT": "50",
			"IDGEN_ADMIN_TOKEN": "t0ken", "IDGEN_LOG_FORMAT": "json", "IDGEN_LOG_LEVEL": "debug",
			"IDGEN_MIGRATE": "false", "IDGEN_HOLDER": "node-a", "IDGEN_SHUTDOWN_TIMEOUT": "3s",
			"IDGEN_LAYOUT": "41/4/6/12", "IDGEN_EPOCH": "2025-06-01T00:00:00Z", "IDGEN_ADDR_FILE": "/run/idgen.addr",
			"IDGEN_ALLOW_UNSAFE_DURABILITY": "true",
			// Test-only flags have no environment variable.
			"IDGEN_TEST_CLOCK_OFFSET": "1h", "IDGEN_TEST_CLOCK_FILE": "/tmp/clock",
		}, func(t *testing.T, c serveConfig) {
			a, k := c.app, c.app.Keeper
			if a.Listen != "127.0.0.1:9000" || a.DSN != "mysql://root@127.0.0.1:3306/x" || a.Migrate ||
				k.DatacenterID != 3 || k.WorkerIDs == nil || *k.WorkerIDs != (allocator.WorkerRange{Min: 4, Max: 9}) ||
				k.TTL != 20*time.Second || k.Heartbeat != 5*time.Second || a.MaxCount != 50 ||
				a.AdminToken != "t0ken" || c.logFormat != "json" || c.logLevel.String() != "DEBUG" ||
				k.Holder != "node-a" || a.ShutdownTimeout != 3*time.Second || c.addrFile != "/run/idgen.addr" ||
				!a.AllowUnsafeDurability {
				t.Errorf("got %+v, want the environment's values", c)
			}
			if d := custom.Diff(k.Layout); d != "" {
				t.Errorf("got layout %s, want %s: %s", k.Layout, custom, d)
			}
			if c.clock != (testClock{}) {
				t.Errorf("got test clock %+v from the environment, want none", c.clock)
			}
		}},
		{"flag beats environment", []string{"--datacenter", "2", "--lease-ttl", "40s", "--migrate=true"},
			map[string]string{"IDGEN_DATACENTER": "3", "IDGEN_LEASE_TTL": "not a duration", "IDGEN_MIGRATE": "false"},
			func(t *testing.T, c serveConfig) {
				if k := c.app.Keeper; k.DatacenterID != 2 || k.TTL != 40*time.Second || !c.app.Migrate {
					t.Errorf("got datacenter %d, ttl %s, migrate %v; want the flags' 2, 40s, true", k.DatacenterID, k.TTL, c.app.Migrate)
				}
			}},
		{"heartbeat a third of the ttl", []string{"--lease-ttl", "1m"}, nil, func(t *testing.T, c serveConfig) {
			if k := c.app.Keeper; k.TTL != time.Minute || k.Heartbeat != 20*time.Second {
				t.Errorf("got ttl %s heartbeat %s, want 1m0s and a third of it, 20s", k.TTL, k.Heartbeat)
			}
		}},
		{"shortest ttl, longest heartbeat", []string{"--lease-ttl", "1s", "--heartbeat", "500ms"}, nil, func(t *testing.T, c serveConfig) {
			if k := c.app.Keeper; k.TTL != time.Second || k.Heartbeat != 500*time.Millisecond {
				t.Errorf("got ttl %s heartbeat %s, want 1s 500ms", k.TTL, k.Heartbeat)
			}
		}},
		{"js53 preset", []string{"--layout", "js53"}, nil, func(t *testing.T, c serveConfig) {
			if l := c.app.Keeper.Layout; l.Width() != 53 || l.TimeBits != 41 || l.WorkerBits != 5 || l.SequenceBits != 7 {
				t.Errorf("got layout %s, want js53's 41/0/5/7", l)
			}
		}},
		{"narrow widths", []string{"--layout", "40/0/6/7"}, nil, func(t *testing.T, c serveConfig) {
			if l := c.app.Keeper.Layout; l.Width() != 53 {
				t.Errorf("got layout %s, want 53 bits", l)
			}
		}},
		{"id formats", nil, map[string]string{"IDGEN_ID_FORMAT": "base32,orders=hex"}, func(t *testing.T, c serveConfig) {
			want := map[string]snowflake.Format{"": snowflake.FormatBase32, "orders": snowflake.FormatHex}
			if !maps.Equal(c.app.Formats, want) {
				t.Errorf("got formats %v, want %v", c.app.Formats, want)
			}
		}},
		{"one worker ID", []string{"--worker-ids", "5"}, nil, func(t *testing.T, c serveConfig) {
			if w := c.app.Keeper.WorkerIDs; w == nil || *w != (allocator.WorkerRange{Min: 5, Max: 5}) {
				t.Errorf("got workers %v, want 5-5", w)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, env{getenv: func(k string) string { return tt.env[k] }})
			if err != nil {
				t.Fatalf("parseServe(%q): %v", tt.args, err)
			}
			tt.check(t, c)
		})
	}
}

func TestParse(t *testing.T) {
	custom := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 6, SequenceBits: 11,
		Epoch: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)}
	at := time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)
	tests := []struct {
		name   string
		layout snowflake.Layout
		args   []string
		env    map[string]string
	}{
		{"default layout", snowflake.DefaultLayout(), nil, nil},
		{"flags", custom, []string{"--layout", "41/5/6/11", "--epoch", "2025-06-01T00:00:00Z"}, nil},
		{"environment", custom, nil, map[string]string{"IDGEN_LAYOUT": "41/5/6/11", "IDGEN_EPOCH": "2025-06-01T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := at.UnixMilli() - tt.layout.EpochMillis()
			id, err := tt.layout.Compose(snowflake.Parts{Timestamp: ts, Datacenter: 17, Worker: 29, Sequence: 1000})
			if err != nil {
				t.Fatal(err)
			}
			r := cli(t, tt.env, append([]string{"parse", id.String()}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("got exit code %d, stderr %q; want 0", r.code, r.stderr)
			}
			got := map[string]string{}
			for _, l := range lines(r.stdout) {
				k, v, _ := strings.Cut(l, " ")
				got[k] = strings.TrimSpace(v)
			}
			want := map[string]string{
				"id": id.String(), "time": "2026-03-04T05:06:07.89Z", "timestamp_ms": strconv.FormatInt(at.UnixMilli(), 10),
				"since_epoch_ms": strconv.FormatInt(ts, 10), "datacenter": "17", "worker": "29",
				"sequence": "1000", "layout": tt.layout.String(),
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("got %s %q, want %q (output %q)", k, got[k], v, r.stdout)
				}
			}
		})
	}
}

// output reads the two columns idgen parse and idgen compose print.
func output(t *testing.T, r result) map[string]string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("got exit code %d, stderr %q; want 0", r.code, r.stderr)
	}
	got := map[string]string{}
	for _, l := range lines(r.stdout) {
		k, v, _ := strings.Cut(l, " ")
		got[k] = strings.TrimSpace(v)
	}
	return got
}

// TestParseForms: idgen parse reads an ID in any form and prints it in
// every form.
func TestParseForms(t *testing.T) {
	// Python: int("01a9b92483c003ea", 16) and its base32 and base62 digits.
	want := map[string]string{"id": "119830431582389226", "base32": "03ADS4J1W00ZA", "base62": "08qp7whHgCo", "hex": "01a9b92483c003ea"}
	for _, in := range []string{want["id"], want["base32"], strings.ToLower(want["base32"]), want["base62"], want["hex"]} {
		got := output(t, cli(t, nil, "parse", in))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("parse %s: got %s %q, want %q", in, k, got[k], v)
			}
		}
	}
	got := output(t, cli(t, nil, "parse", "0000000000001", "--format", "base32"))
	if got["id"] != "1" {
		t.Errorf("parse 0000000000001 --format base32: got id %q, want 1", got["id"])
	}
}

// TestComposeAgreesWithParse: the first and the last ID idgen compose
// prints parse to the millisecond asked for, with zero and with the
// largest other parts, for every preset and form.
func TestComposeAgreesWithParse(t *testing.T) {
	at := "2026-11-27T12:34:56.789Z"
	for _, p := range snowflake.Presets() {
		for _, format := range []string{"decimal", "base32", "base62", "hex"} {
			c := output(t, cli(t, nil, "compose", "--time", at, "--layout", p.Name, "--format", format))
			if c["time"] != at || c["layout"] != p.Layout.String() {
				t.Errorf("%s %s: got time %q layout %q, want %s and the preset's", p.Name, format, c["time"], c["layout"], at)
			}
			for _, b := range []struct {
				name            string
				dc, worker, seq int64
			}{{"first", 0, 0, 0}, {"last", p.Layout.MaxDatacenter(), p.Layout.MaxWorker(), p.Layout.MaxSequence()}} {
				got := output(t, cli(t, nil, "parse", c[b.name], "--layout", p.Name, "--format", format))
				want := map[string]string{"time": "2026-11-27T12:34:56.789Z", "datacenter": strconv.FormatInt(b.dc, 10),
					"worker": strconv.FormatInt(b.worker, 10), "sequence": strconv.FormatInt(b.seq, 10), format: c[b.name]}
				if format == "decimal" {
					want["id"] = c[b.name]
					delete(want, "decimal")
				}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s %s: parse %s %s: got %s %q, want %q", p.Name, format, b.name, c[b.name], k, got[k], v)
					}
				}
			}
		}
	}
}

func TestVersion(t *testing.T) {
	r := cli(t, nil, "version")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	if !regexp.MustCompile(`^idgen \S+ \(go1\.\S+, \w+/\w+\)\n$`).MatchString(r.stdout) {
		t.Errorf("got %q, want \"idgen <version> (<go version>, <os>/<arch>)\"", r.stdout)
	}
	if r2 := cli(t, nil, "--version"); r2.stdout != r.stdout {
		t.Errorf("--version: got %q, want %q", r2.stdout, r.stdout)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		code int
		want string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{usagef("serve", "bad"), 2, "idgen: bad\nRun 'idgen serve --help' for usage.\n"},
		{errors.New("boom"), 1, "idgen: boom\n"},
		{errors.Join(errors.New("first"), errors.New("second")), 1, "idgen: first; second\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if got := exitCode(tt.err, &b); got != tt.code || b.String() != tt.want {
			t.Errorf("exitCode(%v): got %d %q, want %d %q", tt.err, got, b.String(), tt.code, tt.want)
		}
	}
}

func TestScrubber(t *testing.T) {
	const pw = "S3cret-pw"
	tests := []struct {
		dsn    string
		others []string
		in     string
		want   string
	}{
		{"postgres://u:" + pw + "@h:5432/db", nil, "connect to postgres://u:" + pw + "@h/db failed", "connect to postgres://u:xxxxx@h/db failed"},
		{"postgres://u:S3cret%2Fpw@h/db", nil, "raw S3cret%2Fpw decoded S3cret/pw", "raw xxxxx decoded xxxxx"},
		{"postgres://u@h/db?sslmode=disable&password=" + pw, nil, "dsn ?password=" + pw + "&x", "dsn ?password=xxxxx&x"},
		{"mysql://root:" + pw + "@[::1/db", nil, "bad " + pw, "bad xxxxx"},          // malformed URL
		{"root:" + pw + "@tcp(127.0.0.1:3306)/test", nil, "dsn " + pw, "dsn xxxxx"}, // driver form
		{"etcd://idgen:" + pw + "@h1:2379,h2:2379,h3:2379/idgen", nil, "etcd: connect " + pw, "etcd: connect xxxxx"},
		{"etcds://idgen:" + pw + "@[::1]:2379,[::1]:2380/idgen", nil, "etcd: connect " + pw, "etcd: connect xxxxx"},
		{"sqlite:idgen.db", []string{"admin-token-123"}, "token admin-token-123 and admin-token-123", "token xxxxx and xxxxx"},
		// Too short to scrub, and nothing to scrub.
		{"mysql://root:abc@h/db", nil, "abc 127.0.0.1", "abc 127.0.0.1"},
		{"mysql://root@127.0.0.1:3306/test", nil, "dial 127.0.0.1:3306", "dial 127.0.0.1:3306"},
	}
	for _, tt := range tests {
		sc := newScrubber(tt.dsn, tt.others...)
		if got := sc.scrub(tt.in); got != tt.want {
			t.Errorf("scrub(%q) for %q: got %q, want %q", tt.in, tt.dsn, got, tt.want)
		}
		var b bytes.Buffer
		if _, err := sc.writer(&b).Write([]byte(tt.in)); err != nil || b.String() != tt.want {
			t.Errorf("writer for %q: got %q %v, want %q", tt.dsn, b.String(), err, tt.want)
		}
	}
	sc := newScrubber("postgres://u:" + pw + "@h/db")
	inner := usagef("serve", "bad %s", pw)
	err := sc.err(fmt.Errorf("wrapped: %w", inner))
	var ue *usageError
	if err.Error() != "wrapped: bad xxxxx" || !errors.As(err, &ue) || !errors.Is(err, inner) {
		t.Errorf("got %q (errors.As %v), want the message scrubbed and the chain kept", err, errors.As(err, &ue))
	}
	if sc.err(nil) != nil {
		t.Error("sc.err(nil) is not nil")
	}
}
