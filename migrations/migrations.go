// Package migrations holds idgen's database schema as goose SQL migrations,
// one directory per dialect, embedded in the binary.
//
// Each migration is numbered (00001_leases.sql, 00002_segments.sql, …) and
// has an Up and a Down section. The schema is meant to be read by people with
// plain SQL: timestamps are timestamp types (UTC text on SQLite) and every
// table carries comments on what its columns mean.
//
// Apply the migrations with a goose provider:
//
//	p, err := migrations.NewProvider(migrations.DialectPostgres, db)
//	if err != nil { … }
//	_, err = p.Up(ctx)
package migrations

import (
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// files holds the SQL migrations of every dialect.
//
//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a database dialect that idgen has migrations for.
type Dialect string

// The dialects idgen supports. MySQL also covers MariaDB.
const (
	DialectPostgres Dialect = "postgres"
	DialectMySQL    Dialect = "mysql"
	DialectSQLite   Dialect = "sqlite"
)

// gooseDialect maps a Dialect to goose's name for it.
func (d Dialect) gooseDialect() (goose.Dialect, error) {
	switch d {
	case DialectPostgres:
		return goose.DialectPostgres, nil
	case DialectMySQL:
		return goose.DialectMySQL, nil
	case DialectSQLite:
		return goose.DialectSQLite3, nil
	default:
		return "", fmt.Errorf("migrations: unknown dialect %q (want %q, %q or %q)",
			string(d), DialectPostgres, DialectMySQL, DialectSQLite)
	}
}

// FS returns the migrations of dialect d, with the .sql files at its root.
func FS(d Dialect) (fs.FS, error) {
	if _, err := d.gooseDialect(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d, err)
	}
	return sub, nil
}

// NewProvider returns a goose provider that applies the migrations of dialect
// d to db. goose records the applied versions in the table goose_db_version.
// On PostgreSQL and MySQL the provider holds a lock while it migrates, so
// nodes started together on a fresh database do not race.
//
// Closing the provider closes db.
func NewProvider(d Dialect, db *sql.DB) (*goose.Provider, error) {
	gd, err := d.gooseDialect()
	if err != nil {
		return nil, err
	}
	sub, err := FS(d)
	if err != nil {
		return nil, err
	}
	var opts []goose.ProviderOption
	switch d {
	case DialectPostgres:
		// An advisory lock held by the migrating session: nodes that start
		// together on a fresh database migrate one after another.
		l, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", d, err)
		}
		opts = append(opts, goose.WithSessionLocker(l))
	case DialectMySQL:
		// MySQL has no session lock goose can use; goose keeps a lock row
		// in the table goose_lock instead.
		l, err := lock.NewMySQLTableLocker(lock.WithTableLockTimeout(250*time.Millisecond, 480))
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", d, err)
		}
		opts = append(opts, goose.WithLocker(l))
	}
	p, err := goose.NewProvider(gd, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d, err)
	}
	return p, nil
}
