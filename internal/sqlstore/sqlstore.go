// Package sqlstore holds what idgen's three SQL stores (allocator/mysql,
// allocator/postgres, allocator/sqlite) share: the order of the steps of a
// lease or namespace operation and the errors they return (worded alike,
// "mysql: release worker 1/2: …"), the lease-event query, the prune loop
// and row and parameter helpers.
//
// Each store keeps its own SQL text, transactions (isolation, row locks,
// retries through internal/sqltx) and driver: the functions here take the
// dialect's statements as functions run inside the caller's transaction,
// and never begin, commit or retry anything themselves.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/migrations"
)

// Dialect is what the shared code needs to know of one SQL store.
type Dialect struct {
	// Name begins every error: "mysql", "postgres", "sqlite".
	Name string
	// NoRows is the driver's error for a query that returned no row:
	// sql.ErrNoRows or pgx.ErrNoRows.
	NoRows error
	// Placeholder writes the nth parameter of a statement, from 1:
	// Question or Dollar.
	Placeholder func(n int) string
	// TimeArg turns a time into a parameter compared with lease_events.at.
	TimeArg func(t time.Time) any
	// SegmentError wraps err, from the statement of op ("fetch segment
	// of", …) on namespace name, adding allocator.ErrNamespaceExists or
	// ErrInvalidNamespace where the driver's error says so.
	SegmentError func(op, name string, err error) error
	// DuplicateName reports whether err, from the INSERT of a namespace,
	// says that a row of its name exists (live or a tombstone).
	DuplicateName func(err error) bool
}

// Question is the placeholder of MySQL and SQLite: "?".
func Question(int) string { return "?" }

// Dollar is the placeholder of PostgreSQL: "$1", "$2", ….
func Dollar(n int) string { return "$" + strconv.Itoa(n) }

// Ping runs the driver's ping, naming dsn (without its password) in its
// error.
func (d Dialect) Ping(ctx context.Context, dsn string, ping func(ctx context.Context) error) error {
	if err := ping(ctx); err != nil {
		return fmt.Errorf("%s: ping %s: %w", d.Name, dsn, err)
	}
	return nil
}

// Migrations returns the goose provider of dialect's migrations on db, a
// pool the provider closes (closed here if it cannot be made).
func Migrations(dialect migrations.Dialect, db *sql.DB) (*goose.Provider, error) {
	p, err := migrations.NewProvider(dialect, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return p, nil
}

// Scanner is a row to read: *sql.Row, *sql.Rows, pgx.Row.
type Scanner interface {
	Scan(dest ...any) error
}

// Querier is a database/sql pool or transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Execer is a database/sql pool or transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// QueryAll runs query on db and reads every row it returns with scan.
func QueryAll[T any](ctx context.Context, db Querier, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		all = append(all, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return all, nil
}

// Query runs a SELECT and reads every row it returns: Rows on a
// database/sql pool, or the PostgreSQL store's own on pgx.
type Query[T any] func(ctx context.Context, query string, args ...any) ([]T, error)

// Rows returns the Query of QueryAll on db with scan.
func Rows[T any](db Querier, scan func(Scanner) (T, error)) Query[T] {
	return func(ctx context.Context, query string, args ...any) ([]T, error) {
		return QueryAll(ctx, db, scan, query, args...)
	}
}

// ExecCount runs query on db and returns how many rows it changed (with
// MySQL's clientFoundRows, matched).
func ExecCount(ctx context.Context, db Execer, query string, args ...any) (int64, error) {
	r, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// NullText turns "" into NULL: the parameter of an optional text column
// (owner, request_id).
func NullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// LimitArg turns a max_id_limit into a parameter that is NULL for none.
func LimitArg(limit int64) any {
	if limit <= 0 {
		return nil
	}
	return limit
}

// Optional turns an optional value into a parameter that is NULL when
// absent.
func Optional[T int64 | string](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}

// OptionalText turns an optional mode or fallback into a string parameter
// that is NULL when absent.
func OptionalText[T ~string](v *T) any {
	if v == nil {
		return nil
	}
	return string(*v)
}
