package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// waitBound bounds the waits of these tests; no test passes or fails on how
// long anything took.
const waitBound = 30 * time.Second

func TestValidate(t *testing.T) {
	ok := app.Config{DSN: "sqlite:idgen.db"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate of %+v: got %v, want nil", ok, err)
	}
	tests := []struct {
		name   string
		change func(*app.Config)
		want   string // in the message
	}{
		{"no DSN", func(c *app.Config) { c.DSN = "" }, "invalid Config.DSN: unknown DSN scheme"},
		{"unknown scheme", func(c *app.Config) { c.DSN = "redis://u:secret@h/0" }, "unknown DSN scheme"},
		{"@ in the password", func(c *app.Config) { c.DSN = "postgres://alice:abc@secret@127.0.0.1:5432/x" }, "as %40"},
		{"@ in a parameter", func(c *app.Config) { c.DSN = "mysql://root@127.0.0.1:3306/x?password=a@secret" }, "as %40"},
		{"listen without port", func(c *app.Config) { c.Listen = "localhost" }, "want host:port"},
		{"max count negative", func(c *app.Config) { c.MaxCount = -1 }, "invalid Config.MaxCount -1: want 1 to 262144"},
		{"max count too large", func(c *app.Config) { c.MaxCount = allocator.MaxDrawCount + 1 }, "want 1 to"},
		{"max count above the limit", func(c *app.Config) { c.MaxCount = idgen.MaxCountLimit + 1 }, "want 1 to 262144"},
		{"ttl too short", func(c *app.Config) { c.Keeper.TTL = time.Millisecond }, "invalid KeeperSettings.TTL 1ms: want at least 1s"},
		{"heartbeat too long", func(c *app.Config) { c.Keeper.Heartbeat = time.Minute }, "invalid KeeperSettings.Heartbeat 1m0s: want more than 0 and at most half of KeeperSettings.TTL 30s"},
		{"datacenter beyond layout", func(c *app.Config) { c.Keeper.DatacenterID = 32 }, "invalid KeeperSettings.DatacenterID 32: the layout allows 0 to 31"},
		{"negative shutdown timeout", func(c *app.Config) { c.ShutdownTimeout = -time.Second }, "invalid Config.ShutdownTimeout -1s"},
		{"negative open timeout", func(c *app.Config) { c.OpenTimeout = -time.Second }, "invalid Config.OpenTimeout -1s"},
		{"compact retention too short", func(c *app.Config) { c.EtcdCompactRetention = 500 * time.Millisecond }, "invalid Config.EtcdCompactRetention 500ms: want at least 1s, or off"},
		{"negative space interval", func(c *app.Config) { c.SpaceInterval = -time.Second }, "invalid Config.SpaceInterval -1s"},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the DSN's password: %v", tt.name, err)
		}
		// Open refuses it the same way, before touching anything.
		if a, err := app.Open(context.Background(), c); err == nil || a != nil {
			t.Errorf("%s: Open got %v, %v; want no App and an error", tt.name, a, err)
		}
	}
	// A store given needs no DSN.
	if err := (app.Config{Store: testserver.OpenStore(t, "sqlite")}).Validate(); err != nil {
		t.Errorf("Validate with a Store and no DSN: got %v, want nil", err)
	}
}

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		code, body := get(t, base+"/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within %s: %d %s", waitBound, code, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLifecycle runs a node on every database from a DSN, as idgen serve
// does: Open migrates and claims, Serve serves on the port Addr reports,
// and Close returns the segment tail, releases the lease and closes the
// store, in that order, after which Serve has returned nil.
func TestLifecycle(t *testing.T) {
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) {
			dsn := testserver.StoreDSN(t, dialect)
			logs := &testserver.LogBuffer{}
			a, err := app.Open(context.Background(), app.Config{
				DSN: dsn, Migrate: true, Listen: "127.0.0.1:0",
				Keeper: allocator.KeeperSettings{Holder: "lifecycle", WorkerIDs: &allocator.WorkerRange{Min: 7, Max: 7}},
				Logger: slog.New(slog.NewTextHandler(logs, nil)),
			})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			serveErr := make(chan error, 1)
			go func() { serveErr <- a.Serve() }()
			base := "http://" + a.Addr().String()
			if _, port, _ := net.SplitHostPort(a.Addr().String()); port == "0" {
				t.Fatalf("Addr: got %s, want the port the system picked", a.Addr())
			}
			waitReady(t, base)
			if _, err := a.Store().CreateNamespace(context.Background(), allocator.Namespace{
				Name: "orders", Step: 100, MinStep: 100, MaxStep: 100, Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone,
			}); err != nil {
				t.Fatal(err)
			}
			var got struct{ IDs []string }
			code, body := get(t, base+"/ids?count=3&namespace=orders")
			if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil || strings.Join(got.IDs, ",") != "1,2,3" {
				t.Fatalf("GET /ids?count=3&namespace=orders: got %d %s, want IDs 1,2,3", code, body)
			}
			if a.Durability() != "ok" {
				t.Errorf("Durability: got %q, want ok", a.Durability())
			}

			if err := a.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case err := <-serveErr:
				if err != nil {
					t.Errorf("Serve after Close: got %v, want nil", err)
				}
			default:
				t.Errorf("Close returned before Serve did")
			}
			if err := a.Close(context.Background()); err != nil {
				t.Errorf("second Close: got %v, want the first one's nil", err)
			}
			if err := a.Store().Ping(context.Background()); err == nil {
				t.Errorf("Ping after Close: got nil, want an error: Close closes the store Open opened")
			}
			if _, err := net.DialTimeout("tcp", a.Addr().String(), time.Second); err == nil {
				t.Errorf("the listener still accepts after Close")
			}

			// The order of the shutdown steps.
			out, at := logs.String(), -1
			for _, step := range []string{`msg="shutting down`, `msg="http server stopped"`, `msg="segment tail returned"`,
				`msg="segment allocator stopped"`, `msg="lease released"`, `msg="lease keeper stopped"`, `msg="idgen stopped"`} {
				i := strings.Index(out, step)
				if i <= at {
					t.Fatalf("log line %s missing or out of order:\n%s", step, out)
				}
				at = i
			}

			// In the database: the lease released, the tail returned.
			s := testserver.OpenStoreDSN(t, dsn)
			leases, err := s.ListLeases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range leases {
				if l.WorkerID == 7 && (l.Holder != "" || l.ReleasedAt.IsZero()) {
					t.Errorf("lease after Close: got %+v, want released", l)
				}
			}
			ns, err := s.GetNamespace(context.Background(), "orders")
			if err != nil || ns.MaxID != 3 {
				t.Errorf("orders after Close: got max_id %d (%v), want 3: the tail returned", ns.MaxID, err)
			}
		})
	}
}

