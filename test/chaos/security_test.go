//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
)

// secCheck counts the bad-input checks of one database and their failures.
type secCheck struct {
	t      *testing.T
	checks int
	failed int
}

func (s *secCheck) expect(ok bool, format string, args ...any) {
	s.t.Helper()
	s.checks++
	if !ok {
		s.failed++
		s.t.Errorf(format, args...)
	}
}

// do sends one request to n and returns status, headers and body.
func do(t *testing.T, n *node, method, path string, header http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.url(path), r)
	if err != nil {
		t.Fatalf("request %s %s: %v", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// runSecurity runs the bad-input and secret-handling checks against one
// database: admin authentication, injection attempts as namespace names,
// oversized headers and bodies, and DSNs carrying a canary password.
func runSecurity(t *testing.T, bin, db string, sum *summaries) {
	s := &secCheck{t: t}
	d := freshDatabase(t, db)
	migrate(t, bin, d.dsn)
	c := newCluster(t, bin, "0-3", []string{d.dsn}, 1)
	c.startAll()
	c.waitReady(0)
	n := c.nodes[0]

	// Admin authentication.
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no Authorization", nil, 401},
		{"Basic scheme", http.Header{"Authorization": {"Basic YWRtaW46YWRtaW4="}}, 401},
		{"Bearer without token", http.Header{"Authorization": {"Bearer"}}, 401},
		{"wrong token", bearer("wrong-token"), 403},
		{"token with a suffix", bearer(adminToken + "x"), 403},
		{"token prefix", bearer(adminToken[:len(adminToken)-1]), 403},
		{"right token", bearer(adminToken), 200},
	} {
		code, h, body := do(t, n, "GET", "/admin/leases", tc.header, nil)
		s.expect(code == tc.want, "GET /admin/leases with %s: got %d, want %d: %.200s", tc.name, code, tc.want, body)
		if tc.want == 401 {
			s.expect(strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer"),
				"GET /admin/leases with %s: WWW-Authenticate %q, want Bearer", tc.name, h.Get("WWW-Authenticate"))
		}
		if tc.want != 200 {
			s.expect(strings.HasPrefix(h.Get("Content-Type"), "application/problem+json"),
				"GET /admin/leases with %s: Content-Type %q, want application/problem+json", tc.name, h.Get("Content-Type"))
			s.expect(!bytes.Contains(body, []byte(adminToken)), "GET /admin/leases with %s: the token is in the body", tc.name)
		}
	}
	create := []byte(`{"name":"sneaky","step":10}`)
	code, _, _ := do(t, n, "POST", "/admin/namespaces", bearer("wrong-token"), create)
	s.expect(code == 403, "POST /admin/namespaces with a wrong token: got %d, want 403", code)
	code, _, _ = do(t, n, "POST", "/admin/namespaces", nil, create)
	s.expect(code == 401, "POST /admin/namespaces without a token: got %d, want 401", code)

	// Injection attempts as namespace names.
	evil := []string{
		"x'; DROP TABLE segments; --",
		`a" OR "1"="1`,
		"ns`; DROP TABLE worker_leases; #",
		"r'); DELETE FROM lease_events; --",
		"orders;SELECT pg_sleep(5)",
		"../../etc/passwd",
		"UPPER",
		"sp ace",
		"\x00null",
		strings.Repeat("a", 65),
	}
	for _, name := range evil {
		body, _ := json.Marshal(map[string]any{"name": name, "step": 10})
		code, _, resp := do(t, n, "POST", "/admin/namespaces", bearer(adminToken), body)
		s.expect(code == 400, "POST /admin/namespaces name %q: got %d, want 400: %.200s", name, code, resp)
		code, _, resp = do(t, n, "GET", "/ids?count=1&namespace="+url.QueryEscape(name), nil, nil)
		s.expect(code == 400, "GET /ids?namespace=%q: got %d, want 400: %.200s", name, code, resp)
		code, _, resp = do(t, n, "GET", "/admin/namespaces/"+url.PathEscape(name), bearer(adminToken), nil)
		s.expect(code == 400 || code == 404, "GET /admin/namespaces/%q: got %d, want 400 or 404: %.200s", name, code, resp)
	}
	code, _, resp := do(t, n, "POST", "/admin/namespaces", bearer(adminToken), []byte(`{"name":"orders","step":10}`))
	s.expect(code == 201, "POST /admin/namespaces orders: got %d, want 201: %.200s", code, resp)
	code, _, resp = do(t, n, "GET", "/ids?count=5&namespace=orders", nil, nil)
	s.expect(code == 200, "GET /ids?namespace=orders after the attempts: got %d, want 200: %.200s", code, resp)
	{
		st := openStore(t, d.dsn)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		nss, err := st.ListNamespaces(ctx)
		s.expect(err == nil && len(nss) == 1 && nss[0].Name == "orders",
			"tables after the injection attempts: namespaces %v (err %v), want just orders", nss, err)
		leases, err := st.ListLeases(ctx)
		s.expect(err == nil && len(leases) > 0, "worker_leases after the injection attempts: %d rows, err %v", len(leases), err)
		_, err = st.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 10})
		s.expect(err == nil, "lease_events after the injection attempts: %v", err)
		cancel()
		st.Close()
	}

	// Oversized headers and bodies.
	code, _, _ = do(t, n, "GET", "/ids?count=1", http.Header{"X-Big": {strings.Repeat("b", 64<<10)}}, nil)
	s.expect(code == 431, "GET /ids with a 64 KiB header: got %d, want 431", code)
	code, _, _ = do(t, n, "GET", "/ids?count=1&namespace="+strings.Repeat("n", 64<<10), nil, nil)
	s.expect(code == 431 || code == 414 || code == 400, "GET /ids with a 64 KiB query: got %d, want 431, 414 or 400", code)
	big, _ := json.Marshal(map[string]any{"name": "huge", "step": 10, "description": strings.Repeat("d", 100<<10)})
	code, _, resp = do(t, n, "POST", "/admin/namespaces", bearer(adminToken), big)
	s.expect(code == 413, "POST /admin/namespaces with a 100 KiB body: got %d, want 413: %.200s", code, resp)
	code, _, _ = do(t, n, "GET", "/healthz", nil, nil)
	s.expect(code == 200, "GET /healthz after the oversized requests: got %d, want 200", code)
	if p := c.stopAll(); len(p) > 0 {
		s.expect(false, "%s", strings.Join(p, "\n"))
	}

	// DSNs with a canary password, valid and malformed.
	runs, serving := canaryDSNs(t, s, bin, d)

	result := "PASS"
	if s.failed > 0 {
		result = "FAIL"
	}
	sum.add(fmt.Sprintf("chaos: scenario=security db=%s checks=%d failed=%d canary_runs=%d canary_serving=%d result=%s",
		db, s.checks, s.failed, runs, serving, result))
}

