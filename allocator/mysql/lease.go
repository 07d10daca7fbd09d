package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/snowflake"
)

// dialect words the store's errors and builds its lease-event queries.
var dialect = sqlstore.Dialect{
	Name:          "mysql",
	NoRows:        sql.ErrNoRows,
	Placeholder:   sqlstore.Question,
	TimeArg:       func(t time.Time) any { return t.UTC() },
	SegmentError:  segmentError,
	DuplicateName: duplicateName,
}

// insertChunk is how many worker rows one INSERT creates.
const insertChunk = 500

// leaseColumns are scanLease's columns, then the database time.
const leaseColumns = `datacenter_id, worker_id, holder, owner, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, ts_floor_ms, UTC_TIMESTAMP(6)`

// defaultPruneBatch is how many events one prune statement deletes.
const defaultPruneBatch = 5000

// boundedCeiling is the ts_ceiling_ms a claim or heartbeat writes: the
// proposed ceiling (first parameter), at most database time plus the
// second (ttl + offset, ms), never below the stored one. UTC_TIMESTAMP(6)
// is one instant per statement.
const boundedCeiling = `GREATEST(ts_ceiling_ms, LEAST(?,
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + ?))`

// EnsureLayout implements allocator.LeaseStore.EnsureLayout.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (snowflake.Layout, error) {
		return dialect.EnsureLayout(layout, func(layout snowflake.Layout) error {
			_, err := tx.ExecContext(ctx, `
				INSERT INTO snowflake_layout
					(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at)
				VALUES (1, ?, ?, ?, ?, ?, TIMESTAMPADD(MICROSECOND, ? * 1000, '1970-01-01 00:00:00'), UTC_TIMESTAMP(6))
				ON DUPLICATE KEY UPDATE id = id`,
				layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits,
				layout.EpochMillis(), layout.EpochMillis())
			return err
		}, func(query string) sqlstore.Scanner { return tx.QueryRowContext(ctx, query) })
	})
}