// TestOpenListensFirst: a node whose address is taken fails Open before it
// touches the database: no migration (the SQLite file named by the DSN is
// never created), no lease claimed and released, no lease event; a store
// it was given stays open. A pod restarting in a loop on a taken port
// must not write to the database at every start.
func TestOpenListensFirst(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	keeper := allocator.KeeperSettings{Holder: "listens-first", WorkerIDs: &allocator.WorkerRange{Min: 3, Max: 3}}

	file := filepath.Join(t.TempDir(), "idgen.db")
	a, err := app.Open(context.Background(), app.Config{DSN: "sqlite:" + file, Migrate: true, Listen: taken.Addr().String(), Keeper: keeper})
	if err == nil || a != nil {
		t.Fatalf("Open on a taken address: got %v, %v; want an error and no App", a, err)
	}
	if !strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("Open on a taken address: got %v, want a listen error naming the address", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open on a taken address touched the database: stat %s: got %v, want not exist", file, err)
	}

	store := testserver.OpenStore(t, "sqlite")
	a, err = app.Open(context.Background(), app.Config{Store: store, Listen: taken.Addr().String(), Keeper: keeper})
	if err == nil || a != nil {
		t.Fatalf("Open on a taken address with a store: got %v, %v; want an error and no App", a, err)
	}
	if err := store.Ping(context.Background()); err != nil {
		t.Errorf("the store given is closed after a failed Open: %v", err)
	}
	leases, err := store.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 0 {
		t.Errorf("after an Open that could not listen: got leases %+v, want none ever claimed", leases)
	}
	events, err := store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Errorf("after an Open that could not listen: got lease events %+v, want none", events)
	}
}

// TestOpenRefusesLayout: a database that records another layout is
// refused with allocator.ErrLayoutMismatch.
func TestOpenRefusesLayout(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	if _, err := store.EnsureLayout(context.Background(), snowflake.DefaultLayout()); err != nil {
		t.Fatal(err)
	}
	other := snowflake.DefaultLayout()
	other.WorkerBits, other.SequenceBits = 6, 11
	_, err := app.Open(context.Background(), app.Config{Store: store, Listen: "127.0.0.1:0", Keeper: allocator.KeeperSettings{Layout: other}})
	if !errors.Is(err, allocator.ErrLayoutMismatch) {
		t.Fatalf("Open with another layout: got %v, want ErrLayoutMismatch", err)
	}
}

// TestCloseBeforeServe: a node closed before it served closes its
// listener, and Serve then returns ErrClosed; a store given stays open.
func TestCloseBeforeServe(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	a, err := app.Open(context.Background(), app.Config{Store: store, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Serve(); !errors.Is(err, app.ErrClosed) {
		t.Errorf("Serve after Close: got %v, want ErrClosed", err)
	}
	if _, err := net.DialTimeout("tcp", a.Addr().String(), time.Second); err == nil {
		t.Errorf("the listener still accepts after Close")
	}
	if err := store.Ping(context.Background()); err != nil {
		t.Errorf("the store given is closed by Close: %v", err)
	}
}

// TestClockInjected: the IDs carry Config.Clock's time.
func TestClockInjected(t *testing.T) {
	clock := snowflake.NewShiftedClock(nil, 3*time.Second)
	a, err := app.Open(context.Background(), app.Config{Store: testserver.OpenStore(t, "sqlite"), Listen: "127.0.0.1:0", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	deadline := time.Now().Add(waitBound)
	for a.Keeper().Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready within %s: %v", waitBound, a.Keeper().Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := time.Now()
	id, err := a.Keeper().Next()
	if err != nil {
		t.Fatal(err)
	}
	at := a.Keeper().Layout().Decompose(id).Time
	if lo := before.Add(2 * time.Second); at.Before(lo) {
		t.Errorf("ID time %s: want the injected clock's, at least %s", at, lo)
	}
}
