// Package stores opens the Store an idgen DSN names, whatever its database:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db
//	sqlite:path/to/idgen.db
//	etcd://user:pass@host1:2379,host2:2379,host3:2379/prefix   (etcds:// for TLS)
package stores

import (
	"context"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/etcd"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
	"github.com/idgen-project/idgen/internal/dburl"
)

// ErrUnknownScheme is returned by Open for a DSN of no known database.
var ErrUnknownScheme = errors.New("unknown DSN scheme (want postgres://, mysql://, sqlite: or etcd://)")

// Store is an allocator.Store that also carries its schema migrations.
type Store interface {
	allocator.Store
	// Migrations returns a goose provider for the store's schema.
	Migrations() (*goose.Provider, error)
}

// Dialect returns "postgres", "mysql", "sqlite" or "etcd" for a DSN, or ""
// for an unknown scheme.
func Dialect(dsn string) string { return string(dburl.DialectOf(dsn)) }

// Open opens the store dsn names; errors never contain the password
// (ErrUnknownScheme, or dburl.ErrNotEncoded per dburl.Check).
func Open(ctx context.Context, dsn string) (Store, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, fmt.Errorf("invalid DSN (not shown): %w", err)
	}
	switch dburl.DialectOf(dsn) {
	case dburl.Postgres:
		return postgres.Open(ctx, dsn)
	case dburl.MySQL:
		return mysql.Open(ctx, dsn)
	case dburl.SQLite:
		return sqlite.Open(ctx, dsn)
	case dburl.Etcd:
		return etcd.Open(ctx, dsn)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownScheme, dburl.Redact(dsn))
}
