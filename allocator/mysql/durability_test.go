package mysql

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
)

// TestDurabilityRules checks the rules on variables as the server would
// report them. The variables are global-only in MySQL and MariaDB, so a
// test cannot turn them unsafe without changing the shared server.
func TestDurabilityRules(t *testing.T) {
	safe := func() map[string]string {
		return map[string]string{
			"innodb_flush_log_at_trx_commit": "1",
			"log_bin":                        "OFF",
			"sync_binlog":                    "0",
			"rpl_semi_sync_master_enabled":   "OFF",
			"Slaves_connected":               "0",
		}
	}
	with := func(kv ...string) map[string]string {
		m := safe()
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	type want = storetest.WantRisk
	for _, tc := range []struct {
		name string
		vars map[string]string
		want []want
	}{
		{"safe, binary log off (MariaDB's defaults)", safe(), nil},
		{"binary log on, synced", with("log_bin", "ON", "sync_binlog", "1"), nil},
		{"MariaDB's 3 flushes at commit", with("innodb_flush_log_at_trx_commit", "3"), nil},
		{"flush once a second", with("innodb_flush_log_at_trx_commit", "0"),
			[]want{{"innodb_flush_log_at_trx_commit=0", false, "SET GLOBAL innodb_flush_log_at_trx_commit = 1"}}},
		{"write at commit, flush once a second", with("innodb_flush_log_at_trx_commit", "2"),
			[]want{{"innodb_flush_log_at_trx_commit=2", false, "SET GLOBAL innodb_flush_log_at_trx_commit = 1"}}},
		{"binary log on, not synced", with("log_bin", "ON", "sync_binlog", "0"),
			[]want{{"sync_binlog=0", false, "SET GLOBAL sync_binlog = 1"}}},
		{"binary log on as 1, synced every 100", with("log_bin", "1", "sync_binlog", "100"),
			[]want{{"sync_binlog=100", false, "SET GLOBAL sync_binlog = 1"}}},
		{"both", with("innodb_flush_log_at_trx_commit", "2", "log_bin", "ON", "sync_binlog", "0"),
			[]want{{"innodb_flush_log_at_trx_commit=2", false, ""}, {"sync_binlog=0", false, ""}}},
		{"asynchronous replicas", with("log_bin", "ON", "sync_binlog", "1", "Slaves_connected", "2"),
			[]want{{"rpl_semi_sync_master_enabled=OFF", true, "2 replica(s)"}}},
		{"semi-synchronous replicas", with("log_bin", "ON", "sync_binlog", "1", "Slaves_connected", "2",
			"rpl_semi_sync_master_enabled", "ON"), nil},
		{"semi-synchronous replicas, MySQL 8.0.26+ name", with("log_bin", "ON", "sync_binlog", "1", "Slaves_connected", "1",
			"rpl_semi_sync_source_enabled", "ON"), nil},
		{"nothing read", map[string]string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.CheckRisks(t, durabilityRisks(tc.vars), tc.want)
		})
	}
}

// TestRequireVariables checks that the check fails closed: a server that
// does not show a variable the rules need is an error, not a pass.
func TestRequireVariables(t *testing.T) {
	full := map[string]string{"innodb_flush_log_at_trx_commit": "1", "log_bin": "OFF", "sync_binlog": "0"}
	if err := requireVariables(full); err != nil {
		t.Errorf("all variables shown: got %v, want nil", err)
	}
	for _, name := range requiredVariables {
		vars := maps.Clone(full)
		delete(vars, name)
		err := requireVariables(vars)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: got %v, want an error naming it", name, err)
		}
	}
	if err := requireVariables(map[string]string{}); err == nil {
		t.Error("nothing read: got nil, want an error")
	}
}

// TestCheckDurability reads the test server's settings, which are safe
// (innodb_flush_log_at_trx_commit = 1; MariaDB's binary log is off), and
// checks that they were read as SELECT @@GLOBAL shows them.
func TestCheckDurability(t *testing.T) {
	s := openTest(t)
	risks, err := s.CheckDurability(t.Context())
	if err != nil {
		t.Fatalf("CheckDurability: %v", err)
	}
	if slices.ContainsFunc(risks, func(r allocator.DurabilityRisk) bool { return !r.Warning }) {
		t.Fatalf("got risks %v on the test server, want none (is it configured unsafely?)", risks)
	}
	vars, err := s.durabilityVars(t.Context())
	if err != nil {
		t.Fatalf("durabilityVars: %v", err)
	}
	var flush, syncBinlog string
	var logBin int
	if err := s.db.QueryRowContext(t.Context(),
		"SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.sync_binlog, @@GLOBAL.log_bin").Scan(&flush, &syncBinlog, &logBin); err != nil {
		t.Fatalf("read the variables: %v", err)
	}
	if vars["innodb_flush_log_at_trx_commit"] != flush || vars["sync_binlog"] != syncBinlog || on(vars["log_bin"]) != (logBin == 1) {
		t.Errorf("read %v, want innodb_flush_log_at_trx_commit=%s sync_binlog=%s log_bin=%d", vars, flush, syncBinlog, logBin)
	}
}
