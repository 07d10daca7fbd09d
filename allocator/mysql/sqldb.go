package mysql

import (
	"context"
	"database/sql"
)

// OpenDB returns a checked database/sql handle on dsn's MySQL or MariaDB
// database, for reading other tables (namespaces import reads Leaf's and
// tinyid's). Errors omit the password.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, _, _, err := connect(ctx, dsn, func(*sql.DB) {})
	return db, err
}
