package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen-project/idgen/internal/dburl"
)

// OpenDB returns a database/sql handle on dsn (an Open URL without pgxpool
// parameters) for tools reading other tables, such as namespaces import.
// It pings the server; errors name the DSN without its password.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, error) {
	safe := dburl.Redact(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(safe, err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", safe, err)
	}
	return db, nil
}
