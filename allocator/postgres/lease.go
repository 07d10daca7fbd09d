package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/snowflake"
)

// dialect words the store's errors and builds its lease-event queries.
var dialect = sqlstore.Dialect{
	Name:          "postgres",
	NoRows:        pgx.ErrNoRows,
	Placeholder:   sqlstore.Dollar,
	TimeArg:       func(t time.Time) any { return t },
	SegmentError:  segmentError,
	DuplicateName: duplicateName,
}

// leaseColumns are the columns of worker_leases in the order scanLease reads.
const leaseColumns = `datacenter_id, worker_id, holder, owner, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, ts_floor_ms`

// defaultPruneBatch is PruneLeaseEvents's rows per statement.
const defaultPruneBatch = 5000

// boundedCeiling is the ceiling a claim or heartbeat writes: the proposal
// ($5), at most database time + ttl ($4) + clock offset ($7), never below
// the stored one.
const boundedCeiling = `GREATEST(ts_ceiling_ms, LEAST($5::bigint,
	floor(extract(epoch FROM now()) * 1000)::bigint + $4::bigint + $7::bigint))`

// newRowCeiling: a new worker row's ceiling, the last fence's (0 if none).
const newRowCeiling = `COALESCE((SELECT ceiling_ms FROM store_fence WHERE id = 1), 0)`

// EnsureLayout implements allocator.LeaseStore.EnsureLayout.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	return dialect.EnsureLayout(layout, func(layout snowflake.Layout) error {
		_, err := s.pool.Exec(ctx, `
			INSERT INTO snowflake_layout
				(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch)
			VALUES (1, $1, $2, $3, $4, $5::bigint, to_timestamp($5::bigint / 1000.0))
			ON CONFLICT (id) DO NOTHING`,
			layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits, layout.EpochMillis())
		return err
	}, func(query string) sqlstore.Scanner { return s.pool.QueryRow(ctx, query) })
}

