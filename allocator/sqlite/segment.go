package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
)

// segmentColumns are segments' columns as scanSegment reads them.
const segmentColumns = sqlstore.NamespaceColumns

// segmentNow is database time as segments stores it: sortable UTC text.
const segmentNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace; a
// tombstone in the way is overwritten in one transaction.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	stride, offset := ns.Interleave()
	insert := func(ctx context.Context) (allocator.Namespace, error) {
		got, _, err := s.segmentRow(ctx, `
			INSERT INTO segments (namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
				version, created_at, updated_at, description, id_stride, id_offset)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, `+segmentNow+`, `+segmentNow+`, ?, ?, ?)
			RETURNING `+segmentColumns,
			ns.Name, ns.MaxID, sqlstore.LimitArg(ns.MaxIDLimit), ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description, stride, offset)
		return got, err
	}
	read := func(tx *sql.Tx) (allocator.Namespace, error) {
		return scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ?`, ns.Name))
	}
	write := func(tx *sql.Tx, next allocator.Namespace) (allocator.Namespace, error) {
		return scanSegment(tx.QueryRowContext(ctx, `
			UPDATE segments SET
				max_id = ?, max_id_limit = ?, step = ?, min_step = ?, max_step = ?, mode = ?, fallback = ?,
				version = ?, created_at = `+segmentNow+`, updated_at = `+segmentNow+`, description = ?, deleted_at = NULL
			WHERE namespace = ?
			RETURNING `+segmentColumns,
			next.MaxID, sqlstore.LimitArg(next.MaxIDLimit), next.Step, next.MinStep, next.MaxStep, string(next.Mode), string(next.Fallback),
			next.Version, next.Description, next.Name))
	}
	return sqlstore.CreateNamespace(ctx, dialect, s.inTx, ns, insert, read, write)
}

// DeleteNamespace implements allocator.NamespaceAdmin.DeleteNamespace: an
// UPDATE setting the tombstone.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	ns, found, err := s.segmentRow(ctx, `
		UPDATE segments SET deleted_at = `+segmentNow+`, updated_at = `+segmentNow+`
		WHERE namespace = ? AND deleted_at IS NULL
		RETURNING `+segmentColumns, name)
	if err != nil {
		return allocator.Namespace{}, segmentError("delete namespace", name, err)
	}
	if !found {
		return allocator.Namespace{}, dialect.NamespaceNotFound("delete namespace", name)
	}
	return ns, nil
}

// GetNamespace implements allocator.SegmentStore.GetNamespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	ns, found, err := s.segmentRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ? AND deleted_at IS NULL`, name)
	if err != nil {
		return allocator.Namespace{}, segmentError("get namespace", name, err)
	}
	if !found {
		return allocator.Namespace{}, dialect.NamespaceNotFound("get namespace", name)
	}
	return ns, nil
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces
// (BINARY collation: byte order).
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	return dialect.ListNamespaces(ctx, sqlstore.Rows(s.db, scanSegment))
}