// Claim implements allocator.LeaseStore.Claim: missing pool rows are
// created first in their own transactions, then the claim is one.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("mysql: %w", err)
	}
	if err := s.ensureWorkers(ctx, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID); err != nil {
		return allocator.ClaimResult{}, err
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (allocator.ClaimResult, error) {
		owned := func() (n int64, err error) {
			err = tx.QueryRowContext(ctx, sqlstore.OwnedQuery(sqlstore.Question, "UTC_TIMESTAMP(6)"), req.Owner, req.Holder).Scan(&n)
			return n, err
		}
		// Under SERIALIZABLE every InnoDB read locks, so a pool scan inside
		// would make heartbeats wait behind this claim. Pick by a plain read
		// outside; reread only that row, locked, inside, and retry if taken.
		pick := func() (sqlstore.Candidate, error) {
			c, err := sqlstore.ScanCandidate(s.db.QueryRowContext(ctx, `
				SELECT worker_id, holder, fencing_version, ts_ceiling_ms
				FROM worker_leases
				WHERE datacenter_id = ? AND worker_id BETWEEN ? AND ?
				  AND (holder IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR (holder = ? AND owner <=> ?))
				  AND (? = 0 OR ts_ceiling_ms <= ?)
				ORDER BY ts_ceiling_ms, worker_id
				LIMIT 1`,
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, req.Holder, sqlstore.NullText(req.Owner),
				req.MaxPrevCeilingMS, req.MaxPrevCeilingMS))
			if err != nil {
				return c, err
			}
			c, err = sqlstore.ScanCandidate(tx.QueryRowContext(ctx, `
				SELECT worker_id, holder, fencing_version, ts_ceiling_ms
				FROM worker_leases
				WHERE datacenter_id = ? AND worker_id = ?
				  AND (holder IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR (holder = ? AND owner <=> ?))
				  AND (? = 0 OR ts_ceiling_ms <= ?)`,
				req.DatacenterID, c.WorkerID, req.Holder, sqlstore.NullText(req.Owner), req.MaxPrevCeilingMS, req.MaxPrevCeilingMS))
			if errors.Is(err, sql.ErrNoRows) {
				return c, errRetry // taken or extended since the plain read
			}
			return c, err
		}
		take := func(c sqlstore.Candidate) (allocator.Lease, time.Time, error) {
			// The fencing version is compared again; a changed row retries
			// the claim. MySQL assigns left to right, so the floor is
			// computed from the old ceiling.
			n, err := sqlstore.ExecCount(ctx, tx, `
				UPDATE worker_leases SET
					holder = ?,
					owner = ?,
					secret_sha256 = ?,
					fencing_version = fencing_version + 1,
					acquired_at = UTC_TIMESTAMP(6),
					heartbeat_at = UTC_TIMESTAMP(6),
					expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
					released_at = NULL,
					ts_floor_ms = ts_ceiling_ms + 1,
					ts_ceiling_ms = `+boundedCeiling+`
				WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
				req.Holder, sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash), req.TTL.Milliseconds()*1000, req.CeilingMS, req.TTL.Milliseconds()+req.MaxClockOffset.Milliseconds(),
				req.DatacenterID, c.WorkerID, c.Version)
			key := allocator.LeaseKey{DatacenterID: req.DatacenterID, WorkerID: c.WorkerID}
			if err != nil {
				return allocator.Lease{}, time.Time{}, dialect.WorkerError("claim", key, err)
			}
			if n == 0 {
				return allocator.Lease{}, time.Time{}, errRetry
			}
			lease, _, err := getLease(ctx, tx, key)
			return lease, lease.AcquiredAt, err
		}
		return dialect.Claim(req, owned, pick, take, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// ensureWorkers creates any missing worker_leases row of the pool; a row
// another node inserted first is left as it is.
func (s *Store) ensureWorkers(ctx context.Context, dc, minID, maxID int64) error {
	var n int64
	err := s.db.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM worker_leases
		WHERE datacenter_id = ? AND worker_id BETWEEN ? AND ?`, dc, minID, maxID).Scan(&n)
	if err != nil {
		return fmt.Errorf("mysql: count worker IDs: %w", err)
	}
	if n == maxID-minID+1 {
		return nil
	}
	for lo := minID; lo <= maxID; lo += insertChunk {
		hi := min(lo+insertChunk-1, maxID)
		values := strings.TrimSuffix(strings.Repeat("(?, ?, ?),", int(hi-lo+1)), ",")
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			// New rows start at the last restore fence's ceiling: a row
			// missing from a restored store may have been used.
			var ceiling int64
			err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT ceiling_ms FROM store_fence WHERE id = 1), 0)`).Scan(&ceiling)
			if err != nil {
				return err
			}
			args := make([]any, 0, 3*(hi-lo+1))
			for w := lo; w <= hi; w++ {
				args = append(args, dc, w, ceiling)
			}
			_, err = tx.ExecContext(ctx, `
				INSERT INTO worker_leases (datacenter_id, worker_id, ts_ceiling_ms) VALUES `+values+`
				ON DUPLICATE KEY UPDATE worker_id = worker_id`, args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("mysql: create worker IDs %d/%d..%d: %w", dc, lo, hi, err)
		}
	}
	return nil
}

// Heartbeat implements allocator.LeaseStore.Heartbeat, returning
// UTC_TIMESTAMP(6) read after the update as store time.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	return sqlstore.Heartbeat(ctx, dialect, s.tx, req, func(tx *sql.Tx) (allocator.Lease, time.Time, error) {
		n, err := sqlstore.ExecCount(ctx, tx, `
			UPDATE worker_leases SET
				heartbeat_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
				ts_ceiling_ms = `+boundedCeiling+`
			WHERE datacenter_id = ? AND worker_id = ?
			  AND holder = ? AND fencing_version = ? AND expires_at > UTC_TIMESTAMP(6)
			  AND owner <=> ? AND secret_sha256 <=> ?`,
			req.TTL.Milliseconds()*1000, req.CeilingMS, req.TTL.Milliseconds()+req.MaxClockOffset.Milliseconds(),
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
			sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash))
		if err == nil && n == 0 {
			err = sql.ErrNoRows // no row matched: the lease is lost
		}
		if err != nil {
			return allocator.Lease{}, time.Time{}, dialect.HeartbeatError(req, err, held(ctx, tx, req.Key, req.Holder, req.FencingVersion))
		}
		return getLease(ctx, tx, req.Key)
	})
}

// Release implements allocator.LeaseStore.Release: it reads floor and
// ceiling, applies allocator.ReleaseCeiling and writes, in one transaction.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("mysql: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (int64, error) {
		read := func() sqlstore.Scanner {
			return tx.QueryRowContext(ctx, `
				SELECT ts_floor_ms, ts_ceiling_ms FROM worker_leases
				WHERE datacenter_id = ? AND worker_id = ? AND holder = ? AND fencing_version = ?
				  AND expires_at > UTC_TIMESTAMP(6) AND owner <=> ? AND secret_sha256 <=> ?
				FOR UPDATE`,
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
				sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash))
		}
		write := func(ceiling int64) error {
			_, err := tx.ExecContext(ctx, `
				UPDATE worker_leases SET
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					released_at = UTC_TIMESTAMP(6),
					expires_at = UTC_TIMESTAMP(6),
					ts_ceiling_ms = ?
				WHERE datacenter_id = ? AND worker_id = ? AND holder = ? AND fencing_version = ?`,
				ceiling, req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion)
			return err
		}
		return dialect.Release(req, read, held(ctx, tx, req.Key, req.Holder, req.FencingVersion), write,
			func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// held returns the held step of sqlstore's HeartbeatError and Release.
func held(ctx context.Context, tx *sql.Tx, key allocator.LeaseKey, holder string, version int64) func() (int64, error) {
	return func() (n int64, err error) {
		err = tx.QueryRowContext(ctx, sqlstore.HeldQuery(sqlstore.Question, "UTC_TIMESTAMP(6)"), key.DatacenterID, key.WorkerID, holder, version).Scan(&n)
		return n, err
	}
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return insertEvent(ctx, s.db, ev)
}

// Evict implements allocator.LeaseAdmin.Evict.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("mysql: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (allocator.Lease, error) {
		read := func() (allocator.Lease, error) {
			return scanLeaseOnly(tx.QueryRowContext(ctx,
				`SELECT `+leaseColumns+` FROM worker_leases WHERE datacenter_id = ? AND worker_id = ? FOR UPDATE`,
				req.Key.DatacenterID, req.Key.WorkerID))
		}
		evict := func(prev allocator.Lease) (allocator.Lease, error) {
			_, err := tx.ExecContext(ctx, `
				UPDATE worker_leases SET
					fencing_version = fencing_version + 1,
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					expires_at = UTC_TIMESTAMP(6)
				WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
				req.Key.DatacenterID, req.Key.WorkerID, prev.FencingVersion)
			if err != nil {
				return allocator.Lease{}, dialect.WorkerError("evict", req.Key, err)
			}
			lease, _, err := getLease(ctx, tx, req.Key)
			return lease, err
		}
		return dialect.Evict(req, read, evict, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// ListLeases implements allocator.LeaseAdmin.ListLeases.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	return dialect.ListLeases(ctx, leaseColumns, sqlstore.Rows(s.db, scanLeaseOnly))
}

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	return dialect.ListLeaseEvents(ctx, f, sqlstore.Rows(s.db, scanEvent))
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	return dialect.PruneLeaseEvents(ctx, before, s.pruneBatch, func(ctx context.Context, before any, batch int) (int64, error) {
		return sqlstore.ExecCount(ctx, s.db, `DELETE FROM lease_events WHERE at < ? ORDER BY id LIMIT ?`, before, batch)
	})
}

