package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
)

// segmentColumns are segments' columns as scanSegment reads them.
const segmentColumns = sqlstore.NamespaceColumns

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace; a
// tombstone in the way is overwritten in a transaction locking its row.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	stride, offset := ns.Interleave()
	insert := func(ctx context.Context) (got allocator.Namespace, err error) {
		err = s.segmentTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `
				INSERT INTO segments (namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
					version, created_at, updated_at, description, id_stride, id_offset)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?, ?, ?)`,
				ns.Name, ns.MaxID, sqlstore.LimitArg(ns.MaxIDLimit), ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description, stride, offset)
			if err != nil {
				return err
			}
			got, err = scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ?`, ns.Name))
			return err
		})
		return got, err
	}
	read := func(tx *sql.Tx) (allocator.Namespace, error) {
		return scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ? FOR UPDATE`, ns.Name))
	}
	write := func(tx *sql.Tx, next allocator.Namespace) (allocator.Namespace, error) {
		_, err := tx.ExecContext(ctx, `
			UPDATE segments SET
				max_id = ?, max_id_limit = ?, step = ?, min_step = ?, max_step = ?, mode = ?, fallback = ?,
				version = ?, created_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6), description = ?, deleted_at = NULL
			WHERE namespace = ?`,
			next.MaxID, sqlstore.LimitArg(next.MaxIDLimit), next.Step, next.MinStep, next.MaxStep, string(next.Mode), string(next.Fallback),
			next.Version, next.Description, next.Name)
		if err != nil {
			return allocator.Namespace{}, err
		}
		return scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ?`, ns.Name))
	}
	return sqlstore.CreateNamespace(ctx, dialect, s.segmentTx, ns, insert, read, write)
}

// DeleteNamespace implements allocator.NamespaceAdmin.DeleteNamespace: an
// UPDATE setting the tombstone, read back under its lock.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	var ns allocator.Namespace
	err := s.segmentTx(ctx, func(tx *sql.Tx) error {
		n, err := sqlstore.ExecCount(ctx, tx, `
			UPDATE segments SET deleted_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
			WHERE namespace = ? AND deleted_at IS NULL`, name)
		if err != nil {
			return err
		}
		// deleted_at changes whenever the row matches.
		if n == 0 {
			return sql.ErrNoRows
		}
		ns, err = scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ?`, name))
		return err
	})
	return dialect.NamespaceResult("delete namespace", name, ns, err)
}

// GetNamespace implements allocator.SegmentStore.GetNamespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	ns, err := scanSegment(s.db.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ? AND deleted_at IS NULL`, name))
	return dialect.NamespaceResult("get namespace", name, ns, err)
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces (utf8mb4_bin: byte order).
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	return dialect.ListNamespaces(ctx, sqlstore.Rows(s.db, scanSegment))
}