// canaryDSNs starts nodes and one-shot commands with DSNs whose password is
// a canary, and checks that the canary appears in no log line and no
// response. It returns how many processes it ran and how many of the
// nodes served (the others refused to start, as they should with a DSN that
// does not parse or a password the server refuses).
func canaryDSNs(t *testing.T, s *secCheck, bin string, d database) (runs, serving int) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	canary := "Canary" + hex.EncodeToString(b[:])
	u, err := url.Parse(d.dsn)
	if err != nil {
		t.Fatalf("DSN does not parse")
	}
	withPassword := *u
	withPassword.User = url.UserPassword(u.User.Username(), canary)
	inQuery := *u
	inQuery.User = url.User(u.User.Username())
	q := inQuery.Query()
	q.Set("password", canary)
	inQuery.RawQuery = q.Encode()
	user, host := u.User.Username(), u.Host
	dsns := map[string]string{
		"valid":               withPassword.String(),
		"password in query":   inQuery.String(),
		"bad escape":          u.Scheme + "://" + user + ":" + canary + "%zz@" + host + u.Path,
		"bad port":            u.Scheme + "://" + user + ":" + canary + "@127.0.0.1:99999" + u.Path,
		"bad host":            u.Scheme + "://" + user + ":" + canary + "@[" + host + u.Path,
		"driver syntax":       u.Scheme + "://" + user + ":" + canary + "@tcp(" + host + ")" + u.Path,
		"space in password":   u.Scheme + "://" + user + ":" + canary + " x@" + host + u.Path,
		"unknown param":       withPassword.String() + "&bogus_option=%zz",
		"wrong scheme":        "pg://" + user + ":" + canary + "@" + host + u.Path,
		"no scheme separator": u.Scheme + ":" + user + ":" + canary + "@" + host + u.Path,
	}
	dir := t.TempDir()
	for _, form := range sortedKeys(dsns) {
		dsn := dsns[form]
		// One-shot commands.
		for _, args := range [][]string{{"migrate", "status", "--dsn", dsn}, {"leases", "--dsn", dsn}, {"namespaces", "list", "--dsn", dsn}} {
			out, _ := runIdgen(t, bin, args...)
			runs++
			s.expect(!strings.Contains(out, canary), "idgen %s with a %s DSN: the password is in the output:\n%s", args[0], form, out)
		}
		// serve, with the DSN as a flag and from the environment.
		for _, viaEnv := range []bool{false, true} {
			logPath := filepath.Join(dir, fmt.Sprintf("%s-%v.log", regexp.MustCompile(`\W+`).ReplaceAllString(form, "_"), viaEnv))
			responses, served := serveCanary(t, bin, dsn, viaEnv, logPath)
			runs++
			if served {
				serving++
			}
			logb, _ := os.ReadFile(logPath)
			s.expect(!bytes.Contains(logb, []byte(canary)), "idgen serve with a %s DSN (env %v): the password is in the log:\n%s", form, viaEnv, logb)
			s.expect(!strings.Contains(responses, canary), "idgen serve with a %s DSN (env %v): the password is in a response:\n%s", form, viaEnv, responses)
		}
	}
	return runs, serving
}

