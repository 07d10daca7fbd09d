package postgres

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

func TestDurabilityRules(t *testing.T) {
	safe := func() map[string]pgSetting {
		return map[string]pgSetting{
			"synchronous_commit":        {"on", "default"},
			"fsync":                     {"on", "default"},
			"full_page_writes":          {"on", "default"},
			"synchronous_standby_names": {"", "default"},
		}
	}
	with := func(name, value, source string) map[string]pgSetting {
		m := safe()
		m[name] = pgSetting{value, source}
		return m
	}
	type want = storetest.WantRisk
	for _, tc := range []struct {
		name     string
		settings map[string]pgSetting
		replicas int
		want     []want
	}{
		{"safe", safe(), 0, nil},
		{"remote_apply", with("synchronous_commit", "remote_apply", "configuration file"), 0, nil},
		{"local without standbys", with("synchronous_commit", "local", "configuration file"), 0, nil},
		{"synchronous_commit off in the configuration", with("synchronous_commit", "off", "configuration file"), 0,
			[]want{{"synchronous_commit=off", false, "set synchronous_commit = on in postgresql.conf"}}},
		{"synchronous_commit off for the database", with("synchronous_commit", "off", "database"), 0,
			[]want{{"synchronous_commit=off", false, `ALTER DATABASE "idgen" RESET synchronous_commit`}}},
		{"synchronous_commit off for the role", with("synchronous_commit", "off", "user"), 0,
			[]want{{"synchronous_commit=off", false, `ALTER ROLE "app" RESET synchronous_commit`}}},
		{"synchronous_commit off for the role in the database", with("synchronous_commit", "off", "database user"), 0,
			[]want{{"synchronous_commit=off", false, `ALTER ROLE "app" IN DATABASE "idgen" RESET synchronous_commit`}}},
		{"synchronous_commit off in the DSN", with("synchronous_commit", "off", "client"), 0,
			[]want{{"synchronous_commit=off", false, "remove synchronous_commit from the DSN"}}},
		{"fsync off", with("fsync", "off", "configuration file"), 0, []want{{"fsync=off", false, "fsync = on"}}},
		{"full_page_writes off", with("full_page_writes", "off", "configuration file"), 0,
			[]want{{"full_page_writes=off", false, "full_page_writes = on"}}},
		{"asynchronous replicas", safe(), 2,
			[]want{{"synchronous_standby_names=''", true, "2 replica(s) stream from this server asynchronously"}}},
		{"synchronous replicas", with("synchronous_standby_names", "ANY 1 (a, b)", "configuration file"), 2, nil},
		{"local with a synchronous standby", func() map[string]pgSetting {
			m := with("synchronous_standby_names", "s1", "configuration file")
			m["synchronous_commit"] = pgSetting{"local", "user"}
			return m
		}(), 1, []want{{"synchronous_commit=local", true, `ALTER ROLE "app" RESET synchronous_commit`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pgServer{settings: tc.settings, database: "idgen", role: "app", replicas: tc.replicas}.durabilityRisks()
			storetest.CheckRisks(t, got, tc.want)
		})
	}
}

// TestRequireSettings checks that the check fails closed: a setting the
// rules need that pg_settings does not show is an error, not a pass.
func TestRequireSettings(t *testing.T) {
	full := map[string]pgSetting{}
	for _, name := range requiredSettings {
		full[name] = pgSetting{"on", "default"}
	}
	if err := (pgServer{settings: full}).requireSettings(); err != nil {
		t.Errorf("all settings shown: got %v, want nil", err)
	}
	for _, name := range requiredSettings {
		settings := maps.Clone(full)
		delete(settings, name)
		err := pgServer{settings: settings}.requireSettings()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: got %v, want an error naming it", name, err)
		}
	}
}

// TestCheckDurability reads the settings of real sessions: the test
// server's (safe), then synchronous_commit turned off for the session
// through the DSN. Nothing is changed on the server. (cmd/idgen's
// TestServeRefusesUnsafeDurability turns it off for a database it creates.)
func TestCheckDurability(t *testing.T) {
	t.Run("server defaults", func(t *testing.T) {
		risks, err := openTest(t).CheckDurability(t.Context())
		if err != nil {
			t.Fatalf("CheckDurability: %v", err)
		}
		if slices.ContainsFunc(risks, func(r allocator.DurabilityRisk) bool { return !r.Warning }) {
			t.Fatalf("got risks %v on the test server, want none (is it configured unsafely?)", risks)
		}
	})
	t.Run("off in the DSN", func(t *testing.T) {
		dsn := storetest.WithParam(t, testkit.Postgres(t), "synchronous_commit", "off")
		checkOneRisk(t, dsn, "synchronous_commit=off", "remove synchronous_commit from the DSN")
	})
}

func checkOneRisk(t *testing.T, dsn, want, fix string) {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	risks, err := s.CheckDurability(t.Context())
	if err != nil {
		t.Fatalf("CheckDurability: %v", err)
	}
	if len(risks) != 1 || risks[0].String() != want || risks[0].Warning || !strings.Contains(risks[0].Fix, fix) {
		t.Fatalf("got risks %+v, want one: %s, fix containing %q", risks, want, fix)
	}
}
