package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
)

// segmentColumns lists the columns of segments in the order scanSegment reads them.
const segmentColumns = `namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
	version, created_at, updated_at, description, deleted_at`

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace. The
// INSERT fails on a name in use; if that row is a tombstone, revive
// revives it.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		INSERT INTO segments (namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
			version, created_at, updated_at, description)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, now(), now(), $9)
		RETURNING `+segmentColumns,
		ns.Name, ns.MaxID, limitArg(ns.MaxIDLimit), ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description)
	got, err := scanSegment(row)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return s.revive(ctx, ns, err)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// revive creates ns over the row of its name if that row is a tombstone
// (allocator.Namespace.Revive), in a transaction that locks the row;
// dupErr is the INSERT's error, returned as ErrNamespaceExists when the row
// is live.
func (s *Store) revive(ctx context.Context, ns allocator.Namespace, dupErr error) (allocator.Namespace, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	tomb, err := scanSegment(tx.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = $1 FOR UPDATE`, ns.Name))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Deleted rows are never removed; a row that went away is not ours
		// to guess about.
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, dupErr)
	case err != nil:
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	case tomb.DeletedAt.IsZero():
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, dupErr)
	}
	next, err := tomb.Revive(ns)
	if err != nil {
		return allocator.Namespace{}, fmt.Errorf("postgres: create namespace %q: %w", ns.Name, err)
	}
	got, err := scanSegment(tx.QueryRow(ctx, `
		UPDATE segments SET
			max_id = $2, max_id_limit = $3, step = $4, min_step = $5, max_step = $6, mode = $7, fallback = $8,
			version = $9, created_at = now(), updated_at = now(), description = $10, deleted_at = NULL
		WHERE namespace = $1
		RETURNING `+segmentColumns,
		next.Name, next.MaxID, limitArg(next.MaxIDLimit), next.Step, next.MinStep, next.MaxStep, string(next.Mode),
		string(next.Fallback), next.Version, next.Description))
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// DeleteNamespace implements allocator.NamespaceAdmin.DeleteNamespace: one
// UPDATE that sets the tombstone.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET deleted_at = now(), updated_at = now()
		WHERE namespace = $1 AND deleted_at IS NULL
		RETURNING `+segmentColumns, name)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Namespace{}, fmt.Errorf("postgres: delete namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("delete namespace", name, err)
	}
	return ns, nil
}

// GetNamespace implements allocator.SegmentStore.GetNamespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = $1 AND deleted_at IS NULL`, name)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Namespace{}, fmt.Errorf("postgres: get namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("get namespace", name, err)
	}
	return ns, nil
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces (the
// column's collation is "C": byte order).
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+segmentColumns+` FROM segments WHERE deleted_at IS NULL ORDER BY namespace`)
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

// UpdateNamespace implements allocator.NamespaceAdmin.UpdateNamespace.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET
			step        = COALESCE($2, step),
			min_step    = COALESCE($3, min_step),
			max_step    = COALESCE($4, max_step),
			mode        = COALESCE($5, mode),
			fallback    = COALESCE($6, fallback),
			description = COALESCE($7, description),
			max_id_limit = COALESCE(max_id_limit, $8),
			updated_at  = now()
		WHERE namespace = $1 AND deleted_at IS NULL
		RETURNING `+segmentColumns,
		name, u.Step, u.MinStep, u.MaxStep, modeArg(u.Mode), fallbackArg(u.Fallback), u.Description, u.MaxIDLimit)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Namespace{}, fmt.Errorf("postgres: update namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	if err != nil {
		return allocator.Namespace{}, segmentError("update namespace", name, err)
	}
	return ns, nil
}

// FetchSegment implements allocator.SegmentStore.FetchSegment with one
// UPDATE … RETURNING: concurrent fetches queue on the row lock, and a
// connection lost before the commit was acknowledged returns an error, so
// its range is never used. The same UPDATE increments version, and
// RETURNING reads the row it wrote: the revision is this fetch's own.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	if err := allocator.ValidFetch(name, n); err != nil {
		return allocator.Segment{}, fmt.Errorf("postgres: %w", err)
	}
	// The bound keeps max_id at or below its limit (and max_id + n within
	// int64); a row it excludes is told apart from a missing one below.
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET
			max_id     = max_id + $2,
			version    = version + 1,
			updated_at = now()
		WHERE namespace = $1 AND deleted_at IS NULL AND max_id <= COALESCE(max_id_limit, 9223372036854775807) - $2
		RETURNING `+segmentColumns,
		name, n)
	ns, err := scanSegment(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return allocator.Segment{}, s.fetchMiss(ctx, name, n)
	}
	if err != nil {
		return allocator.Segment{}, segmentError("fetch segment of", name, err)
	}
	return allocator.Segment{Namespace: ns, First: ns.MaxID - n + 1, Last: ns.MaxID}, nil
}

// fetchMiss explains why a fetch of n matched no row: the namespace is
// missing, or has fewer than n IDs left up to its limit.
func (s *Store) fetchMiss(ctx context.Context, name string, n int64) error {
	ns, err := s.GetNamespace(ctx, name)
	if err != nil {
		return fmt.Errorf("postgres: fetch segment: %w", err)
	}
	return fmt.Errorf("postgres: fetch segment of %q: %w", name, ns.ExhaustedError(n))
}

// ReturnTail implements allocator.SegmentStore.ReturnTail: one UPDATE
// whose WHERE clause is the compare-and-set.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	if err := allocator.ValidReturnTail(name, expectMaxID, newMaxID); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE segments SET
			max_id     = $4,
			version    = version + 1,
			updated_at = now()
		WHERE namespace = $1 AND max_id = $2 AND version = $3 AND deleted_at IS NULL`,
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
		limit          *int64
		mode, fallback string
		deleted        *time.Time
	)
	err := row.Scan(&ns.Name, &ns.MaxID, &limit, &ns.Step, &ns.MinStep, &ns.MaxStep, &mode, &fallback,
		&ns.Version, &ns.CreatedAt, &ns.UpdatedAt, &ns.Description, &deleted)
	if err != nil {
		return allocator.Namespace{}, err
	}
	ns.DeletedAt = utc(deleted)
	if limit != nil {
		ns.MaxIDLimit = *limit
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

// limitArg turns a max_id_limit into a parameter that is NULL for none.
func limitArg(limit int64) *int64 {
	if limit <= 0 {
		return nil
	}
	return &limit
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
