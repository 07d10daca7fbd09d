package mysql

import (
	"context"
	"database/sql"
)

// OpenDB returns a database/sql handle on the MySQL or MariaDB database
// named by dsn, a URL as Open takes, for tools that read tables other than
// idgen's: idgen namespaces import reads the segment tables of Leaf and
// tinyid with it. It checks that the server answers. Errors name the DSN
// without its password.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, _, _, err := connect(ctx, dsn, func(*sql.DB) {})
	return db, err
}
