package mysql

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.DurabilityChecker = (*Store)(nil)

// durabilityVariables are the server variables CheckDurability reads (the
// replication ones exist only where semi-sync replication is available).
var durabilityVariables = []string{
	"innodb_flush_log_at_trx_commit",
	"log_bin",
	"sync_binlog",
	"rpl_semi_sync_master_enabled", // MariaDB; MySQL before 8.0.26
	"rpl_semi_sync_source_enabled", // MySQL 8.0.26 and later
	"Slaves_connected",             // a status variable, MariaDB only
}

// CheckDurability reports innodb_flush_log_at_trx_commit other than 1 (or
// MariaDB's 3) and sync_binlog other than 1 with the binary log on; it
// warns of replicas without semi-sync replication (visible on MariaDB).
func (s *Store) CheckDurability(ctx context.Context) ([]allocator.DurabilityRisk, error) {
	vars, err := s.durabilityVars(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireVariables(vars); err != nil {
		return nil, fmt.Errorf("mysql: read durability settings of %s: %w", s.dsn, err)
	}
	return durabilityRisks(vars), nil
}

// requiredVariables are those every InnoDB server has; one unreadable is
// an error: the check fails closed.
var requiredVariables = []string{"innodb_flush_log_at_trx_commit", "log_bin", "sync_binlog"}

// requireVariables names the requiredVariables missing from vars.
func requireVariables(vars map[string]string) error {
	var missing []string
	for _, name := range requiredVariables {
		if _, ok := vars[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the server does not show %s, so idgen cannot tell whether it keeps acknowledged commits",
			strings.Join(missing, ", "))
	}
	return nil
}

func (s *Store) durabilityVars(ctx context.Context) (map[string]string, error) {
	vars := map[string]string{}
	in := "'" + strings.Join(durabilityVariables, "', '") + "'"
	for _, q := range []string{
		"SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + in + ")",
		"SHOW GLOBAL STATUS WHERE Variable_name IN (" + in + ")",
	} {
		if err := s.readVariables(ctx, q, vars); err != nil {
			return nil, fmt.Errorf("mysql: read durability settings of %s: %w", s.dsn, err)
		}
	}
	return vars, nil
}

func (s *Store) readVariables(ctx context.Context, q string, vars map[string]string) error {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		vars[name] = value
	}
	return rows.Err()
}

// durabilityRisks applies CheckDurability's rules to the variables read.
func durabilityRisks(vars map[string]string) []allocator.DurabilityRisk {
	var risks []allocator.DurabilityRisk
	if v, ok := vars["innodb_flush_log_at_trx_commit"]; ok && v != "1" && v != "3" {
		risks = append(risks, allocator.DurabilityRisk{
			Setting: "innodb_flush_log_at_trx_commit", Value: v,
			Fix: "SET GLOBAL innodb_flush_log_at_trx_commit = 1, and set it to 1 in the server's configuration file",
		})
	}
	binlog := on(vars["log_bin"])
	if v, ok := vars["sync_binlog"]; ok && binlog && v != "1" {
		risks = append(risks, allocator.DurabilityRisk{
			Setting: "sync_binlog", Value: v,
			Fix: "SET GLOBAL sync_binlog = 1, and set it to 1 in the server's configuration file " +
				"(the binary log is on, and a commit whose binlog event a crash loses is rolled back at recovery)",
		})
	}
	semiSync := on(vars["rpl_semi_sync_master_enabled"]) || on(vars["rpl_semi_sync_source_enabled"])
	if n, _ := strconv.Atoi(vars["Slaves_connected"]); binlog && n > 0 && !semiSync {
		risks = append(risks, allocator.DurabilityRisk{
			Setting: "rpl_semi_sync_master_enabled", Value: "OFF", Warning: true,
			Fix: fmt.Sprintf("%d replica(s) replicate from this server asynchronously, and a failover to one can "+
				"lose acknowledged commits: use semi-synchronous replication (wait point AFTER_SYNC) or make "+
				"sure no asynchronous replica is ever promoted", n),
		})
	}
	return risks
}

// on reports whether a variable's value means on: ON or 1.
func on(v string) bool { return strings.EqualFold(v, "ON") || v == "1" }