// UpdateNamespace implements allocator.NamespaceAdmin.UpdateNamespace.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	ns, found, err := s.segmentRow(ctx, `
		UPDATE segments SET
			step        = COALESCE(?, step),
			min_step    = COALESCE(?, min_step),
			max_step    = COALESCE(?, max_step),
			mode        = COALESCE(?, mode),
			fallback    = COALESCE(?, fallback),
			description = COALESCE(?, description),
			max_id_limit = COALESCE(max_id_limit, ?),
			updated_at  = `+segmentNow+`
		WHERE namespace = ? AND deleted_at IS NULL
		RETURNING `+segmentColumns,
		sqlstore.Optional(u.Step), sqlstore.Optional(u.MinStep), sqlstore.Optional(u.MaxStep),
		sqlstore.OptionalText(u.Mode), sqlstore.OptionalText(u.Fallback), sqlstore.Optional(u.Description), sqlstore.Optional(u.MaxIDLimit), name)
	if err != nil {
		return allocator.Namespace{}, segmentError("update namespace", name, err)
	}
	if !found {
		return allocator.Namespace{}, dialect.NamespaceNotFound("update namespace", name)
	}
	return ns, nil
}

// FetchSegment implements allocator.SegmentStore.FetchSegment with one
// UPDATE … RETURNING (SQLite has one writer); a commit failure returns an
// error, so the range is never used, and the revision is the fetch's own.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	return dialect.FetchSegment(ctx, name, n, func(ctx context.Context) (allocator.Namespace, bool, error) {
		// The bound keeps max_id within its limit and the last slot whose
		// ID fits an int64 (an overflowing sum would become a REAL);
		// dialect.FetchSegment tells an excluded row from a missing one.
		return s.segmentRow(ctx, `
			UPDATE segments SET
				max_id     = max_id + ?,
				version    = version + 1,
				updated_at = `+segmentNow+`
			WHERE namespace = ? AND deleted_at IS NULL AND max_id <= min(COALESCE(max_id_limit, 9223372036854775807), (9223372036854775807 - id_offset) / id_stride) - ?
			RETURNING `+segmentColumns,
			n, name, n)
	}, s.GetNamespace)
}

// ReturnTail implements allocator.SegmentStore.ReturnTail: an UPDATE whose
// WHERE clause is the compare-and-set.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	return dialect.ReturnTail(ctx, name, expectMaxID, newMaxID, func(ctx context.Context) (int64, error) {
		return sqlstore.ExecCount(ctx, s.db, `
			UPDATE segments SET
				max_id     = ?,
				version    = version + 1,
				updated_at = `+segmentNow+`
			WHERE namespace = ? AND max_id = ? AND version = ? AND deleted_at IS NULL`,
			newMaxID, name, expectMaxID, expectVersion)
	})
}

// segmentRow runs a statement returning at most one segments row and reads
// to the end: stepping a write … RETURNING to its end runs its autocommit,
// so a commit failure surfaces here.
func (s *Store) segmentRow(ctx context.Context, query string, args ...any) (ns allocator.Namespace, found bool, err error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return allocator.Namespace{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		if found {
			return allocator.Namespace{}, false, errors.New("statement returned more than one row")
		}
		if ns, err = scanSegment(rows); err != nil {
			return allocator.Namespace{}, false, err
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return allocator.Namespace{}, false, err
	}
	if err := rows.Close(); err != nil {
		return allocator.Namespace{}, false, err
	}
	return ns, found, nil
}

func scanSegment(row sqlstore.Scanner) (allocator.Namespace, error) {
	return sqlstore.ScanNamespace(row, func(t *time.Time) sql.Scanner { return segmentTime{t} })
}

// segmentTime scans the UTC text segmentNow writes into a UTC time.Time.
type segmentTime struct{ t *time.Time }

// segmentTimeLayout reads segmentNow's text; the fraction is optional.
const segmentTimeLayout = "2006-01-02 15:04:05.999999999"

// Scan implements sql.Scanner.
func (st segmentTime) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	case time.Time:
		*st.t = v.UTC()
		return nil
	case nil:
		*st.t = time.Time{}
		return nil
	default:
		return fmt.Errorf("cannot scan %T into a time", src)
	}
	t, err := time.ParseInLocation(segmentTimeLayout, text, time.UTC)
	if err != nil {
		return fmt.Errorf("parse time %q: %w", text, err)
	}
	*st.t = t
	return nil
}

// duplicateName reports whether err is a primary key failure (name in use).
func duplicateName(err error) bool {
	var liteErr *sqlitedriver.Error
	return errors.As(err, &liteErr) && liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// segmentError wraps err on namespace name, adding ErrNamespaceExists for
// a duplicate and ErrInvalidNamespace for a value the table refuses.
func segmentError(op, name string, err error) error {
	var liteErr *sqlitedriver.Error
	if errors.As(err, &liteErr) {
		switch code := liteErr.Code(); {
		case code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, code == sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("sqlite: %s %q: %w: %w", op, name, allocator.ErrNamespaceExists, err)
		case code&0xff == sqlite3.SQLITE_CONSTRAINT: // CHECK, NOT NULL, column type
			return fmt.Errorf("sqlite: %s %q: %w: %w", op, name, allocator.ErrInvalidNamespace, err)
		}
	}
	return fmt.Errorf("sqlite: %s %q: %w", op, name, err)
}
