package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idgen-project/idgen/allocator"
)

// segmentColumns lists the columns of segments in the order scanSegment reads them.
const segmentColumns = `namespace, max_id, step, min_step, max_step, mode, fallback,
	version, created_at, updated_at, description`

// segmentNow is database time as the segments table stores it: UTC text
// with milliseconds, which sorts as time does.
const segmentNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// CreateNamespace inserts ns and returns the row as stored. The store sets
// version to 0 and both times to database time (UTC), whatever ns holds. It
// returns an error wrapping allocator.ErrNamespaceExists if the name is
// taken, and one wrapping allocator.ErrInvalidNamespace if ns breaks a
// constraint of the table (steps out of order, unknown mode or fallback,
// negative max_id, name empty or too long).
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	got, _, err := s.segmentRow(ctx, `
		INSERT INTO segments (namespace, max_id, step, min_step, max_step, mode, fallback,
			version, created_at, updated_at, description)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, `+segmentNow+`, `+segmentNow+`, ?)
		RETURNING `+segmentColumns,
		ns.Name, ns.MaxID, ns.Step, ns.MinStep, ns.MaxStep, string(ns.Mode), string(ns.Fallback), ns.Description)
	if err != nil {
		return allocator.Namespace{}, segmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// GetNamespace returns the namespace called name, or an error wrapping
// allocator.ErrNamespaceNotFound.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	ns, found, err := s.segmentRow(ctx, `SELECT `+segmentColumns+` FROM segments WHERE namespace = ?`, name)
	if err != nil {
		return allocator.Namespace{}, segmentError("get namespace", name, err)
	}
	if !found {
		return allocator.Namespace{}, fmt.Errorf("sqlite: get namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	return ns, nil
}

// ListNamespaces returns every namespace in byte order of the name.
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+segmentColumns+` FROM segments ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list namespaces: %w", err)
	}
	defer rows.Close()
	var list []allocator.Namespace
	for rows.Next() {
		ns, err := scanSegment(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list namespaces: %w", err)
		}
		list = append(list, ns)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list namespaces: %w", err)
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
	ns, found, err := s.segmentRow(ctx, `
		UPDATE segments SET
			step        = COALESCE(?, step),
			min_step    = COALESCE(?, min_step),
			max_step    = COALESCE(?, max_step),
			mode        = COALESCE(?, mode),
			fallback    = COALESCE(?, fallback),
			description = COALESCE(?, description),
			updated_at  = `+segmentNow+`
		WHERE namespace = ?
		RETURNING `+segmentColumns,
		int64Arg(u.Step), int64Arg(u.MinStep), int64Arg(u.MaxStep),
		modeArg(u.Mode), fallbackArg(u.Fallback), stringArg(u.Description), name)
	if err != nil {
		return allocator.Namespace{}, segmentError("update namespace", name, err)
	}
	if !found {
		return allocator.Namespace{}, fmt.Errorf("sqlite: update namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	return ns, nil
}

// FetchSegment advances the namespace's max_id by n and increments its
// version in one UPDATE … RETURNING, and returns the range it advanced
// over. SQLite runs one writer at a time, so concurrent fetches get
// disjoint ranges. Any error, including one at commit, returns no range:
// its IDs are never handed out.
//
// It returns an error wrapping allocator.ErrNamespaceNotFound if the
// namespace does not exist, and one wrapping allocator.ErrInvalidNamespace
// if n < 1 or the range would go past the largest int64 (the row is then
// unchanged).
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	if n < 1 {
		return allocator.Segment{}, fmt.Errorf("sqlite: fetch segment of %q: count %d below 1: %w", name, n, allocator.ErrInvalidNamespace)
	}
	// The max_id bound keeps max_id + n within int64 (SQLite would turn an
	// overflowing sum into a REAL); a row it excludes is told apart from a
	// missing one by fetchMiss.
	ns, found, err := s.segmentRow(ctx, `
		UPDATE segments SET
			max_id     = max_id + ?,
			version    = version + 1,
			updated_at = `+segmentNow+`
		WHERE namespace = ? AND max_id <= ?
		RETURNING `+segmentColumns,
		n, name, int64(math.MaxInt64)-n)
	if err != nil {
		return allocator.Segment{}, segmentError("fetch segment of", name, err)
	}
	if !found {
		return allocator.Segment{}, s.fetchMiss(ctx, name, n)
	}
	return allocator.Segment{Namespace: ns, First: ns.MaxID - n + 1, Last: ns.MaxID}, nil
}

// fetchMiss explains why a fetch of n matched no row.
func (s *Store) fetchMiss(ctx context.Context, name string, n int64) error {
	ns, err := s.GetNamespace(ctx, name)
	if err != nil {
		return fmt.Errorf("sqlite: fetch segment: %w", err)
	}
	return fmt.Errorf("sqlite: fetch segment of %q: max_id %d + %d exceeds the largest int64: %w",
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
		return false, fmt.Errorf("sqlite: return tail of %q: new max_id %d above current %d: %w",
			name, newMaxID, expectMaxID, allocator.ErrInvalidNamespace)
	}
	res, err := s.db.ExecContext(ctx, `
		UPDATE segments SET
			max_id     = ?,
			version    = version + 1,
			updated_at = `+segmentNow+`
		WHERE namespace = ? AND max_id = ? AND version = ?`,
		newMaxID, name, expectMaxID, expectVersion)
	if err != nil {
		return false, segmentError("return tail of", name, err)
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return false, segmentError("return tail of", name, err)
	}
	return affected == 1, nil
}

// segmentRow runs a statement returning at most one row of segmentColumns
// and reads its result to the end. Stepping a write … RETURNING to its end
// is what runs its autocommit, so a commit failure surfaces here as an
// error rather than after the row was taken as written.
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

// scanSegment reads one row of segmentColumns.
func scanSegment(row interface{ Scan(...any) error }) (allocator.Namespace, error) {
	var (
		ns             allocator.Namespace
		mode, fallback string
	)
	err := row.Scan(&ns.Name, &ns.MaxID, &ns.Step, &ns.MinStep, &ns.MaxStep, &mode, &fallback, &ns.Version,
		segmentTime{&ns.CreatedAt}, segmentTime{&ns.UpdatedAt}, &ns.Description)
	if err != nil {
		return allocator.Namespace{}, err
	}
	ns.Mode = allocator.Mode(mode)
	ns.Fallback = allocator.Fallback(fallback)
	return ns, nil
}

// segmentTime scans the UTC text segmentNow writes into a UTC time.Time.
type segmentTime struct{ t *time.Time }

// segmentTimeLayout reads segmentNow's text; the fraction is optional so
// that a time written by hand without one still reads.
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

// segmentError wraps err from a statement on the namespace called name,
// adding allocator.ErrNamespaceExists for a duplicate name and
// allocator.ErrInvalidNamespace for a value the table refuses.
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

// int64Arg turns an optional number into a parameter that is NULL when absent.
func int64Arg(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

// stringArg turns an optional string into a parameter that is NULL when absent.
func stringArg(v *string) any {
	if v == nil {
		return nil
	}
	return *v
}

// modeArg turns an optional mode into a parameter that is NULL when absent.
func modeArg(m *allocator.Mode) any {
	if m == nil {
		return nil
	}
	return string(*m)
}

// fallbackArg turns an optional fallback into a parameter that is NULL when absent.
func fallbackArg(f *allocator.Fallback) any {
	if f == nil {
		return nil
	}
	return string(*f)
}
