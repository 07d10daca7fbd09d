// Package sqlstore holds what idgen's three SQL stores share: the order of
// a lease or namespace operation's steps and their errors (worded alike),
// the lease-event query, the prune loop and row and parameter helpers.
// Stores keep their own SQL, transactions and driver; the steps run inside
// the caller's transaction, never beginning, committing or retrying.
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
	// NoRows is the driver's no-row error.
	NoRows error
	// Placeholder writes the nth parameter (Question or Dollar).
	Placeholder func(n int) string
	// TimeArg turns a time into a parameter compared with lease_events.at.
	TimeArg func(t time.Time) any
	// SegmentError wraps op's err on namespace name, adding
	// ErrNamespaceExists or ErrInvalidNamespace as the driver's error says.
	SegmentError func(op, name string, err error) error
	// DuplicateName reports whether a namespace INSERT's err is a name in use.
	DuplicateName func(err error) bool
}

// Question is the placeholder of MySQL and SQLite: "?".
func Question(int) string { return "?" }

// Dollar is the placeholder of PostgreSQL: "$1", "$2", ….
func Dollar(n int) string { return "$" + strconv.Itoa(n) }

// Ping runs ping, naming the redacted dsn in its error.
func (d Dialect) Ping(ctx context.Context, dsn string, ping func(ctx context.Context) error) error {
	if err := ping(ctx); err != nil {
		return fmt.Errorf("%s: ping %s: %w", d.Name, dsn, err)
	}
	return nil
}

// Migrations returns the goose provider of dialect on db, which it closes.
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

// Query runs a SELECT and reads every row.
type Query[T any] func(ctx context.Context, query string, args ...any) ([]T, error)

// Rows returns the Query of QueryAll on db with scan.
func Rows[T any](db Querier, scan func(Scanner) (T, error)) Query[T] {
	return func(ctx context.Context, query string, args ...any) ([]T, error) {
		return QueryAll(ctx, db, scan, query, args...)
	}
}

// ExecCount runs query and returns the rows changed (matched, on MySQL).
func ExecCount(ctx context.Context, db Execer, query string, args ...any) (int64, error) {
	r, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// NullText turns "" into NULL.
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

// Optional turns an absent value into NULL.
func Optional[T int64 | string](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}

// OptionalText turns an absent mode or fallback into NULL.
func OptionalText[T ~string](v *T) any {
	if v == nil {
		return nil
	}
	return string(*v)
}