// UpdateNamespace implements allocator.NamespaceAdmin.UpdateNamespace.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	var ns allocator.Namespace
	err := s.segmentTx(ctx, func(tx *sql.Tx) error {
		// Rows affected cannot tell missing from unchanged; the read-back
		// under the UPDATE's lock decides.
		_, err := tx.ExecContext(ctx, `
			UPDATE segments SET
				step        = COALESCE(?, step),
				min_step    = COALESCE(?, min_step),
				max_step    = COALESCE(?, max_step),
				mode        = COALESCE(?, mode),
				fallback    = COALESCE(?, fallback),
				description = COALESCE(?, description),
				max_id_limit = COALESCE(max_id_limit, ?),
				updated_at  = UTC_TIMESTAMP(6)
			WHERE namespace = ? AND deleted_at IS NULL`,
			sqlstore.Optional(u.Step), sqlstore.Optional(u.MinStep), sqlstore.Optional(u.MaxStep),
			sqlstore.OptionalText(u.Mode), sqlstore.OptionalText(u.Fallback), sqlstore.Optional(u.Description), sqlstore.Optional(u.MaxIDLimit), name)
		if err != nil {
			return err
		}
		ns, err = scanSegment(tx.QueryRowContext(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ? AND deleted_at IS NULL`, name))
		return err
	})
	return dialect.NamespaceResult("update namespace", name, ns, err)
}

// FetchSegment implements allocator.SegmentStore.FetchSegment: an UPDATE
// records max_id with LAST_INSERT_ID, read back with the row in the same
// transaction under the UPDATE's row lock, so the row (and version) is the
// one this fetch left; concurrent fetches queue on the lock. An uncertain
// commit returns an error, so its range is never used.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	return dialect.FetchSegment(ctx, name, n, func(ctx context.Context) (ns allocator.Namespace, matched bool, err error) {
		err = s.segmentTx(ctx, func(tx *sql.Tx) error {
			// The bound keeps max_id within its limit and the last slot
			// whose ID fits a BIGINT (Namespace.Limit); dialect.FetchSegment
			// tells an excluded row from a missing one.
			affected, err := sqlstore.ExecCount(ctx, tx, `
				UPDATE segments SET
					max_id     = LAST_INSERT_ID(max_id + ?),
					version    = version + 1,
					updated_at = UTC_TIMESTAMP(6)
				WHERE namespace = ? AND deleted_at IS NULL AND max_id <= LEAST(COALESCE(max_id_limit, 9223372036854775807), (9223372036854775807 - id_offset) DIV id_stride) - ?`,
				n, name, n)
			if err != nil {
				return err
			}
			// max_id changes whenever the row matches: changed = matched.
			if affected == 0 {
				return nil
			}
			matched = true
			var lastID int64
			ns, err = scanSegmentWith(tx.QueryRowContext(ctx,
				`SELECT LAST_INSERT_ID(), `+segmentColumns+` FROM segments WHERE namespace = ?`, name), &lastID)
			if err != nil {
				return err
			}
			if lastID != ns.MaxID {
				return fmt.Errorf("LAST_INSERT_ID() %d differs from max_id %d read back", lastID, ns.MaxID)
			}
			return nil
		})
		return ns, matched, err
	}, s.GetNamespace)
}

// ReturnTail implements allocator.SegmentStore.ReturnTail: an UPDATE whose
// WHERE clause is the compare-and-set.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	// version changes whenever the row matches: affected = matched.
	return dialect.ReturnTail(ctx, name, expectMaxID, newMaxID, func(ctx context.Context) (int64, error) {
		return sqlstore.ExecCount(ctx, s.db, `
			UPDATE segments SET
				max_id     = ?,
				version    = version + 1,
				updated_at = UTC_TIMESTAMP(6)
			WHERE namespace = ? AND max_id = ? AND version = ? AND deleted_at IS NULL`,
			newMaxID, name, expectMaxID, expectVersion)
	})
}

// segmentTx runs fn in one REPEATABLE READ transaction, not retried: every
// segment transaction first writes one row by primary key, whose lock
// orders it and keeps the following read consistent, so SERIALIZABLE has
// nothing to catch. Failures go back to the allocator.
func (s *Store) segmentTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error from fn is the one that matters
		return err
	}
	return tx.Commit()
}

func scanSegment(row sqlstore.Scanner) (allocator.Namespace, error) {
	return scanSegmentWith(row)
}

// scanSegmentWith reads lead, then one row of segmentColumns.
func scanSegmentWith(row sqlstore.Scanner, lead ...any) (allocator.Namespace, error) {
	return sqlstore.ScanNamespace(row, func(t *time.Time) sql.Scanner { return segmentTime{t} }, lead...)
}

// segmentTime scans a UTC DATETIME into a UTC time.Time, parsed or text.
type segmentTime struct{ t *time.Time }

// segmentTimeLayout is how MySQL prints DATETIME(6).
const segmentTimeLayout = "2006-01-02 15:04:05.999999"

// Scan implements sql.Scanner.
func (st segmentTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		// Stored as UTC: read the wall clock as such, whatever the loc.
		*st.t = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		return nil
	case []byte:
		return st.parse(string(v))
	case string:
		return st.parse(v)
	case nil:
		*st.t = time.Time{}
		return nil
	default:
		return fmt.Errorf("cannot scan %T into a time", src)
	}
}

func (st segmentTime) parse(s string) error {
	t, err := time.ParseInLocation(segmentTimeLayout, s, time.UTC)
	if err != nil {
		return fmt.Errorf("parse DATETIME %q: %w", s, err)
	}
	*st.t = t
	return nil
}

// duplicateName reports whether err is ER_DUP_ENTRY (name in use).
func duplicateName(err error) bool {
	var myErr *mysqldriver.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1062 // ER_DUP_ENTRY
}

// segmentError wraps err on namespace name, adding ErrNamespaceExists for
// a duplicate and ErrInvalidNamespace for a value the table refuses.
func segmentError(op, name string, err error) error {
	var myErr *mysqldriver.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1062: // ER_DUP_ENTRY
			return fmt.Errorf("mysql: %s %q: %w: %w", op, name, allocator.ErrNamespaceExists, err)
		case 3819, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
			4025, // ER_CONSTRAINT_FAILED (MariaDB)
			1048, // ER_BAD_NULL_ERROR
			1406, // ER_DATA_TOO_LONG
			1366, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
			1264, // ER_WARN_DATA_OUT_OF_RANGE
			1690: // ER_DATA_OUT_OF_RANGE
			return fmt.Errorf("mysql: %s %q: %w: %w", op, name, allocator.ErrInvalidNamespace, err)
		}
	}
	return fmt.Errorf("mysql: %s %q: %w", op, name, err)
}