// insertEvent appends ev at database time, ignoring ev.ID and ev.At.
func insertEvent(ctx context.Context, db sqlstore.Execer, ev allocator.LeaseEvent) error {
	_, err := db.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`,
		ev.DatacenterID, ev.WorkerID, ev.Holder, sqlstore.NullText(ev.Owner), sqlstore.NullText(ev.RequestID), ev.FencingVersion, string(ev.Kind), ev.Detail)
	if err != nil {
		return fmt.Errorf("mysql: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
	}
	return nil
}

func scanEvent(row sqlstore.Scanner) (allocator.LeaseEvent, error) {
	return sqlstore.ScanEvent(row, sqlstore.UTC)
}

// getLease reads one row of worker_leases and the database time.
func getLease(ctx context.Context, tx *sql.Tx, key allocator.LeaseKey) (allocator.Lease, time.Time, error) {
	l, now, err := scanLease(tx.QueryRowContext(ctx,
		`SELECT `+leaseColumns+` FROM worker_leases WHERE datacenter_id = ? AND worker_id = ?`,
		key.DatacenterID, key.WorkerID))
	if err != nil {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("mysql: read worker %d/%d: %w", key.DatacenterID, key.WorkerID, err)
	}
	return l, now, nil
}

// scanLeaseOnly reads the leaseColumns and drops the database time.
func scanLeaseOnly(row sqlstore.Scanner) (allocator.Lease, error) {
	l, _, err := scanLease(row)
	return l, err
}

func scanLease(row sqlstore.Scanner) (allocator.Lease, time.Time, error) {
	var (
		l                                      allocator.Lease
		holder, owner                          sql.NullString
		acquired, heartbeat, expires, released sql.NullTime
		now                                    time.Time
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &owner, &l.FencingVersion,
		&acquired, &heartbeat, &expires, &released, &l.CeilingMS, &l.FloorMS, &now)
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	l.Holder, l.Owner = holder.String, owner.String
	l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.ReleasedAt = utc(acquired), utc(heartbeat), utc(expires), utc(released)
	return l, now.UTC(), nil
}

// utc returns t in UTC, or the zero time for NULL.
func utc(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
