package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
)

// cliStdin runs idgen in-process with stdin.
func cliStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runEnv(context.Background(), args, env{getenv: func(string) string { return "" },
		stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr})
	code := exitCode(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func TestTokensHash(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		code        int
		want        string // stdout, or in stderr
	}{
		{"with a newline", "foo\n", 0, "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n"},
		{"with CRLF", "foo\r\n", 0, "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n"},
		{"without a newline", "foo", 0, "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n"},
		{"empty", "\n", 2, "no secret on standard input"},
		{"two lines", "foo\nbar\n", 2, "one line of printable ASCII"},
		{"a space", "foo bar\n", 2, "one line of printable ASCII"},
		{"too long", strings.Repeat("s", 5000), 2, "secret longer than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cliStdin(t, tc.stdin, "tokens", "hash")
			if r.code != tc.code {
				t.Fatalf("got exit code %d (stderr %q), want %d", r.code, r.stderr, tc.code)
			}
			if tc.code == 0 && r.stdout != tc.want {
				t.Errorf("got stdout %q, want %q", r.stdout, tc.want)
			}
			if tc.code != 0 && !strings.Contains(r.stderr, tc.want) {
				t.Errorf("got stderr %q, want %q in it", r.stderr, tc.want)
			}
			if tc.code != 0 && (strings.Contains(r.stderr, "foo") || strings.Contains(r.stderr, "bar")) {
				t.Errorf("got stderr %q, which echoes the secret", r.stderr)
			}
		})
	}
}

func TestTokensNew(t *testing.T) {
	out := regexp.MustCompile(`^secret: (\S+)\nline:   (\S+ \S+ \S+)\n$`)
	var secrets []string
	for range 2 {
		r := cli(t, nil, "tokens", "new", "orders-api", "leases,ids")
		if r.code != 0 {
			t.Fatalf("idgen tokens new: got exit code %d, stderr %q", r.code, r.stderr)
		}
		m := out.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("got stdout %q, want a secret line and a tokens file line", r.stdout)
		}
		secret, line := m[1], m[2]
		if raw, err := base64.RawURLEncoding.DecodeString(secret); err != nil || len(raw) != 32 {
			t.Errorf("secret %q: want 32 bytes of base64url (%v)", secret, err)
		}
		if want := "orders-api ids,leases " + idgen.HashSecret(secret); line != want {
			t.Errorf("line: got %q, want %q", line, want)
		}
		if _, err := idgen.ParseTokens("new", []byte(line+"\n")); err != nil {
			t.Errorf("the line does not parse: %v", err)
		}
		if strings.Contains(r.stderr, secret) {
			t.Errorf("stderr holds the secret: %q", r.stderr)
		}
		secrets = append(secrets, secret)
	}
	if secrets[0] == secrets[1] {
		t.Errorf("two runs made the same secret %s", secrets[0])
	}
}

