package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/internal/testkit"
)

// unsafePostgres creates a PostgreSQL database whose sessions commit with
// synchronous_commit=off (ALTER DATABASE … SET on that database only; the
// server is shared) and returns its DSN and name. It is dropped when t
// ends.
func unsafePostgres(t *testing.T) (dsn, name string) {
	t.Helper()
	u, err := url.Parse(testkit.Postgres(t)) // the server, and a fresh name
	if err != nil {
		t.Fatal(err)
	}
	name = "idgen_unsafe_" + strings.TrimPrefix(u.Query().Get("search_path"), "idgen_")
	name = name[:min(len(name), 63)]
	ident := pgx.Identifier{name}.Sanitize()
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	if err := exec(ctx, "ALTER DATABASE "+ident+" SET synchronous_commit = off"); err != nil {
		t.Fatalf("turn synchronous_commit off for %s: %v", name, err)
	}
	d := *u
	d.Path = "/" + name
	q := d.Query()
	q.Del("search_path")
	d.RawQuery = q.Encode()
	return d.String(), name
}

// readyDurability is the part of /readyz about durability.
type readyDurability struct {
	Ready      bool   `json:"ready"`
	Durability string `json:"durability"`
}

// TestServeRefusesUnsafeDurability starts idgen serve on a database whose
// commits a crash can undo (synchronous_commit=off for that database): it
// must refuse with exit code 1 and one line naming the setting, its value
// and the fix, and change nothing in the database.
func TestServeRefusesUnsafeDurability(t *testing.T) {
	dsn, name := unsafePostgres(t)
	// A node that serves anyway is stopped after a while, so that the test
	// fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 2*startTimeout)
	defer cancel()
	r := cliCtx(ctx, t, nil, "serve", "--listen", "127.0.0.1:0", "--dsn", dsn)
	if r.code != 1 {
		t.Fatalf("got exit code %d, want 1\nstderr:\n%s", r.code, r.stderr)
	}
	ls := lines(r.stderr)
	last := ls[len(ls)-1]
	for _, want := range []string{
		"idgen: ",
		"synchronous_commit=off",
		"ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " RESET synchronous_commit",
		"--allow-unsafe-durability",
	} {
		if !strings.Contains(last, want) {
			t.Errorf("got last stderr line %q, want it to contain %q", last, want)
		}
	}
	if strings.Contains(r.stderr, "idgen serving") {
		t.Errorf("the node served on an unsafe database:\n%s", r.stderr)
	}
	// Refused before migrating: the database has no idgen table.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables
		WHERE table_name IN ('worker_leases', 'segments', 'goose_db_version')`).Scan(&tables); err != nil {
		t.Fatalf("count tables: %v", err)
	}
	if tables != 0 {
		t.Errorf("got %d idgen tables after the refusal, want none", tables)
	}
}

// TestServeUnsafeDurabilityOverridden starts the same node with
// --allow-unsafe-durability: it serves, logs the override at warn level and
// shows it on /readyz and the status page, while readiness is still the
// lease's.
func TestServeUnsafeDurabilityOverridden(t *testing.T) {
	dsn, _ := unsafePostgres(t)
	n := startNode(t, "--dsn", dsn, "--allow-unsafe-durability")
	var ready readyDurability
	n.getJSON("/readyz", http.StatusOK, &ready)
	const want = "unsafe: synchronous_commit=off (overridden)"
	if !ready.Ready || ready.Durability != want {
		t.Errorf("/readyz: got ready %v durability %q, want true %q", ready.Ready, ready.Durability, want)
	}
	code, _, body := n.get("/")
	if code != http.StatusOK || !strings.Contains(string(body), want) {
		t.Errorf("status page: got %d, want 200 showing %q", code, want)
	}
	logs := n.logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "synchronous_commit=off") {
		t.Errorf("logs lack a warning naming synchronous_commit=off:\n%s", logs)
	}
	n.mustStop()
}

// TestServeSafeDurability: on a safe database (the SQLite default) /readyz
// says so.
func TestServeSafeDurability(t *testing.T) {
	n := startNode(t, "--dsn", testkit.SQLite(t))
	var ready readyDurability
	n.getJSON("/readyz", http.StatusOK, &ready)
	if ready.Durability != "ok" {
		t.Errorf("/readyz: got durability %q, want \"ok\"", ready.Durability)
	}
	n.mustStop()
}

func TestAllowUnsafeDurabilityFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--allow-unsafe-durability"}, nil, true},
		{nil, map[string]string{"IDGEN_ALLOW_UNSAFE_DURABILITY": "true"}, true},
		{nil, map[string]string{"IDGEN_ALLOW_UNSAFE_DURABILITY": "1"}, true},
		{[]string{"--allow-unsafe-durability=false"}, map[string]string{"IDGEN_ALLOW_UNSAFE_DURABILITY": "1"}, false},
	} {
		c, err := parseServe(tc.args, env{getenv: func(k string) string { return tc.env[k] }})
		if err != nil {
			t.Errorf("parseServe(%q, %v): %v", tc.args, tc.env, err)
			continue
		}
		if c.app.AllowUnsafeDurability != tc.want {
			t.Errorf("parseServe(%q, %v): got allowUnsafeDurability %v, want %v", tc.args, tc.env, c.app.AllowUnsafeDurability, tc.want)
		}
	}
}
