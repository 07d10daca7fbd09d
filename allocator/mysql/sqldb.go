package mysql

import (
	"context"
	"database/sql"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"
)

// OpenDB returns a database/sql handle on the MySQL or MariaDB database
// named by dsn, a URL as Open takes, for tools that read tables other than
// idgen's: idgen namespaces import reads the segment tables of Leaf and
// tinyid with it. It checks that the server answers. Errors name the DSN
// without its password.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, safe, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: invalid DSN %s: %w", safe, err)
	}
	db := sql.OpenDB(connector)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: connect to %s: %w", safe, err)
	}
	return db, nil
}