// TestLeasesAndNamespacesAdmin runs idgen leases events, idgen leases evict
// and idgen namespaces delete on every database.
func TestLeasesAndNamespacesAdmin(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		mustCLI(t, "migrate", "up", "--dsn", dsn)
		store, err := stores.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		testserver.HoldWorker(t, store, 3)
		testserver.HoldWorker(t, store, 4)

		// Events: two claims, in pages of one.
		out := mustCLI(t, "leases", "events", "--limit", "1", "--dsn", dsn)
		ls := lines(out)
		if len(ls) != 3 || !strings.HasPrefix(ls[0], "ID  AT") || !strings.Contains(ls[1], "acquire") ||
			!strings.HasPrefix(ls[2], "(more events: add --after ") {
			t.Fatalf("leases events --limit 1: got\n%s", out)
		}
		after := strings.TrimSuffix(strings.TrimPrefix(ls[2], "(more events: add --after "), ")")
		out = mustCLI(t, "leases", "events", "--after", after, "--dsn", dsn)
		if ls := lines(out); len(ls) != 2 || !strings.Contains(ls[1], "acquire") {
			t.Fatalf("leases events --after %s: got\n%s", after, out)
		}

		// Evict worker 3: the event names the operator and the reason.
		r := cli(t, nil, "leases", "evict", "0", "3", "--reason", "decommissioned", "--dsn", dsn)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "evicted worker 0/3: fencing version now 2") || !strings.Contains(r.stdout, "owner cli:") {
			t.Fatalf("leases evict 0 3: got exit code %d, %q %q", r.code, r.stdout, r.stderr)
		}
		requestID := regexp.MustCompile(`request ID (cli-[0-9a-f]{32})\)`).FindStringSubmatch(r.stdout)
		if requestID == nil {
			t.Fatalf("leases evict: got %q, want the request ID", r.stdout)
		}
		out = mustCLI(t, "leases", "events", "--kind", "evict", "--worker", "3", "--dsn", dsn)
		if ls := lines(out); len(ls) != 2 || !strings.Contains(ls[1], "cli:") || !strings.Contains(ls[1], requestID[1]) ||
			!strings.Contains(ls[1], "decommissioned") || !strings.Contains(ls[1], "testserver/another-node") {
			t.Errorf("leases events --kind evict: got\n%s", out)
		}
		// Refused: free, never claimed, moved past the version; nothing
		// changes.
		before, err := store.ListLeases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"0", "3"}, "nothing to evict"},
			{[]string{"0", "9"}, "nothing to evict"},
			{[]string{"0", "4", "--fencing-version", "7"}, "the lease moved on"},
		} {
			r := cli(t, nil, append(append([]string{"leases", "evict"}, tc.args...), "--dsn", dsn)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("leases evict %q: got exit code %d, %q %q; want 1 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
			}
		}
		after2, err := store.ListLeases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != len(after2) {
			t.Errorf("refused evictions changed the lease table")
		}
		for i := range before {
			if before[i] != after2[i] {
				t.Errorf("refused evictions changed row %d: %+v -> %+v", i, before[i], after2[i])
			}
		}
		if r := cli(t, nil, "leases", "evict", "0", "4", "--fencing-version", "1", "--dsn", dsn); r.code != 0 {
			t.Errorf("leases evict at the current version: got exit code %d, %q", r.code, r.stderr)
		}
		rows := leaseRows(t, dsn)
		for _, row := range rows {
			if (row["WORKER"] == "3" || row["WORKER"] == "4") && (row["HOLDER"] != "-" || row["VERSION"] != "2") {
				t.Errorf("after eviction: got row %v, want no holder at version 2", row)
			}
		}

		// Delete a namespace: a tombstone, logged with the operator.
		mustCLI(t, "namespaces", "create", "doomed", "--start", "500", "--dsn", dsn)
		r = cli(t, nil, "namespaces", "delete", "doomed", "--dsn", dsn)
		if r.code != 0 || r.stdout != "deleted namespace doomed at max_id 499; to create it again, give --start above 499\n" {
			t.Fatalf("namespaces delete: got exit code %d, %q %q", r.code, r.stdout, r.stderr)
		}
		if !regexp.MustCompile(`msg="namespace deleted" namespace=doomed max_id=499 version=0 caller=cli:\S+ request_id=cli-[0-9a-f]{32}`).MatchString(r.stderr) {
			t.Errorf("namespaces delete: got stderr %q, want the audit line", r.stderr)
		}
		if out := mustCLI(t, "namespaces", "list", "--dsn", dsn); strings.Contains(out, "doomed") {
			t.Errorf("namespaces list after the deletion: got\n%s", out)
		}
		r = cli(t, nil, "namespaces", "delete", "doomed", "--dsn", dsn)
		if r.code != 1 || !strings.Contains(r.stderr, `namespace "doomed" does not exist or was deleted already`) {
			t.Errorf("second namespaces delete: got exit code %d, %q", r.code, r.stderr)
		}
		r = cli(t, nil, "namespaces", "create", "doomed", "--start", "499", "--dsn", dsn)
		if r.code != 1 || !strings.Contains(r.stderr, "was deleted at max_id 499; create it with a start above 499") {
			t.Errorf("namespaces create below the tombstone: got exit code %d, %q", r.code, r.stderr)
		}
		mustCLI(t, "namespaces", "create", "doomed", "--start", "500", "--dsn", dsn)
	})
}

