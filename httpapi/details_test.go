package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
)

// storeInternals is the error text of a store that cannot be reached, as
// the etcd store writes it: its user, a member's address and its prefix.
const storeInternals = "etcd: ping etcd://svc-idgen@10.9.8.7:2379/prod-ids-prefix: context deadline exceeded"

// unreachableStore fails the calls of the probes and of the status page as
// a store that cannot be reached does, while down is set; the keeper's
// lease calls go through, so the node stays ready.
type unreachableStore struct {
	stores.Store
	down *atomic.Bool
}

func (s unreachableStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errors.New(storeInternals)
	}
	return s.Store.Ping(ctx)
}

func (s unreachableStore) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	if s.down.Load() {
		return nil, errors.New(storeInternals)
	}
	return s.Store.ListLeases(ctx)
}

func (s unreachableStore) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	if s.down.Load() {
		return nil, errors.New(storeInternals)
	}
	return s.Store.ListNamespaces(ctx)
}

// TestStoreInternalsNotShown: with the store unreachable, /readyz and the
// status page tell a request without a token (or with a token of another
// scope) "database unreachable", never the store's user, address or key
// prefix; a request with the admin scope sees the error itself; the log
// has it once, however many probes found it, and says once that the
// database answers again.
func TestStoreInternalsNotShown(t *testing.T) {
	down := &atomic.Bool{}
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{store: unreachableStore{testserver.OpenStore(t, "sqlite"), down}, tokens: testTokens, token: testToken, logBuffer: logs})
	e.createNamespace(allocator.Namespace{Name: "orders", Description: "order numbers"})
	down.Store(true)

	leaks := []string{"svc-idgen", "10.9.8.7", "prod-ids-prefix", "etcd://"}
	for _, who := range []struct {
		name   string
		header []string
	}{
		{"no token", nil},
		{"a token of the ids scope", bearer(secretIDs)},
		{"a wrong token", bearer(secretNobody)},
	} {
		for range 3 {
			rec := e.do("GET", "/readyz", "", who.header...)
			var r readyResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("/readyz with %s: %v in %s", who.name, err, rec.Body)
			}
			if rec.Code != 200 || r.Database.Reachable || r.Database.Error != "database unreachable" {
				t.Errorf("/readyz with %s, store down: got %d %+v, want 200 (the lease decides) and database.error %q",
					who.name, rec.Code, r.Database, "database unreachable")
			}
			if r.Lease == nil || r.Lease.Holder != "" || r.Lease.FencingVersion != 0 {
				t.Errorf("/readyz with %s: got lease %+v, want one without holder and fencing version", who.name, r.Lease)
			}
		}
		page := e.do("GET", "/", "", who.header...).Body.String()
		if !strings.Contains(page, "database unreachable") {
			t.Errorf("status page with %s, store down: does not say %q", who.name, "database unreachable")
		}
		for _, leak := range leaks {
			for what, body := range map[string]string{"/readyz": e.do("GET", "/readyz", "", who.header...).Body.String(), "/": page} {
				if strings.Contains(body, leak) {
					t.Errorf("%s with %s shows the store's %q:\n%s", what, who.name, leak, body)
				}
			}
		}
	}

	// The admin scope, by a token or by the admin token, sees the error.
	for _, header := range [][]string{bearer(secretAdmin), {"Authorization", "Bearer " + testToken}} {
		var r readyResponse
		if err := json.Unmarshal(e.do("GET", "/readyz", "", header...).Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Database.Error != storeInternals || r.Lease == nil || r.Lease.Holder == "" {
			t.Errorf("/readyz with the admin scope: got %+v, lease %+v; want the store's error and the holder", r.Database, r.Lease)
		}
		if page := e.do("GET", "/", "", header...).Body.String(); !strings.Contains(page, "10.9.8.7") {
			t.Errorf("status page with the admin scope lacks the store's error")
		}
	}

	for _, line := range []string{`msg="database ping failed"`, `msg="status page: reading the lease table failed"`, `msg="status page: reading the namespaces failed"`} {
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("log: got %d lines %s, want 1 however many probes failed:\n%s", n, line, logs)
		}
	}
	if !strings.Contains(logs.String(), "10.9.8.7") {
		t.Errorf("the log lacks the store's error:\n%s", logs)
	}

	down.Store(false)
	deadline := time.Now().Add(30 * time.Second) // a bound on a hang: the ping is cached for a second
	for {
		var r readyResponse
		if err := json.Unmarshal(e.do("GET", "/readyz", "").Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Database.Reachable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still reports the database unreachable 30s after it came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.do("GET", "/readyz", "")
	if n := strings.Count(logs.String(), `msg="database ping succeeds again"`); n != 1 {
		t.Errorf("log: got %d lines saying the database answers again, want 1:\n%s", n, logs)
	}
}

// TestPublicStatusDetails: a node run with PublicStatusDetails shows the
// holder and fencing version on /readyz to requests without a token; the
// store's error text still only to the admin scope (the status page's part
// is statuspage.TestPublicDetails).
func TestPublicStatusDetails(t *testing.T) {
	down := &atomic.Bool{}
	e := newEnv(t, envOptions{store: unreachableStore{testserver.OpenStore(t, "sqlite"), down}, token: testToken})
	e.createNamespace(allocator.Namespace{Name: "orders", Description: "order numbers"})
	cfg := e.config()
	cfg.Auth = idgen.NewAuthorizer(testToken, nil)
	cfg.PublicStatusDetails = true
	h := e.handler(cfg)
	pub := &env{tb: t, h: h}

	var r readyResponse
	if err := json.Unmarshal(pub.do("GET", "/readyz", "").Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Lease == nil || r.Lease.Holder != e.keeper.Holder() || r.Lease.FencingVersion < 1 {
		t.Errorf("/readyz with public details: got lease %+v, want holder %q and its fencing version", r.Lease, e.keeper.Holder())
	}
	down.Store(true)
	deadline := time.Now().Add(30 * time.Second) // a bound on a hang: the last ping is cached for a second
	for {
		body := pub.do("GET", "/readyz", "").Body.String()
		if strings.Contains(body, "10.9.8.7") {
			t.Fatalf("/readyz with public details, store down: got %s, want %q and not the store's error", body, "database unreachable")
		}
		if strings.Contains(body, "database unreachable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with public details still finds the database reachable 30s after it went down: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
