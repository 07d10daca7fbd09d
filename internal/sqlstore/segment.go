package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// NamespaceColumns are the segments columns ScanNamespace reads.
const NamespaceColumns = `namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
	version, created_at, updated_at, description, deleted_at, id_stride, id_offset`

// ScanNamespace reads lead, then NamespaceColumns; at wraps each time
// destination in the dialect's scanner.
func ScanNamespace(row Scanner, at func(*time.Time) sql.Scanner, lead ...any) (allocator.Namespace, error) {
	var (
		ns             allocator.Namespace
		limit          sql.NullInt64
		mode, fallback string
	)
	dest := append(lead,
		&ns.Name, &ns.MaxID, &limit, &ns.Step, &ns.MinStep, &ns.MaxStep, &mode, &fallback, &ns.Version,
		at(&ns.CreatedAt), at(&ns.UpdatedAt), &ns.Description, at(&ns.DeletedAt), &ns.Stride, &ns.Offset)
	if err := row.Scan(dest...); err != nil {
		return allocator.Namespace{}, err
	}
	ns.MaxIDLimit = limit.Int64
	ns.Mode = allocator.Mode(mode)
	ns.Fallback = allocator.Fallback(fallback)
	return ns, nil
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces.
func (d Dialect) ListNamespaces(ctx context.Context, query Query[allocator.Namespace]) ([]allocator.Namespace, error) {
	list, err := query(ctx, `SELECT `+NamespaceColumns+` FROM segments WHERE deleted_at IS NULL ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("%s: list namespaces: %w", d.Name, err)
	}
	return list, nil
}

// NamespaceNotFound is op's error for a namespace without a live row.
func (d Dialect) NamespaceNotFound(op, name string) error {
	return fmt.Errorf("%s: %s %q: %w", d.Name, op, name, allocator.ErrNamespaceNotFound)
}

// FetchSegment implements allocator.SegmentStore.FetchSegment: fetch raises
// max_id by n and returns the row; on no match, get tells a missing
// namespace from an exhausted one.
func (d Dialect) FetchSegment(ctx context.Context, name string, n int64,
	fetch func(ctx context.Context) (ns allocator.Namespace, found bool, err error),
	get func(ctx context.Context, name string) (allocator.Namespace, error)) (allocator.Segment, error) {
	if err := allocator.ValidFetch(name, n); err != nil {
		return allocator.Segment{}, fmt.Errorf("%s: %w", d.Name, err)
	}
	ns, found, err := fetch(ctx)
	if err != nil {
		return allocator.Segment{}, d.SegmentError("fetch segment of", name, err)
	}
	if !found {
		ns, err := get(ctx, name)
		if err != nil {
			return allocator.Segment{}, fmt.Errorf("%s: fetch segment: %w", d.Name, err)
		}
		return allocator.Segment{}, fmt.Errorf("%s: fetch segment of %q: %w", d.Name, name, ns.ExhaustedError(n))
	}
	return allocator.Segment{Namespace: ns, First: ns.MaxID - n + 1, Last: ns.MaxID}, nil
}

// ReturnTail implements allocator.SegmentStore.ReturnTail; update runs the
// compare-and-set and returns the rows matched.
func (d Dialect) ReturnTail(ctx context.Context, name string, expectMaxID, newMaxID int64,
	update func(ctx context.Context) (int64, error)) (bool, error) {
	if err := allocator.ValidReturnTail(name, expectMaxID, newMaxID); err != nil {
		return false, fmt.Errorf("%s: %w", d.Name, err)
	}
	matched, err := update(ctx)
	if err != nil {
		return false, d.SegmentError("return tail of", name, err)
	}
	return matched == 1, nil
}

// NamespaceResult is op's result from ns or err: ErrNamespaceNotFound for
// d.NoRows, else d.SegmentError.
func (d Dialect) NamespaceResult(op, name string, ns allocator.Namespace, err error) (allocator.Namespace, error) {
	if errors.Is(err, d.NoRows) {
		return allocator.Namespace{}, d.NamespaceNotFound(op, name)
	}
	if err != nil {
		return allocator.Namespace{}, d.SegmentError(op, name, err)
	}
	return ns, nil
}

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace;
// when insert finds the name in use, revive overwrites a tombstone.
func CreateNamespace[Tx any](ctx context.Context, d Dialect, run func(ctx context.Context, fn func(tx Tx) error) error,
	ns allocator.Namespace, insert func(ctx context.Context) (allocator.Namespace, error),
	read func(tx Tx) (allocator.Namespace, error), write func(tx Tx, next allocator.Namespace) (allocator.Namespace, error)) (allocator.Namespace, error) {
	got, err := insert(ctx)
	if d.DuplicateName(err) {
		return revive(ctx, d, run, ns, err, read, write)
	}
	if err != nil {
		return allocator.Namespace{}, d.SegmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// revive creates ns over a tombstone after the INSERT failed with dupErr:
// read locks the row, Namespace.Revive decides, write writes. A live or
// vanished row reports dupErr.
func revive[Tx any](ctx context.Context, d Dialect, run func(ctx context.Context, fn func(tx Tx) error) error,
	ns allocator.Namespace, dupErr error,
	read func(tx Tx) (allocator.Namespace, error), write func(tx Tx, next allocator.Namespace) (allocator.Namespace, error)) (allocator.Namespace, error) {
	var (
		got     allocator.Namespace
		refused error // Revive's error, which is no database error
	)
	err := run(ctx, func(tx Tx) error {
		tomb, err := read(tx)
		if err := d.tombstone(tomb, err, dupErr); err != nil {
			return err
		}
		next, err := tomb.Revive(ns)
		if err != nil {
			refused = err
			return err
		}
		got, err = write(tx, next)
		return err
	})
	if refused != nil {
		return allocator.Namespace{}, fmt.Errorf("%s: create namespace %q: %w", d.Name, ns.Name, refused)
	}
	if err != nil {
		return allocator.Namespace{}, d.SegmentError("create namespace", ns.Name, err)
	}
	return got, nil
}

// tombstone returns nil for a revivable tombstone, dupErr for a live or
// vanished row (deleted rows are never removed), else err.
func (d Dialect) tombstone(tomb allocator.Namespace, err, dupErr error) error {
	switch {
	case errors.Is(err, d.NoRows):
		return dupErr
	case err != nil:
		return err
	case tomb.DeletedAt.IsZero():
		return dupErr
	}
	return nil
}
