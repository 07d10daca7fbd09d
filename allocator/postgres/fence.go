package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
)

var _ allocator.RestoreFencer = (*Store)(nil)

// FenceRestore implements allocator.RestoreFencer in one SERIALIZABLE
// transaction, retried whole.
func (s *Store) FenceRestore(ctx context.Context, req allocator.FenceRequest) (allocator.FenceResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("postgres: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx pgx.Tx) (allocator.FenceResult, error) {
		return dialect.Fence(req, sqlstore.FenceSteps{
			Now: func() (now time.Time, err error) {
				err = tx.QueryRow(ctx, `SELECT now()`).Scan(&now)
				return now.UTC(), err
			},
			Row: func() sqlstore.Scanner { return tx.QueryRow(ctx, sqlstore.FenceRowQuery+` FOR UPDATE`) },
			Leases: func() ([]allocator.Lease, error) {
				return collect(ctx, tx, func(row pgx.Row) (allocator.Lease, error) {
					l, _, err := scanLease(row)
					return l, err
				}, `SELECT `+leaseColumns+`, now() FROM worker_leases ORDER BY datacenter_id, worker_id FOR UPDATE`)
			},
			FenceLease: func(prev allocator.Lease, ceiling int64) (allocator.Lease, error) {
				lease, _, err := scanLease(tx.QueryRow(ctx, `
					UPDATE worker_leases SET
						fencing_version = fencing_version + 1,
						holder = NULL,
						owner = NULL,
						secret_sha256 = NULL,
						expires_at = now(),
						ts_ceiling_ms = GREATEST(ts_ceiling_ms, $4::bigint)
					WHERE datacenter_id = $1 AND worker_id = $2 AND fencing_version = $3
					RETURNING `+leaseColumns+`, now()`,
					prev.DatacenterID, prev.WorkerID, prev.FencingVersion, ceiling))
				return lease, err
			},
			Record: func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) },
			Counters: func() ([]allocator.FencedNamespace, error) {
				return collect(ctx, tx, func(row pgx.Row) (allocator.FencedNamespace, error) { return sqlstore.ScanCounter(row) },
					sqlstore.CountersQuery+` FOR UPDATE`)
			},
			FenceCounter: func(name string, maxID, version int64) error {
				_, err := tx.Exec(ctx, `UPDATE segments SET max_id = $2, version = $3, updated_at = now() WHERE namespace = $1`,
					name, maxID, version)
				return err
			},
			Bump: func(generation, ceiling int64, detail string) error {
				_, err := tx.Exec(ctx, `UPDATE store_fence SET generation = $1, ceiling_ms = $2, fenced_at = now(), detail = $3 WHERE id = 1`,
					generation, ceiling, detail)
				return err
			},
		})
	})
}

// StoreMark implements allocator.RestoreFencer from one snapshot.
func (s *Store) StoreMark(ctx context.Context) (allocator.StoreMark, error) {
	return sqltx.Get(ctx, s.tx, func(tx pgx.Tx) (allocator.StoreMark, error) {
		leases, err := collect(ctx, tx, func(row pgx.Row) (allocator.Lease, error) {
			l, _, err := scanLease(row)
			return l, err
		}, `SELECT `+leaseColumns+`, now() FROM worker_leases`)
		if err != nil {
			return allocator.StoreMark{}, fmt.Errorf("postgres: read worker leases: %w", err)
		}
		counters, err := collect(ctx, tx, func(row pgx.Row) (allocator.FencedNamespace, error) { return sqlstore.ScanCounter(row) },
			sqlstore.CountersQuery)
		if err != nil {
			return allocator.StoreMark{}, fmt.Errorf("postgres: read namespace counters: %w", err)
		}
		return dialect.StoreMark(tx.QueryRow(ctx, sqlstore.FenceRowQuery), leases, counters)
	})
}

// collect runs query in tx and reads every row it returns with scan.
func collect[T any](ctx context.Context, tx pgx.Tx, scan func(pgx.Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
