package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
)

// segmentColumns lists the columns of segments in the order scanSegment reads them.
const segmentColumns = sqlstore.NamespaceColumns

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace. On
// a name in use whose row is a tombstone, ns is created over it in a
// transaction that locks the row.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	stride, offset := ns.Interleave()
	insert := func(ctx context.Context) (allocator.Namespace, error) {
		return scanSegment(s.pool.QueryRow(ctx, `
			INSERT INTO segments (namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
				version, created_at, updated_at, description, id_stride, id_offset)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, now(), now(), $9, $10, $11)
			RETURNING `+segmentColumns,
			ns.Name, ns.MaxID, sqlstore.LimitArg(ns.MaxIDLimit), ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description, stride, offset))
	}
	read := func(tx pgx.Tx) (allocator.Namespace, error) {
		return scanSegment(tx.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = $1 FOR UPDATE`, ns.Name))
	}
	write := func(tx pgx.Tx, next allocator.Namespace) (allocator.Namespace, error) {
		return scanSegment(tx.QueryRow(ctx, `
			UPDATE segments SET
				max_id = $2, max_id_limit = $3, step = $4, min_step = $5, max_step = $6, mode = $7, fallback = $8,
				version = $9, created_at = now(), updated_at = now(), description = $10, deleted_at = NULL
			WHERE namespace = $1
			RETURNING `+segmentColumns,
			next.Name, next.MaxID, sqlstore.LimitArg(next.MaxIDLimit), next.Step, next.MinStep, next.MaxStep, string(next.Mode),
			string(next.Fallback), next.Version, next.Description))
	}
	return sqlstore.CreateNamespace(ctx, dialect, s.segmentTx, ns, insert, read, write)
}

// segmentTx runs fn in one transaction at the default isolation, not
// retried: its one user (revival) locks its row FOR UPDATE first.
func (s *Store) segmentTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// DeleteNamespace implements allocator.NamespaceAdmin.DeleteNamespace.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `
		UPDATE segments SET deleted_at = now(), updated_at = now()
		WHERE namespace = $1 AND deleted_at IS NULL
		RETURNING `+segmentColumns, name)
	return namespaceRow(row, "delete namespace", name)
}

// GetNamespace implements allocator.SegmentStore.GetNamespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = $1 AND deleted_at IS NULL`, name)
	return namespaceRow(row, "get namespace", name)
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces
// (collation "C": byte order).
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	return dialect.ListNamespaces(ctx, rows(s.pool, scanSegment))
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
		name, u.Step, u.MinStep, u.MaxStep, sqlstore.OptionalText(u.Mode), sqlstore.OptionalText(u.Fallback), u.Description, u.MaxIDLimit)
	return namespaceRow(row, "update namespace", name)
}

// FetchSegment implements allocator.SegmentStore.FetchSegment with one
// UPDATE … RETURNING: fetches queue on the row lock, an unacknowledged
// commit returns an error, and the version read is this fetch's own.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	return dialect.FetchSegment(ctx, name, n, func(ctx context.Context) (allocator.Namespace, bool, error) {
		// The bound keeps max_id within Namespace.Limit (so max_id + n fits
		// an int64); dialect.FetchSegment tells an excluded row from a
		// missing one.
		ns, err := scanSegment(s.pool.QueryRow(ctx, `
			UPDATE segments SET
				max_id     = max_id + $2,
				version    = version + 1,
				updated_at = now()
			WHERE namespace = $1 AND deleted_at IS NULL AND max_id <= LEAST(COALESCE(max_id_limit, 9223372036854775807), (9223372036854775807 - id_offset) / id_stride) - $2
			RETURNING `+segmentColumns,
			name, n))
		if errors.Is(err, pgx.ErrNoRows) {
			return allocator.Namespace{}, false, nil
		}
		return ns, err == nil, err
	}, s.GetNamespace)
}

// ReturnTail implements allocator.SegmentStore.ReturnTail: one UPDATE
// whose WHERE is the compare-and-set.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	return dialect.ReturnTail(ctx, name, expectMaxID, newMaxID, func(ctx context.Context) (int64, error) {
		tag, err := s.pool.Exec(ctx, `
			UPDATE segments SET
				max_id     = $4,
				version    = version + 1,
				updated_at = now()
			WHERE namespace = $1 AND max_id = $2 AND version = $3 AND deleted_at IS NULL`,
			name, expectMaxID, expectVersion, newMaxID)
		return tag.RowsAffected(), err
	})
}

// namespaceRow reads the one segmentColumns row op returns for name.
func namespaceRow(row pgx.Row, op, name string) (allocator.Namespace, error) {
	ns, err := scanSegment(row)
	return dialect.NamespaceResult(op, name, ns, err)
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
		&ns.Version, &ns.CreatedAt, &ns.UpdatedAt, &ns.Description, &deleted, &ns.Stride, &ns.Offset)
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

// duplicateName reports a unique_violation (23505) on a namespace name.
func duplicateName(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// segmentError wraps err with ErrNamespaceExists for a duplicate name or
// ErrInvalidNamespace for a value the table refuses.
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
