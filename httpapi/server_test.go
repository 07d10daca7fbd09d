package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
)

// serve runs e's HTTPServer on a loopback port until the test ends and
// returns its base URL.
func serve(t *testing.T, e *env) (string, *http.Server) {
	t.Helper()
	srv := e.srv.HTTPServer("127.0.0.1:0")
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), srv
}

// answer is an HTTP response with its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func TestHTTPServerLimits(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken})
	base, srv := serve(t, e)

	if srv.MaxHeaderBytes != httpapi.MaxHeaderBytes || srv.ReadHeaderTimeout != 5*time.Second ||
		srv.ReadTimeout != 10*time.Second || srv.WriteTimeout != 30*time.Second || srv.IdleTimeout != 120*time.Second {
		t.Errorf("server limits: got header %d, timeouts %v/%v/%v/%v; want 16384, 5s/10s/30s/120s",
			srv.MaxHeaderBytes, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// send returns req's answer, its body read and closed.
	send := func(req *http.Request) answer {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Method, req.URL, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
		}
		return answer{resp.StatusCode, resp.Header, body}
	}

	t.Run("normal request", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/ids?count=2", nil)
		resp := send(req)
		if resp.status != 200 {
			t.Errorf("GET /ids over TCP: got %d, want 200", resp.status)
		}
	})

	t.Run("oversized header", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/ids", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
		resp := send(req)
		if resp.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB header: got %d, want 431", resp.status)
		}
	})

	bigBody := `{"name":"big","description":"` + strings.Repeat("x", 100<<10) + `"}`
	t.Run("oversized admin body with length", func(t *testing.T) {
		req, _ := http.NewRequest("POST", base+"/admin/namespaces", strings.NewReader(bigBody))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp := send(req)
		if resp.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("100 KiB body: got %d, want 413", resp.status)
		}
		checkProblem(t, resp.status, resp.header.Get("Content-Type"), resp.body)
	})

	t.Run("oversized admin body chunked", func(t *testing.T) {
		// io.MultiReader hides the length, so the body goes chunked.
		req, _ := http.NewRequest("POST", base+"/admin/namespaces", io.MultiReader(strings.NewReader(bigBody)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp := send(req)
		if resp.status != http.StatusRequestEntityTooLarge || req.ContentLength != 0 {
			t.Fatalf("100 KiB chunked body: got %d (request length %d), want 413 (length 0 = unknown)", resp.status, req.ContentLength)
		}
		checkProblem(t, resp.status, resp.header.Get("Content-Type"), resp.body)
	})

	if _, err := e.store.GetNamespace(context.Background(), "big"); !errors.Is(err, allocator.ErrNamespaceNotFound) {
		t.Errorf("after oversized bodies: GetNamespace(big) = %v, want not found", err)
	}

	t.Run("admin body at the limit", func(t *testing.T) {
		// Padding with spaces keeps the JSON valid and the description short.
		body := `{"name":"fits"}`
		body += strings.Repeat(" ", idgen.MaxRequestBytes-len(body))
		req, _ := http.NewRequest("POST", base+"/admin/namespaces", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp := send(req)
		if resp.status != http.StatusCreated {
			t.Errorf("body of exactly %d bytes: got %d, want 201", len(body), resp.status)
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	e := newEnv(t, envOptions{})
	if _, err := httpapi.New(e.config()); err != nil {
		t.Fatalf("New of a whole config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*httpapi.Config)
	}{
		{"no Service", func(c *httpapi.Config) { c.Service = nil }},
		{"no Auth", func(c *httpapi.Config) { c.Auth = nil }},
		{"no Lease", func(c *httpapi.Config) { c.Lease = nil }},
		{"no Segments", func(c *httpapi.Config) { c.Segments = nil }},
		{"no Admin", func(c *httpapi.Config) { c.Admin = nil }},
		{"no Database", func(c *httpapi.Config) { c.Database = nil }},
	} {
		cfg := e.config()
		tc.change(&cfg)
		if _, err := httpapi.New(cfg); err == nil {
			t.Errorf("%s: New returned no error", tc.name)
		}
	}
}

func TestRequestLogsAtDebugOnly(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{token: testToken, logBuffer: logs})
	wantStatus(t, e.do("GET", "/ids?count=1", ""), 200)
	wantStatus(t, e.admin("GET", "/admin/leases", ""), 200)
	wantStatus(t, e.do("GET", "/admin/leases", "", "Authorization", "Bearer not-"+testToken), 403)
	out := logs.String()
	if !strings.Contains(out, `level=DEBUG msg="http request" method=GET route=/ids status=200`) {
		t.Errorf("debug log lacks the request line for /ids:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `msg="http request"`) && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("request logged above debug level: %s", line)
		}
	}
	if strings.Contains(out, testToken) {
		t.Errorf("the log holds the admin token")
	}
}

// brokenStore is a store whose lease listing panics and whose namespace
// listing fails as a database outage would.
type brokenStore struct {
	stores.Store
}

func (brokenStore) ListLeases(context.Context) ([]allocator.Lease, error) {
	panic("injected panic")
}

func (brokenStore) ListNamespaces(context.Context) ([]allocator.Namespace, error) {
	return nil, errors.New("injected: connection refused")
}

func TestStoreFailures(t *testing.T) {
	logs := &testserver.LogBuffer{}
	e := newEnv(t, envOptions{store: brokenStore{testserver.OpenStore(t, "sqlite")}, token: testToken, logBuffer: logs})

	// A panic is an internal error, logged with its stack, not a dropped connection.
	wantStatus(t, e.admin("GET", "/admin/leases", ""), http.StatusInternalServerError)
	if out := logs.String(); !strings.Contains(out, `msg="handler panicked"`) || !strings.Contains(out, "injected panic") {
		t.Errorf("log lacks the panic:\n%s", out)
	}
	// A database failure is 503 with Retry-After.
	rec := e.admin("GET", "/admin/namespaces", "")
	wantStatus(t, rec, http.StatusServiceUnavailable)
	checkRetryAfter(t, rec.Header().Get("Retry-After"))
	// The node still serves Snowflake IDs.
	wantStatus(t, e.do("GET", "/ids", ""), http.StatusOK)
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("the log holds the admin token")
	}
}
