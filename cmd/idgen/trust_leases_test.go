package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/client"
	"github.com/idgen-project/idgen/internal/testserver"
)

// The trust boundary of the lease API, through the binary: what a caller
// with the leases scope can and cannot do to the nodes' own leases.

// postJSON sends body to the node at base with the bearer token, and
// returns the status and the answer.
func postJSON(t *testing.T, base, path, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tokensFile writes a tokens file giving name the ids and leases scopes
// with secret, and returns its path.
func tokensFile(t *testing.T, name, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("%s ids,leases %s\n", name, idgen.HashSecret(secret))), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLeaseAPICannotReleaseNodeLease replays the review's reproduction
// through the binary: a node with --holder svc/node1 and a caller whose
// token is named svc. The caller's release of worker 0 as "node1" at
// version 1 with nothing issued answered 200 and set the node's ceiling to
// 0, after which a generator got worker 0 with floor 1 and issued IDs the
// node had issued. Now the release is refused and changes nothing, the
// lease API grants no worker ID of the node's pool, and the IDs of the
// node and of a generator never meet. A node holder name in the lease
// API's namespace is refused at start.
func TestLeaseAPICannotReleaseNodeLease(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	const secret = "trust-test-svc-secret"
	dsn := "sqlite:" + filepath.Join(dir, "idgen.db")
	p := startBinary(t, bin, dir, env, "--dsn", dsn, "--holder", "svc/node1", "--worker-ids", "0-0",
		"--tokens-file", tokensFile(t, "svc", secret), "--lease-ttl", "30s")
	n := p.node()
	n.waitReady()
	base := "http://" + p.addr
	bearer := http.Header{"Authorization": {"Bearer " + secret}}

	var first idsResponse
	code, _, body := n.do(http.MethodGet, "/ids?count=1000", bearer)
	if code != 200 || json.Unmarshal(body, &first) != nil {
		t.Fatalf("GET /ids: %d %s", code, body)
	}
	store := testserver.OpenStoreDSN(t, dsn)
	before, err := store.ListLeases(context.Background())
	if err != nil || len(before) == 0 || before[0].Holder != "svc/node1" {
		t.Fatalf("lease rows: %+v, %v; want worker 0 held by svc/node1", before, err)
	}
	own := before[0]

	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"the reproduction's release", "/v1/leases/0/0/release", `{"holder":"node1","fencing_version":1,"last_timestamp_ms":0}`, 400},
		{"with a guessed secret", "/v1/leases/0/0/release",
			fmt.Sprintf(`{"holder":"node1","fencing_version":%d,"lease_secret":%q,"none_issued":true}`, own.FencingVersion, strings.Repeat("A", 43)), 409},
		{"a heartbeat with a guessed secret", "/v1/leases/0/0/heartbeat",
			fmt.Sprintf(`{"holder":"node1","fencing_version":%d,"lease_secret":%q,"ttl_ms":3000}`, own.FencingVersion, strings.Repeat("A", 43)), 409},
		{"an acquire of the node's worker ID", "/v1/leases", `{"holder":"node1","workers":{"min":0,"max":0}}`, 400},
	} {
		if code, body := postJSON(t, base, tc.path, secret, tc.body); code != tc.want {
			t.Errorf("%s: got %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	after, err := store.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := after[0]; got.Holder != own.Holder || got.FencingVersion != own.FencingVersion || got.CeilingMS < own.CeilingMS || !got.ReleasedAt.IsZero() {
		t.Errorf("the node's row after the caller's attempts: %+v, want it held by %s at version %d, ceiling at least %d",
			got, own.Holder, own.FencingVersion, own.CeilingMS)
	}

	// A generator of the same caller: never the node's worker ID.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.NewGenerator(ctx, base, client.GeneratorOptions{Token: secret, Holder: "gen-0", Workers: &client.WorkerRange{Min: 0, Max: 0}}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("generator on the node's worker ID: got %v, want ErrInvalid", err)
	}
	g, err := client.NewGenerator(ctx, base, client.GeneratorOptions{Token: secret, Holder: "gen-1"})
	if err != nil {
		t.Fatalf("generator: %v", err)
	}
	defer g.Close(context.Background())
	if w := g.Status().Lease.WorkerID; w == 0 {
		t.Fatalf("generator leased the node's worker ID 0")
	}
	gen, err := g.NextN(nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var second idsResponse
	code, _, body = n.do(http.MethodGet, "/ids?count=1000", bearer)
	if code != 200 || json.Unmarshal(body, &second) != nil {
		t.Fatalf("GET /ids: %d %s", code, body)
	}
	seen := map[int64]string{}
	for who, ids := range map[string][]int64{"node": ints(t, append(first.IDs, second.IDs...)), "generator": gen} {
		for _, id := range ids {
			if prev, dup := seen[id]; dup {
				t.Fatalf("ID %d issued by the %s and the %s", id, prev, who)
			}
			seen[id] = who
		}
	}
	if len(seen) != 3000 {
		t.Errorf("got %d distinct IDs, want 3000", len(seen))
	}

	// A node may not name itself like a holder of the lease API.
	code, _, stderr := runBinary(t, bin, dir, env, "serve", "--dsn", dsn, "--holder", "api:svc/node1", "--listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, `"api:"`) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
		t.Errorf("serve --holder api:svc/node1: exit %d, %q; want exit 2 and one or two lines naming the api: prefix", code, stderr)
	}
}

// TestLeaseAPICannotLockOutNodes: one token's 40 acquires at once take at
// most --lease-api-max-leases worker IDs, all outside the node's
// --worker-ids 0-1, so the node restarts and becomes ready; the cap is
// the flag's.
func TestLeaseAPICannotLockOutNodes(t *testing.T) {
	bin := buildBinary(t)
	const secret = "trust-test-caller-secret"
	for _, tc := range []struct {
		name  string
		flags []string
		max   int
	}{
		{"defaults", nil, 8},
		{"a cap of 3", []string{"--lease-api-max-leases", "3", "--lease-api-acquire-burst", "100"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			args := []string{"--dsn", "sqlite:" + filepath.Join(dir, "idgen.db"), "--worker-ids", "0-1",
				"--tokens-file", tokensFile(t, "caller", secret)}
			p := startBinary(t, bin, dir, env, append(args, tc.flags...)...)
			p.node().waitReady()
			base := "http://" + p.addr
			granted, limited := 0, 0
			for i := range 40 {
				code, body := postJSON(t, base, "/v1/leases", secret, fmt.Sprintf(`{"holder":"h-%d","ttl_ms":300000}`, i))
				switch code {
				case http.StatusCreated:
					granted++
					var g struct{ Worker int64 }
					if err := json.Unmarshal(body, &g); err != nil || g.Worker < 2 {
						t.Errorf("acquire %d: worker %d (%s), want one of 2-31", i, g.Worker, body)
					}
				case http.StatusTooManyRequests:
					limited++
					if !bytes.Contains(body, []byte(`"too_many"`)) {
						t.Errorf("acquire %d: 429 %s, want code too_many", i, body)
					}
				default:
					t.Errorf("acquire %d: %d %s", i, code, body)
				}
			}
			if granted != tc.max || limited != 40-tc.max {
				t.Errorf("40 acquires: %d granted and %d refused 429, want %d and %d", granted, limited, tc.max, 40-tc.max)
			}
			if code := p.terminate(); code != 0 {
				t.Fatalf("SIGTERM: exit %d\n%s", code, p.logs)
			}
			// Restarted while the caller's leases live on, the node gets one
			// of its own worker IDs.
			again := startBinary(t, bin, dir, env, args...)
			again.node().waitReady()
			if code := again.terminate(); code != 0 {
				t.Fatalf("SIGTERM after the restart: exit %d\n%s", code, again.logs)
			}
		})
	}
}
