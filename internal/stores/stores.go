// Package stores opens the Store an idgen DSN names, whatever its database:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@host:3306/db
//	sqlite:path/to/idgen.db
package stores

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
)

// ErrUnknownScheme is returned by Open for a DSN of no known database.
var ErrUnknownScheme = errors.New("unknown DSN scheme (want postgres://, mysql:// or sqlite:)")

// Store is an allocator.Store that also carries its schema migrations.
type Store interface {
	allocator.Store
	// Migrations returns a goose provider for the store's schema.
	Migrations() (*goose.Provider, error)
}

// Dialect returns "postgres", "mysql" or "sqlite" for a DSN, or "" when the
// scheme is unknown.
func Dialect(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(dsn, "mysql://"):
		return "mysql"
	case strings.HasPrefix(dsn, "sqlite:"):
		return "sqlite"
	}
	return ""
}

// Open opens the store dsn names. Errors never contain the DSN's password;
// ErrUnknownScheme for an unknown scheme.
func Open(ctx context.Context, dsn string) (Store, error) {
	switch Dialect(dsn) {
	case "postgres":
		return postgres.Open(ctx, dsn)
	case "mysql":
		return mysql.Open(ctx, dsn)
	case "sqlite":
		return sqlite.Open(ctx, dsn)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownScheme, Redact(dsn))
}

// Redact returns dsn with any password replaced, for logs and error
// messages; see allocator.RedactDSN.
func Redact(dsn string) string { return allocator.RedactDSN(dsn) }
