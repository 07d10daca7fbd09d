package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.DurabilityChecker = (*Store)(nil)

// pgSetting is a pg_settings value and its source ("default", "user", …).
type pgSetting struct{ value, source string }

// pgServer is what CheckDurability reads over one store connection: the
// effective session settings, the role, and the streaming replicas.
type pgServer struct {
	settings map[string]pgSetting
	database string
	role     string
	replicas int
}

// CheckDurability returns the settings that let a crash or failover undo
// an acknowledged commit (synchronous_commit, fsync or full_page_writes
// off) and, as warnings, asynchronous replicas or synchronous replication
// that commits do not wait for. A failover manager's policy cannot be seen.
func (s *Store) CheckDurability(ctx context.Context) ([]allocator.DurabilityRisk, error) {
	srv := pgServer{settings: map[string]pgSetting{}}
	rows, err := s.pool.Query(ctx, `SELECT name, setting, source FROM pg_settings
		WHERE name IN ('synchronous_commit', 'fsync', 'full_page_writes', 'synchronous_standby_names')`)
	if err != nil {
		return nil, fmt.Errorf("postgres: read durability settings of %s: %w", s.dsn, err)
	}
	for rows.Next() {
		var name string
		var st pgSetting
		if err := rows.Scan(&name, &st.value, &st.source); err != nil {
			rows.Close()
			return nil, fmt.Errorf("postgres: read durability settings of %s: %w", s.dsn, err)
		}
		srv.settings[name] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read durability settings of %s: %w", s.dsn, err)
	}
	if err := srv.requireSettings(); err != nil {
		return nil, fmt.Errorf("postgres: read durability settings of %s: %w", s.dsn, err)
	}
	err = s.pool.QueryRow(ctx, `SELECT current_database(), current_user, (SELECT count(*) FROM pg_stat_replication)`).
		Scan(&srv.database, &srv.role, &srv.replicas)
	if err != nil {
		return nil, fmt.Errorf("postgres: read replication state of %s: %w", s.dsn, err)
	}
	return srv.durabilityRisks(), nil
}

// requiredSettings exist on every server; one unreadable is an error (fail
// closed).
var requiredSettings = []string{"synchronous_commit", "fsync", "full_page_writes", "synchronous_standby_names"}

func (srv pgServer) requireSettings() error {
	var missing []string
	for _, name := range requiredSettings {
		if _, ok := srv.settings[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("pg_settings does not show %s, so idgen cannot tell whether the server keeps acknowledged commits",
			strings.Join(missing, ", "))
	}
	return nil
}

// durabilityRisks applies the rules of CheckDurability to what was read.
func (srv pgServer) durabilityRisks() []allocator.DurabilityRisk {
	var risks []allocator.DurabilityRisk
	standbys := srv.settings["synchronous_standby_names"].value
	if sc, ok := srv.settings["synchronous_commit"]; ok {
		switch sc.value {
		case "off":
			risks = append(risks, allocator.DurabilityRisk{
				Setting: "synchronous_commit", Value: sc.value,
				Fix: srv.resetFix("synchronous_commit", sc.source, "on"),
			})
		case "local", "remote_write":
			if standbys != "" {
				risks = append(risks, allocator.DurabilityRisk{
					Setting: "synchronous_commit", Value: sc.value, Warning: true,
					Fix: "commits do not wait until the synchronous standby has them on disk, so a failover to it " +
						"can lose acknowledged commits; " + srv.resetFix("synchronous_commit", sc.source, "on"),
				})
			}
		}
	}
	for _, name := range []string{"fsync", "full_page_writes"} {
		if st, ok := srv.settings[name]; ok && st.value == "off" {
			risks = append(risks, allocator.DurabilityRisk{
				Setting: name, Value: st.value,
				Fix: fmt.Sprintf("set %s = on in postgresql.conf (or ALTER SYSTEM) and reload the server", name),
			})
		}
	}
	if srv.replicas > 0 && standbys == "" {
		risks = append(risks, allocator.DurabilityRisk{
			Setting: "synchronous_standby_names", Value: "''", Warning: true,
			Fix: fmt.Sprintf("%d replica(s) stream from this server asynchronously, and a failover to one can lose "+
				"acknowledged commits: name them in synchronous_standby_names, or make sure no asynchronous "+
				"replica is ever promoted", srv.replicas),
		})
	}
	return risks
}

// resetFix says how to fix setting where its value comes from.
func (srv pgServer) resetFix(setting, source, safe string) string {
	db, role := pgx.Identifier{srv.database}.Sanitize(), pgx.Identifier{srv.role}.Sanitize()
	switch source {
	case "database":
		return fmt.Sprintf("ALTER DATABASE %s RESET %s", db, setting)
	case "user":
		return fmt.Sprintf("ALTER ROLE %s RESET %s", role, setting)
	case "database user":
		return fmt.Sprintf("ALTER ROLE %s IN DATABASE %s RESET %s", role, db, setting)
	case "client", "session":
		return fmt.Sprintf("remove %s from the DSN's parameters (or PGOPTIONS)", setting)
	}
	return fmt.Sprintf("set %s = %s in postgresql.conf (or ALTER SYSTEM) and reload the server", setting, safe)
}