// TestServeTokens runs idgen serve with a tokens file: /ids needs the ids
// scope, and SIGHUP (relayed as main relays it) reloads the file at once.
func TestServeTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	const alpha, beta = "alpha-secret-for-serve", "beta-secret-for-serve"
	if err := os.WriteFile(path, []byte("alpha ids "+idgen.HashSecret(alpha)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := make(chan chan<- os.Signal, 1)
	logs := &testserver.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrFile := filepath.Join(dir, "addr")
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = runEnv(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
			"--dsn", "sqlite:" + filepath.Join(dir, "idgen.db"), "--tokens-file", path,
			"--lease-events-retention", "0", "--drain-window", "0"}, env{
			getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: logs,
			hangups: func(c chan<- os.Signal) func() { hup <- c; return func() {} },
		})
	}()
	addr := waitAddrFile(t, addrFile, exited, logs)
	status := func(secret string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/ids", nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(startTimeout)
	for status(alpha) != 200 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := status(alpha); got != 200 {
		t.Fatalf("alpha: got %d, want 200", got)
	}
	for secret, want := range map[string]int{"": 401, beta: 401} {
		if got := status(secret); got != want {
			t.Errorf("GET /ids with %q: got %d, want %d", secret, got, want)
		}
	}
	if err := os.WriteFile(path, []byte("beta ids "+idgen.HashSecret(beta)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var c chan<- os.Signal
	select {
	case c = <-hup:
	case <-time.After(startTimeout):
		t.Fatal("serve did not ask for SIGHUP")
	}
	c <- os.Interrupt // any signal on the channel stands for SIGHUP
	deadline = time.Now().Add(startTimeout)
	for !strings.Contains(logs.String(), `msg="tokens reloaded"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := status(beta); got != 200 {
		t.Errorf("beta after SIGHUP: got %d, want 200\n%s", got, logs)
	}
	if !strings.Contains(logs.String(), `msg="SIGHUP: reloading the tokens file"`) || !strings.Contains(logs.String(), `names=[beta]`) {
		t.Errorf("log: want the reload on SIGHUP, got\n%s", logs)
	}
	if !strings.Contains(logs.String(), "lease events are kept forever") {
		t.Errorf("log: want --lease-events-retention 0 to keep the events, got\n%s", logs)
	}
	cancel()
	<-exited
	if runErr != nil {
		t.Errorf("serve: got %v, want a clean shutdown", runErr)
	}
	for _, secret := range []string{alpha, beta} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a secret")
		}
	}
}

// TestParseServeCompactRetention checks how --etcd-compact-retention
// reaches the node's configuration: auto (0), off (negative), a duration.
func TestParseServeCompactRetention(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, nil, 0},
		{[]string{"--etcd-compact-retention", "auto"}, nil, 0},
		{[]string{"--etcd-compact-retention", "off"}, nil, app.NoEtcdCompaction},
		{[]string{"--etcd-compact-retention", "0"}, nil, app.NoEtcdCompaction},
		{[]string{"--etcd-compact-retention", "10m"}, nil, 10 * time.Minute},
		{nil, map[string]string{"IDGEN_ETCD_COMPACT_RETENTION": "1h"}, time.Hour},
	} {
		c, err := parseServe(tc.args, env{getenv: func(k string) string { return tc.env[k] }})
		if err != nil {
			t.Fatalf("%q %v: %v", tc.args, tc.env, err)
		}
		if c.app.EtcdCompactRetention != tc.want {
			t.Errorf("%q %v: got %s, want %s", tc.args, tc.env, c.app.EtcdCompactRetention, tc.want)
		}
	}
}

// TestParseServeTokens checks how serve's tokens and retention flags reach
// the node's configuration.
func TestParseServeTokens(t *testing.T) {
	content := "alpha ids " + idgen.HashSecret("a") + "\n"
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		tokens    string
		retention time.Duration
	}{
		{"defaults", nil, nil, "", 720 * time.Hour},
		{"IDGEN_TOKENS", nil, map[string]string{"IDGEN_TOKENS": content}, content, 720 * time.Hour},
		{"retention", []string{"--lease-events-retention", "48h"}, nil, "", 48 * time.Hour},
		{"retention from the environment", nil, map[string]string{"IDGEN_LEASE_EVENTS_RETENTION": "1h"}, "", time.Hour},
		{"kept forever", []string{"--lease-events-retention", "0"}, nil, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServe(tc.args, env{getenv: func(k string) string { return tc.env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			if c.app.Tokens != tc.tokens || c.app.LeaseEventsRetention != tc.retention {
				t.Errorf("got tokens %q, retention %s; want %q, %s", c.app.Tokens, c.app.LeaseEventsRetention, tc.tokens, tc.retention)
			}
		})
	}
}
