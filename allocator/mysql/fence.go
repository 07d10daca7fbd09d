package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
)

var _ allocator.RestoreFencer = (*Store)(nil)

// FenceRestore implements allocator.RestoreFencer.FenceRestore in one
// SERIALIZABLE transaction (locking reads), retried whole on a conflict.
func (s *Store) FenceRestore(ctx context.Context, req allocator.FenceRequest) (allocator.FenceResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("mysql: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (allocator.FenceResult, error) {
		return dialect.Fence(req, sqlstore.FenceSteps{
			Now: func() (now time.Time, err error) {
				err = tx.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&now)
				return now.UTC(), err
			},
			Row: func() sqlstore.Scanner { return tx.QueryRowContext(ctx, sqlstore.FenceRowQuery+` FOR UPDATE`) },
			Leases: func() ([]allocator.Lease, error) {
				return sqlstore.QueryAll(ctx, tx, scanLeaseOnly,
					`SELECT `+leaseColumns+` FROM worker_leases ORDER BY datacenter_id, worker_id FOR UPDATE`)
			},
			FenceLease: func(prev allocator.Lease, ceiling int64) (allocator.Lease, error) {
				_, err := tx.ExecContext(ctx, `
					UPDATE worker_leases SET
						fencing_version = fencing_version + 1,
						holder = NULL,
						owner = NULL,
						secret_sha256 = NULL,
						expires_at = UTC_TIMESTAMP(6),
						ts_ceiling_ms = GREATEST(ts_ceiling_ms, ?)
					WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
					ceiling, prev.DatacenterID, prev.WorkerID, prev.FencingVersion)
				if err != nil {
					return allocator.Lease{}, err
				}
				lease, _, err := getLease(ctx, tx, prev.LeaseKey)
				return lease, err
			},
			Record: func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) },
			Counters: func() ([]allocator.FencedNamespace, error) {
				return sqlstore.QueryAll(ctx, tx, sqlstore.ScanCounter, sqlstore.CountersQuery+` FOR UPDATE`)
			},
			FenceCounter: func(name string, maxID, version int64) error {
				_, err := tx.ExecContext(ctx, `UPDATE segments SET max_id = ?, version = ?, updated_at = UTC_TIMESTAMP(6) WHERE namespace = ?`,
					maxID, version, name)
				return err
			},
			Bump: func(generation, ceiling int64, detail string) error {
				_, err := tx.ExecContext(ctx, `UPDATE store_fence SET generation = ?, ceiling_ms = ?, fenced_at = UTC_TIMESTAMP(6), detail = ? WHERE id = 1`,
					generation, ceiling, detail)
				return err
			},
		})
	})
}

// StoreMark implements allocator.RestoreFencer.StoreMark in one transaction.
func (s *Store) StoreMark(ctx context.Context) (allocator.StoreMark, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (allocator.StoreMark, error) {
		leases, err := sqlstore.QueryAll(ctx, tx, scanLeaseOnly, `SELECT `+leaseColumns+` FROM worker_leases`)
		if err != nil {
			return allocator.StoreMark{}, fmt.Errorf("mysql: read worker leases: %w", err)
		}
		counters, err := sqlstore.QueryAll(ctx, tx, sqlstore.ScanCounter, sqlstore.CountersQuery)
		if err != nil {
			return allocator.StoreMark{}, fmt.Errorf("mysql: read namespace counters: %w", err)
		}
		return dialect.StoreMark(tx.QueryRowContext(ctx, sqlstore.FenceRowQuery), leases, counters)
	})
}
