package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

// openTest opens a store on a fresh, migrated database file, closed when t
// ends.
var openTest = storetest.Migrated(Open, testkit.SQLite)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
}

func TestRestoreFence(t *testing.T) {
	storetest.RunRestoreFence(t, func(t *testing.T) storetest.FencedStore { return openTest(t) })
}

func TestConnection(t *testing.T) {
	s := openTest(t)
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		// FULL (2): in WAL mode NORMAL lets a committed transaction roll
		// back after a power loss, and a fetched range or a raised ceiling
		// come back.
		{"synchronous", "2"},
	} {
		var got string
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Errorf("PRAGMA %s: %v", tc.pragma, err)
		} else if got != tc.want {
			t.Errorf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
		}
	}
}

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, want string
		ok        bool
	}{
		{"sqlite:idgen.db", "idgen.db", true},
		{"sqlite:/var/lib/idgen/idgen.db", "/var/lib/idgen/idgen.db", true},
		{"sqlite:///var/lib/idgen/idgen.db", "/var/lib/idgen/idgen.db", true},
		{"sqlite:", "", false},
		{"sqlite::memory:", "", false},
		{"sqlite:file:x.db?mode=memory", "", false},
		{"sqlite:x.db?_pragma=foreign_keys(0)", "", false},
		{"idgen.db", "", false},
		{"postgres://localhost/idgen", "", false},
	} {
		got, err := parseDSN(tc.dsn)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseDSN(%q) = %q, %v; want %q, ok %v", tc.dsn, got, err, tc.want, tc.ok)
		}
	}
}

func TestMigrationsLeaveStoreOpen(t *testing.T) {
	storetest.MigrationsLeaveStoreOpen(t, openTest(t))
}

func TestOpenMissingDirectory(t *testing.T) {
	_, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "no", "such", "dir", "idgen.db"))
	if err == nil {
		t.Fatalf("Open in a missing directory succeeded, want an error")
	}
}

func TestCheckDurability(t *testing.T) {
	s := openTest(t)
	risks, err := s.CheckDurability(t.Context())
	if err != nil || len(risks) != 0 {
		t.Fatalf("CheckDurability on a fresh store: got %v, %v; want no risk", risks, err)
	}
	// The same connection, turned unsafe: the check reads it, not a constant.
	if _, err := s.db.ExecContext(t.Context(), "PRAGMA synchronous = NORMAL"); err != nil {
		t.Fatalf("PRAGMA synchronous = NORMAL: %v", err)
	}
	risks, err = s.CheckDurability(t.Context())
	if err != nil || len(risks) != 1 || risks[0].String() != "synchronous=NORMAL" || risks[0].Warning {
		t.Fatalf("CheckDurability with synchronous=NORMAL: got %+v, %v; want one risk synchronous=NORMAL", risks, err)
	}
	for level, want := range map[int]string{0: "synchronous=OFF", 1: "synchronous=NORMAL", 2: "", 3: ""} {
		got := synchronousRisks(level)
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0].String() != want) {
			t.Errorf("synchronousRisks(%d): got %v, want %q", level, got, want)
		}
	}
}

func TestPruneLeaseEventsInBatches(t *testing.T) {
	s := openTest(t)
	s.pruneBatch = 2
	storetest.PruneInBatches(t, s, s.pruneBatch)
}
