package stores

import (
	"errors"
	"os"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/snowflake"
)

func TestMain(m *testing.M) { os.Exit(testkit.EtcdMain(m)) }

func TestDialect(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://h/db", "postgres"},
		{"postgresql://h/db", "postgres"},
		{"mysql://h/db", "mysql"},
		{"sqlite:x.db", "sqlite"},
		{"etcd://h1:2379,h2:2379/idgen", "etcd"},
		{"etcds://u:p@h1/idgen", "etcd"},
		{"etcd:/h", ""},
		{"redis://h", ""},
	} {
		if got := Dialect(tc.dsn); got != tc.want {
			t.Errorf("Dialect(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

// TestOpenEtcd opens an etcd DSN through Open and runs its migrations the
// way idgen serve and idgen migrate do.
func TestOpenEtcd(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, testkit.EtcdDSN(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })

	states := func() []goose.State {
		t.Helper()
		p, err := s.Migrations()
		if err != nil {
			t.Fatalf("Migrations: %v", err)
		}
		defer p.Close()
		st, err := p.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		var out []goose.State
		for _, m := range st {
			out = append(out, m.State)
		}
		return out
	}
	if got := states(); len(got) != 1 || got[0] != goose.StatePending {
		t.Fatalf("status of a fresh prefix: got %v, want one pending migration", got)
	}
	p, err := s.Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	res, err := p.Up(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("Up: applied %d, %v; want 1", len(res), err)
	}
	if res, err := p.Up(ctx); err != nil || len(res) != 0 {
		t.Errorf("second Up: applied %d, %v; want none", len(res), err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 1 {
		t.Errorf("GetDBVersion: %d, %v; want 1", v, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("close provider: %v", err)
	}
	if got := states(); len(got) != 1 || got[0] != goose.StateApplied {
		t.Errorf("status after Up: got %v, want one applied migration", got)
	}

	// The store still works after the provider closed.
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after closing the provider: %v", err)
	}
	if _, err := s.EnsureLayout(ctx, snowflake.Layout{}); err != nil {
		t.Fatalf("EnsureLayout: %v", err)
	}
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}

	// Down deletes the store's keys, as the SQL stores drop their tables.
	p, err = s.Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	defer p.Close()
	if _, err := p.Down(ctx); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if _, err := s.GetNamespace(ctx, "orders"); !errors.Is(err, allocator.ErrNamespaceNotFound) {
		t.Errorf("GetNamespace after Down: got %v, want ErrNamespaceNotFound", err)
	}
	if got := states(); len(got) != 1 || got[0] != goose.StatePending {
		t.Errorf("status after Down: got %v, want one pending migration", got)
	}
}