// Claim implements allocator.LeaseStore.Claim: missing rows are created
// in a transaction of their own, then the claim in one.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("postgres: %w", err)
	}
	if err := s.ensureWorkers(ctx, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID); err != nil {
		return allocator.ClaimResult{}, err
	}
	return sqltx.Get(ctx, s.tx, func(tx pgx.Tx) (allocator.ClaimResult, error) {
		owned := func() (n int64, err error) {
			err = tx.QueryRow(ctx, sqlstore.OwnedQuery(sqlstore.Dollar, "now()"), req.Owner, req.Holder).Scan(&n)
			return n, err
		}
		pick := func() (sqlstore.Candidate, error) {
			return sqlstore.ScanCandidate(tx.QueryRow(ctx, `
				SELECT worker_id, holder, fencing_version, ts_ceiling_ms
				FROM worker_leases
				WHERE datacenter_id = $1 AND worker_id BETWEEN $2 AND $3
				  AND (holder IS NULL OR expires_at <= now() OR (holder = $4 AND owner IS NOT DISTINCT FROM $6))
				  AND ($5::bigint = 0 OR ts_ceiling_ms <= $5::bigint)
				ORDER BY ts_ceiling_ms, worker_id
				LIMIT 1`,
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, req.Holder, req.MaxPrevCeilingMS, sqlstore.NullText(req.Owner)))
		}
		take := func(c sqlstore.Candidate) (allocator.Lease, time.Time, error) {
			// Recheck the version read; if the row changed anyway, retry.
			lease, now, err := scanLease(tx.QueryRow(ctx, `
				UPDATE worker_leases SET
					holder = $3,
					owner = $8,
					secret_sha256 = $9,
					fencing_version = fencing_version + 1,
					acquired_at = now(),
					heartbeat_at = now(),
					expires_at = now() + $4::bigint * interval '1 millisecond',
					released_at = NULL,
					ts_floor_ms = ts_ceiling_ms + 1,
					ts_ceiling_ms = `+boundedCeiling+`
				WHERE datacenter_id = $1 AND worker_id = $2 AND fencing_version = $6
				RETURNING `+leaseColumns+`, now()`,
				req.DatacenterID, c.WorkerID, req.Holder, req.TTL.Milliseconds(), req.CeilingMS, c.Version,
				req.MaxClockOffset.Milliseconds(), sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash)))
			if errors.Is(err, pgx.ErrNoRows) {
				return allocator.Lease{}, time.Time{}, errRetry
			}
			if err != nil {
				return allocator.Lease{}, time.Time{}, dialect.WorkerError("claim",
					allocator.LeaseKey{DatacenterID: req.DatacenterID, WorkerID: c.WorkerID}, err)
			}
			return lease, now, nil
		}
		return dialect.Claim(req, owned, pick, take, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// ensureWorkers creates the pool's missing rows at the last fence's
// ceiling (a row missing after a restore may have been used). Rows other
// nodes inserted first are left alone.
func (s *Store) ensureWorkers(ctx context.Context, dc, minID, maxID int64) error {
	var n int64
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FROM worker_leases
		WHERE datacenter_id = $1 AND worker_id BETWEEN $2 AND $3`, dc, minID, maxID).Scan(&n)
	if err != nil {
		return fmt.Errorf("postgres: count worker IDs: %w", err)
	}
	if n == maxID-minID+1 {
		return nil
	}
	// Under SERIALIZABLE a concurrent insert is a serialization failure,
	// which inTx retries.
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO worker_leases (datacenter_id, worker_id, ts_ceiling_ms)
			SELECT $1, w, `+newRowCeiling+` FROM generate_series($2::integer, $3::integer) AS w
			ON CONFLICT (datacenter_id, worker_id) DO NOTHING`, dc, minID, maxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: create worker IDs %d/%d..%d: %w", dc, minID, maxID, err)
	}
	return nil
}

// Heartbeat implements allocator.LeaseStore.Heartbeat; the store's time
// is clock_timestamp().
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	return sqlstore.Heartbeat(ctx, dialect, s.tx, req, func(tx pgx.Tx) (allocator.Lease, time.Time, error) {
		lease, now, err := scanLease(tx.QueryRow(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = now(),
				expires_at = now() + $4::bigint * interval '1 millisecond',
				ts_ceiling_ms = `+boundedCeiling+`
			WHERE datacenter_id = $1 AND worker_id = $2
			  AND holder = $3 AND fencing_version = $6 AND expires_at > now()
			  AND owner IS NOT DISTINCT FROM $8 AND secret_sha256 IS NOT DISTINCT FROM $9
			RETURNING `+leaseColumns+`, clock_timestamp()`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.TTL.Milliseconds(), req.CeilingMS,
			req.FencingVersion, req.MaxClockOffset.Milliseconds(), sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash)))
		return lease, now, dialect.HeartbeatError(req, err, held(ctx, tx, req.Key, req.Holder, req.FencingVersion))
	})
}

// Release implements allocator.LeaseStore.Release: read floor and ceiling,
// apply allocator.ReleaseCeiling and write, in one transaction.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx pgx.Tx) (int64, error) {
		read := func() sqlstore.Scanner {
			return tx.QueryRow(ctx, `
				SELECT ts_floor_ms, ts_ceiling_ms FROM worker_leases
				WHERE datacenter_id = $1 AND worker_id = $2 AND holder = $3 AND fencing_version = $4
				  AND expires_at > now() AND owner IS NOT DISTINCT FROM $5 AND secret_sha256 IS NOT DISTINCT FROM $6
				FOR UPDATE`,
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
				sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash))
		}
		write := func(ceiling int64) error {
			_, err := tx.Exec(ctx, `
				UPDATE worker_leases SET
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					released_at = now(),
					expires_at = now(),
					ts_ceiling_ms = $5
				WHERE datacenter_id = $1 AND worker_id = $2 AND holder = $3 AND fencing_version = $4`,
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, ceiling)
			return err
		}
		return dialect.Release(req, read, held(ctx, tx, req.Key, req.Holder, req.FencingVersion), write,
			func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// held returns sqlstore's held step in tx.
func held(ctx context.Context, tx pgx.Tx, key allocator.LeaseKey, holder string, version int64) func() (int64, error) {
	return func() (n int64, err error) {
		err = tx.QueryRow(ctx, sqlstore.HeldQuery(sqlstore.Dollar, "now()"), key.DatacenterID, key.WorkerID, holder, version).Scan(&n)
		return n, err
	}
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return insertEvent(ctx, s.pool, ev)
}

// Evict implements allocator.LeaseAdmin.Evict.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("postgres: %w", err)
	}
	return sqltx.Get(ctx, s.tx, func(tx pgx.Tx) (allocator.Lease, error) {
		read := func() (allocator.Lease, error) {
			prev, _, err := scanLease(tx.QueryRow(ctx, `
				SELECT `+leaseColumns+`, now() FROM worker_leases
				WHERE datacenter_id = $1 AND worker_id = $2 FOR UPDATE`,
				req.Key.DatacenterID, req.Key.WorkerID))
			return prev, err
		}
		evict := func(prev allocator.Lease) (allocator.Lease, error) {
			lease, _, err := scanLease(tx.QueryRow(ctx, `
				UPDATE worker_leases SET
					fencing_version = fencing_version + 1,
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					expires_at = now()
				WHERE datacenter_id = $1 AND worker_id = $2 AND fencing_version = $3
				RETURNING `+leaseColumns+`, now()`,
				req.Key.DatacenterID, req.Key.WorkerID, prev.FencingVersion))
			if err != nil {
				return allocator.Lease{}, dialect.WorkerError("evict", req.Key, err)
			}
			return lease, nil
		}
		return dialect.Evict(req, read, evict, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev) })
	})
}

// ListLeases implements allocator.LeaseAdmin.ListLeases.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	return dialect.ListLeases(ctx, leaseColumns+`, now()`, rows(s.pool, func(row pgx.Row) (allocator.Lease, error) {
		l, _, err := scanLease(row)
		return l, err
	}))
}

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	return dialect.ListLeaseEvents(ctx, f, rows(s.pool, scanEvent))
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	return dialect.PruneLeaseEvents(ctx, before, s.pruneBatch, func(ctx context.Context, before any, batch int) (int64, error) {
		tag, err := s.pool.Exec(ctx, `
			DELETE FROM lease_events WHERE id IN (
				SELECT id FROM lease_events WHERE at < $1 ORDER BY id LIMIT $2)`, before, batch)
		return tag.RowsAffected(), err
	})
}

// rows returns a sqlstore.Query running its SELECT on the pool.
func rows[T any](pool *pgxpool.Pool, scan func(pgx.Row) (T, error)) sqlstore.Query[T] {
	return func(ctx context.Context, query string, args ...any) ([]T, error) {
		result, err := pool.Query(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(result, func(row pgx.CollectableRow) (T, error) {
			return scan(row)
		})
	}
}

// execer is what insertEvent needs of a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// insertEvent appends ev at database time (ev.ID and ev.At ignored).
func insertEvent(ctx context.Context, db execer, ev allocator.LeaseEvent) error {
	_, err := db.Exec(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8)`,
		ev.DatacenterID, ev.WorkerID, ev.Holder, sqlstore.NullText(ev.Owner), sqlstore.NullText(ev.RequestID), ev.FencingVersion, string(ev.Kind), ev.Detail)
	if err != nil {
		return fmt.Errorf("postgres: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
	}
	return nil
}

// scanEvent reads one row of sqlstore.EventColumns.
func scanEvent(row pgx.Row) (allocator.LeaseEvent, error) {
	return sqlstore.ScanEvent(row, sqlstore.UTC)
}

// scanLease reads the leaseColumns and one timestamp after them.
func scanLease(row pgx.Row) (allocator.Lease, time.Time, error) {
	var (
		l                                         allocator.Lease
		holder, owner                             *string
		acquired, heartbeat, expires, released, t *time.Time
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &owner, &l.FencingVersion,
		&acquired, &heartbeat, &expires, &released, &l.CeilingMS, &l.FloorMS, &t)
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	l.Holder, l.Owner = text(holder), text(owner)
	l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.ReleasedAt = utc(acquired), utc(heartbeat), utc(expires), utc(released)
	return l, utc(t), nil
}

// text turns NULL into "".
func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// utc returns *t in UTC, or the zero time for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
