package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
)

// segmentColumns lists the columns of segments in the order scanSegment reads them.
const segmentColumns = `namespace, max_id, step, min_step, max_step, mode, fallback,
	version, created_at, updated_at, description`

// CreateNamespace inserts ns and returns the row as stored. The store sets
// version to 0 and both times to database time, whatever ns holds. It
// returns an error wrapping allocator.ErrNamespaceExists if the name is
// taken, and one wrapping allocator.ErrInvalidNamespace if ns breaks a
// constraint of the table (steps out of order, unknown mode or fallback,
// negative max_id, name too long).
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		INSERT INTO segments (namespace, max_id, step, min_step, max_step, mode, fallback,
			version, created_at, updated_at, description)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 0, now(), now(), $8)
		RETURNING `+segmentColumns,
		ns.Name, ns.MaxID, ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description)
	got, err := scanSegment(row)
	if err != nil {
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// GetNamespace returns the namespace called name, or an error wrapping
// allocator.ErrNamespaceNotFound.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = $1`, name)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Namespace{}, fmt.Errorf("postgres: get namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("get namespace", name, err)
	}
	return ns, nil
}

// ListNamespaces returns every namespace in byte order of the name.
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+segmentColumns+` FROM segments ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list namespaces: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (allocator.Namespace, error) {
		return scanSegment(row)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list namespaces: %w", err)
	}
	return list, nil
}

// UpdateNamespace changes the settings that u sets, stamps updated_at with
// database time and returns the row after the change. It leaves max_id and
// version alone, so a node may still give back the tail of a range it
// fetched before the change. It returns an error wrapping
// allocator.ErrNamespaceNotFound if the namespace does not exist, and one
// wrapping allocator.ErrInvalidNamespace if the result would break a
// constraint (for example min_step above max_step); the row is then unchanged.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET
			step        = COALESCE($2, step),
			min_step    = COALESCE($3, min_step),
			max_step    = COALESCE($4, max_step),
			mode        = COALESCE($5, mode),
			fallback    = COALESCE($6, fallback),
			description = COALESCE($7, description),
			updated_at  = now()
		WHERE namespace = $1
		RETURNING `+segmentColumns,
		name, u.Step, u.MinStep, u.MaxStep, modeArg(u.Mode), fallbackArg(u.Fallback), u.Description)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Namespace{}, fmt.Errorf("postgres: update namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("update namespace", name, err)
	}
	return ns, nil
}

// FetchSegment advances the namespace's max_id by n and increments its
// version in one UPDATE … RETURNING, and returns the range it advanced
// over. Concurrent fetches queue on the row lock, so their ranges are
// disjoint. Any error, including a connection lost before the commit was
// acknowledged, returns no range: its IDs are never handed out.
//
// It returns an error wrapping allocator.ErrNamespaceNotFound if the
// namespace does not exist, and one wrapping allocator.ErrInvalidNamespace
// if n < 1 or the range would go past the largest int64 (the row is then
// unchanged).
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	if n < 1 {
		return allocator.Segment{}, fmt.Errorf("postgres: fetch segment of %q: count %d below 1: %w", name, n, allocator.ErrInvalidNamespace)
	}
	// The max_id bound keeps max_id + n within int64; a row it excludes is
	// told apart from a missing one below.
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET
			max_id     = max_id + $2,
			version    = version + 1,
			updated_at = now()
		WHERE namespace = $1 AND max_id <= $3
		RETURNING `+segmentColumns,
		name, n, math.MaxInt64-n)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Segment{}, s.fetchMiss(ctx, name, n)
	}
	if err != nil {
		return allocator.Segment{}, segmentError("fetch segment of", name, err)
	}
	return allocator.Segment{Namespace: ns, First: ns.MaxID - n + 1, Last: ns.MaxID}, nil
}

// fetchMiss explains why a fetch of n matched no row.
func (s *Store) fetchMiss(ctx context.Context, name string, n int64) error {
	ns, err := s.GetNamespace(ctx, name)
	if err != nil {
		return fmt.Errorf("postgres: fetch segment: %w", err)
	}
	return fmt.Errorf("postgres: fetch segment of %q: max_id %d + %d exceeds the largest int64: %w",
		name, ns.MaxID, n, allocator.ErrInvalidNamespace)
}

// ReturnTail gives back the unused tail of the last range fetched: it sets
// max_id to newMaxID and increments version, but only if max_id and
// version still equal expectMaxID and expectVersion, that is if nobody
// fetched since. It reports whether it changed the row; a namespace that
// does not exist reports false. newMaxID above expectMaxID returns an
// error wrapping allocator.ErrInvalidNamespace.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	if newMaxID > expectMaxID {
		return false, fmt.Errorf("postgres: return tail of %q: new max_id %d above current %d: %w",
			name, newMaxID, expectMaxID, allocator.ErrInvalidNamespace)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE segments SET
			max_id     = $4,
			version    = version + 1,
			updated_at = now()
		WHERE namespace = $1 AND max_id = $2 AND version = $3`,
		name, expectMaxID, expectVersion, newMaxID)
	if err != nil {
		return false, segmentError("return tail of", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// scanSegment reads one row of segmentColumns.
func scanSegment(row pgx.Row) (allocator.Namespace, error) {
	var (
		ns             allocator.Namespace
		mode, fallback string
	)
	err := row.Scan(&ns.Name, &ns.MaxID, &ns.Step, &ns.MinStep, &ns.MaxStep, &mode, &fallback,
		&ns.Version, &ns.CreatedAt, &ns.UpdatedAt, &ns.Description)
	if err != nil {
		return allocator.Namespace{}, err
	}
	ns.Mode = allocator.Mode(mode)
	ns.Fallback = allocator.Fallback(fallback)
	ns.CreatedAt = ns.CreatedAt.UTC()
	ns.UpdatedAt = ns.UpdatedAt.UTC()
	return ns, nil
}

// segmentError wraps err from a statement on the namespace called name,
// adding allocator.ErrNamespaceExists for a duplicate name and
// allocator.ErrInvalidNamespace for a value the table refuses.
func segmentError(op, name string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return fmt.Errorf("postgres: %s %q: %w: %w", op, name, allocator.ErrNamespaceExists, err)
		case "23514", // check_violation
			"23502", // not_null_violation
			"22001", // string_data_right_truncation
			"22003": // numeric_value_out_of_range
			return fmt.Errorf("postgres: %s %q: %w: %w", op, name, allocator.ErrInvalidNamespace, err)
		}
	}
	return fmt.Errorf("postgres: %s %q: %w", op, name, err)
}

// modeArg turns an optional mode into an optional text parameter.
func modeArg(m *allocator.Mode) *string {
	if m == nil {
		return nil
	}
	v := string(*m)
	return &v
}

// fallbackArg turns an optional fallback into an optional text parameter.
func fallbackArg(f *allocator.Fallback) *string {
	if f == nil {
		return nil
	}
	v := string(*f)
	return &v
}