// serveCanary runs `idgen serve` with dsn for a few seconds, reads every
// page it serves, stops it, and returns the responses and whether it served.
func serveCanary(t *testing.T, bin, dsn string, viaEnv bool, logPath string) (string, bool) {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"serve", "--listen", addr, "--holder", "canary", "--lease-ttl", leaseTTL.String(),
		"--heartbeat", heartbeat.String(), "--worker-ids", "4-5", "--admin-token", adminToken, "--drain-window", "0"}
	env := testkit.Env()
	if viaEnv {
		env = append(env, "IDGEN_DSN="+dsn)
	} else {
		args = append(args, "--dsn", dsn)
	}
	p := testkit.Start(t, testkit.Spec{Name: "canary", Bin: bin, Args: args, Env: env, Log: logPath})
	defer p.Kill()
	n := &node{addr: addr, client: newHTTPClient()}
	defer n.client.CloseIdleConnections()
	var responses strings.Builder
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return "", false // it refused to start: only the log matters
		}
		if code, _, err := n.get(context.Background(), "/healthz", nil); err == nil && code == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, err := n.get(context.Background(), "/healthz", nil); err != nil || code != 200 {
		return "", false
	}
	n.waitReady(leaseTTL + time.Second)
	for _, path := range []string{"/", "/readyz", "/metrics", "/ids?count=3", "/admin/leases", "/admin/namespaces", "/nope"} {
		_, _, body := do(t, n, "GET", path, bearer(adminToken), nil)
		responses.Write(body)
		responses.WriteByte('\n')
	}
	p.Signal(t, syscall.SIGINT)
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
	}
	return responses.String(), true
}

// runFuzz runs httpapi's fuzz target of the /ids query parsing for 60 s.
// fuzzBudget is the number of FuzzIDsQuery executions CI runs.
const fuzzBudget = "150000x"

func runFuzz(t *testing.T, sum *summaries) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "httpapi", "*_test.go"))
	found := false
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("func FuzzIDsQuery(")) {
			found = true
		}
	}
	if !found {
		sum.add("chaos: scenario=fuzz-ids-query db=none fuzztime=" + fuzzBudget + " result=FAIL")
		t.Fatalf("httpapi has no FuzzIDsQuery target")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// A count budget (about a minute here), not a duration: Go 1.26's fuzz
	// coordinator can end a timed run with a spurious "context deadline
	// exceeded" (golang/go#75804).
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "FuzzIDsQuery", "-fuzztime", fuzzBudget, "./httpapi/")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	result := "PASS"
	if err != nil {
		result = "FAIL"
		t.Errorf("go test -run '^$' -fuzz FuzzIDsQuery -fuzztime %s ./httpapi/: %v\n%s", fuzzBudget, err, out)
	}
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndex(last, "fuzz: elapsed"); i >= 0 {
		last = strings.SplitN(last[i:], "\n", 2)[0]
	}
	t.Logf("%s", last)
	sum.add(fmt.Sprintf("chaos: scenario=fuzz-ids-query db=none fuzztime=%s result=%s", fuzzBudget, result))
}
