package sqlite

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
// BEGIN IMMEDIATE transaction.
func (s *Store) FenceRestore(ctx context.Context, req allocator.FenceRequest) (allocator.FenceResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("sqlite: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (allocator.FenceResult, error) {
		var now string
		return dialect.Fence(req, sqlstore.FenceSteps{
			Now: func() (time.Time, error) {
				text, t, err := dbTime(ctx, tx)
				now = text
				return t, err
			},
			Row: func() sqlstore.Scanner { return tx.QueryRowContext(ctx, sqlstore.FenceRowQuery) },
			Leases: func() ([]allocator.Lease, error) {
				return sqlstore.QueryAll(ctx, tx, scanLease, `SELECT `+leaseColumns+` FROM worker_leases ORDER BY datacenter_id, worker_id`)
			},
			FenceLease: func(prev allocator.Lease, ceiling int64) (allocator.Lease, error) {
				return scanLease(tx.QueryRowContext(ctx, `
					UPDATE worker_leases SET
						fencing_version = fencing_version + 1,
						holder = NULL,
						owner = NULL,
						secret_sha256 = NULL,
						expires_at = ?5,
						ts_ceiling_ms = max(ts_ceiling_ms, ?4)
					WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?3
					RETURNING `+leaseColumns,
					prev.DatacenterID, prev.WorkerID, prev.FencingVersion, ceiling, now))
			},
			Record: func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev, now) },
			Counters: func() ([]allocator.FencedNamespace, error) {
				return sqlstore.QueryAll(ctx, tx, sqlstore.ScanCounter, sqlstore.CountersQuery)
			},
			FenceCounter: func(name string, maxID, version int64) error {
				_, err := tx.ExecContext(ctx, `UPDATE segments SET max_id = ?2, version = ?3, updated_at = ?4 WHERE namespace = ?1`,
					name, maxID, version, now)
				return err
			},
			Bump: func(generation, ceiling int64, detail string) error {
				_, err := tx.ExecContext(ctx, `UPDATE store_fence SET generation = ?1, ceiling_ms = ?2, fenced_at = ?3, detail = ?4 WHERE id = 1`,
					generation, ceiling, now, detail)
				return err
			},
		})
	})
}

// StoreMark implements allocator.RestoreFencer.StoreMark in one transaction.
func (s *Store) StoreMark(ctx context.Context) (allocator.StoreMark, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return allocator.StoreMark{}, fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	leases, err := sqlstore.QueryAll(ctx, tx, scanLease, `SELECT `+leaseColumns+` FROM worker_leases`)
	if err != nil {
		return allocator.StoreMark{}, fmt.Errorf("sqlite: read worker leases: %w", err)
	}
	counters, err := sqlstore.QueryAll(ctx, tx, sqlstore.ScanCounter, sqlstore.CountersQuery)
	if err != nil {
		return allocator.StoreMark{}, fmt.Errorf("sqlite: read namespace counters: %w", err)
	}
	return dialect.StoreMark(tx.QueryRowContext(ctx, sqlstore.FenceRowQuery), leases, counters)
}
