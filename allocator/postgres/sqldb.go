package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen-project/idgen/internal/dburl"
)

// OpenDB returns a database/sql handle on the PostgreSQL database named by
// dsn, a URL as Open takes (without the pgxpool parameters), for tools
// that read tables other than idgen's: idgen namespaces import reads the
// segment tables of Leaf and tinyid with it. It checks that the server
// answers. Errors name the DSN without its password.
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
