package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testserver"
)

// openServing opens a node on a SQLite file with drain window w, serves
// it and waits until it is ready.
func openServing(t *testing.T, w time.Duration, logs *testserver.LogBuffer) (*app.App, string) {
	t.Helper()
	a, err := app.Open(context.Background(), app.Config{
		DSN: "sqlite:" + filepath.Join(t.TempDir(), "idgen.db"), Migrate: true, Listen: "127.0.0.1:0",
		Keeper:      allocator.KeeperSettings{Holder: "drain", WorkerIDs: &allocator.WorkerRange{Min: 3, Max: 3}},
		DrainWindow: w,
		Logger:      slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	t.Cleanup(func() {
		_ = a.Close(context.Background())
		if err := <-serveErr; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + a.Addr().String()
	waitReady(t, base)
	return a, base
}

// healthStatus asks the gRPC health service (in the Connect protocol,
// JSON) for the status of the server as a whole.
func healthStatus(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Post(base+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDrainOrder: Drain turns /readyz and gRPC health not ready at once
// while /ids keeps answering, and lasts until its window ends or its ctx
// does (a second signal); Close then stops accepting and releases the
// lease. The window is a minute, ended by the ctx: the test asserts the
// order of the steps, never how long one took.
func TestDrainOrder(t *testing.T) {
	logs := &testserver.LogBuffer{}
	a, base := openServing(t, time.Minute, logs)
	if got := healthStatus(t, base); !strings.Contains(got, `"SERVING_STATUS_SERVING"`) {
		t.Fatalf("health before Drain: got %s, want SERVING", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(ctx) }()
	deadline := time.Now().Add(waitBound)
	for !a.Draining() {
		if time.Now().After(deadline) {
			t.Fatalf("Draining still false %s after Drain", waitBound)
		}
		time.Sleep(time.Millisecond)
	}
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting down") {
		t.Errorf("/readyz while draining: got %d %s, want 503 saying the node is shutting down", code, body)
	}
	if got := healthStatus(t, base); !strings.Contains(got, `"SERVING_STATUS_NOT_SERVING"`) {
		t.Errorf("health while draining: got %s, want NOT_SERVING", got)
	}
	for i := range 3 {
		resp, err := http.Get(base + "/ids?count=2")
		if err != nil {
			t.Fatalf("GET /ids while draining (%d): %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !resp.Close {
			t.Errorf("GET /ids while draining: got %d, connection close %v; want 200 and the connection closed", resp.StatusCode, resp.Close)
		}
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v before its window or its ctx ended", err)
	default:
	}

	cancel() // the second signal
	select {
	case err := <-drained:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Drain after its ctx ended: got %v, want context.Canceled", err)
		}
	case <-time.After(waitBound):
		t.Fatalf("Drain still running %s after its ctx ended", waitBound)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out, at := logs.String(), -1
	for _, step := range []string{`msg="draining: not ready`, `msg="drain window cut short"`, `msg="shutting down`,
		`msg="http server stopped"`, `msg="lease released"`} {
		i := strings.Index(out, step)
		if i <= at {
			t.Fatalf("log line %s missing or out of order:\n%s", step, out)
		}
		at = i
	}
}

// TestDrainWindowEnds: without a second signal Drain returns nil once its
// window is over; with NoDrainWindow it waits for nothing. Either way the
// node is not ready afterwards and never turns ready again.
func TestDrainWindowEnds(t *testing.T) {
	for _, w := range []time.Duration{50 * time.Millisecond, app.NoDrainWindow} {
		t.Run(w.String(), func(t *testing.T) {
			a, base := openServing(t, w, &testserver.LogBuffer{})
			done := make(chan error, 1)
			go func() { done <- a.Drain(context.Background()) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Drain: got %v, want nil", err)
				}
			case <-time.After(waitBound):
				t.Fatalf("Drain with window %s still running after %s", w, waitBound)
			}
			if err := a.Drain(context.Background()); err != nil {
				t.Errorf("second Drain: got %v, want nil", err)
			}
			if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
				t.Errorf("/readyz after Drain: got %d %s, want 503", code, body)
			}
		})
	}
}
