package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// leaseColumns are the columns of worker_leases in the order scanLease reads.
const leaseColumns = `datacenter_id, worker_id, holder, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms`

// EnsureLayout records layout (the default layout when layout is zero) as the
// Snowflake layout of the database, unless one is recorded already, and
// returns the recorded one. Of concurrent first calls, exactly one layout
// wins and every call returns it.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO snowflake_layout
			(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch)
		VALUES (1, $1, $2, $3, $4, $5::bigint, to_timestamp($5::bigint / 1000.0))
		ON CONFLICT (id) DO NOTHING`,
		layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits, layout.EpochMillis())
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("postgres: record snowflake layout: %w", err)
	}
	var got snowflake.Layout
	var epochMS int64
	err = s.pool.QueryRow(ctx, `
		SELECT time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms
		FROM snowflake_layout WHERE id = 1`).
		Scan(&got.TimeBits, &got.DatacenterBits, &got.WorkerBits, &got.SequenceBits, &epochMS)
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("postgres: read snowflake layout: %w", err)
	}
	got.Epoch = time.UnixMilli(epochMS).UTC()
	return got, nil
}

// Claim claims a worker ID of the pool req describes: a free row, a row whose
// lease has expired by database time, or a row req.Holder holds already (a
// claim of its own whose outcome it did not learn). Rows whose ceiling lies
// above req.MaxPrevCeilingMS (when not zero) are left alone. Among the
// candidates it takes the lowest ceiling, then the lowest worker ID.
//
// The claim runs in one SERIALIZABLE transaction, retried on serialization
// failures until ctx ends. It returns an error wrapping
// allocator.ErrNoWorkerAvailable when no row can be claimed. A malformed
// request (no holder or one over 255 bytes, a ttl under 1ms, negative or
// reversed IDs, a pool of more than 65536 IDs) is refused with an error that
// wraps no sentinel.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("postgres: %w", err)
	}
	if err := s.ensureWorkers(ctx, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID); err != nil {
		return allocator.ClaimResult{}, err
	}
	var res allocator.ClaimResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			workerID, prevVersion, prevCeiling int64
			prevHolder                         *string
		)
		err := tx.QueryRow(ctx, `
			SELECT worker_id, holder, fencing_version, ts_ceiling_ms
			FROM worker_leases
			WHERE datacenter_id = $1 AND worker_id BETWEEN $2 AND $3
			  AND (holder IS NULL OR expires_at <= now() OR holder = $4)
			  AND ($5::bigint = 0 OR ts_ceiling_ms <= $5::bigint)
			ORDER BY ts_ceiling_ms, worker_id
			LIMIT 1`,
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, req.Holder, req.MaxPrevCeilingMS).
			Scan(&workerID, &prevHolder, &prevVersion, &prevCeiling)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: datacenter %d, workers %d..%d: %w",
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, allocator.ErrNoWorkerAvailable)
		}
		if err != nil {
			return fmt.Errorf("postgres: find a worker ID to claim: %w", err)
		}
		// The fencing version we read is compared again: should the row
		// have changed anyway, the claim is tried afresh.
		lease, now, err := scanLease(tx.QueryRow(ctx, `
			UPDATE worker_leases SET
				holder = $3,
				fencing_version = fencing_version + 1,
				acquired_at = now(),
				heartbeat_at = now(),
				expires_at = now() + $4::bigint * interval '1 millisecond',
				released_at = NULL,
				ts_ceiling_ms = GREATEST(ts_ceiling_ms, $5::bigint)
			WHERE datacenter_id = $1 AND worker_id = $2 AND fencing_version = $6
			RETURNING `+leaseColumns+`, now()`,
			req.DatacenterID, workerID, req.Holder, req.TTL.Milliseconds(), req.CeilingMS, prevVersion))
		if errors.Is(err, pgx.ErrNoRows) {
			return errRetry
		}
		if err != nil {
			return fmt.Errorf("postgres: claim worker %d/%d: %w", req.DatacenterID, workerID, err)
		}
		var prev string
		if prevHolder != nil {
			prev = *prevHolder
		}
		kind, detail := allocator.ClaimEvent(prev, req.Holder, prevVersion, prevCeiling)
		if err := insertEvent(ctx, tx, lease.LeaseKey, req.Holder, lease.FencingVersion, kind, detail); err != nil {
			return err
		}
		res = allocator.ClaimResult{Lease: lease, PrevHolder: prev, PrevCeilingMS: prevCeiling, DBNow: now}
		return nil
	})
	if err != nil {
		return allocator.ClaimResult{}, err
	}
	return res, nil
}

// ensureWorkers makes sure worker_leases has a row for every worker ID of the
// pool. Concurrent calls are safe: a row another node inserted first is left
// as it is.
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
	// Under SERIALIZABLE, a row inserted by a concurrent transaction is a
	// serialization failure rather than a conflict to skip; inTx retries.
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO worker_leases (datacenter_id, worker_id)
			SELECT $1, w FROM generate_series($2::integer, $3::integer) AS w
			ON CONFLICT (datacenter_id, worker_id) DO NOTHING`, dc, minID, maxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: create worker IDs %d/%d..%d: %w", dc, minID, maxID, err)
	}
	return nil
}

// Heartbeat extends the lease by req.TTL from database time and raises its
// ceiling to req.CeilingMS (it never lowers it), provided req.Holder still
// holds it at req.FencingVersion and it has not expired. Otherwise it returns
// an error wrapping allocator.ErrLeaseLost. It returns the row after the
// update and the database's clock_timestamp(), which the caller compares with
// its own clock.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if req.TTL < time.Millisecond {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("postgres: heartbeat: ttl %s is below 1ms", req.TTL)
	}
	var (
		lease allocator.Lease
		now   time.Time
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		lease, now, err = scanLease(tx.QueryRow(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = now(),
				expires_at = now() + $5::bigint * interval '1 millisecond',
				ts_ceiling_ms = GREATEST(ts_ceiling_ms, $6::bigint)
			WHERE datacenter_id = $1 AND worker_id = $2
			  AND holder = $3 AND fencing_version = $4 AND expires_at > now()
			RETURNING `+leaseColumns+`, clock_timestamp()`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
			req.TTL.Milliseconds(), req.CeilingMS))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: heartbeat of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("postgres: heartbeat of worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		return nil
	})
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	return lease, now, nil
}

// Release frees the lease, provided req.Holder holds it at
// req.FencingVersion (expired or not), and sets its ceiling to req.CeilingMS,
// which may lower it to the last timestamp actually used. It returns an error
// wrapping allocator.ErrLeaseLost when the row did not match.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) error {
	if req.CeilingMS < 0 {
		return fmt.Errorf("postgres: release: negative ceiling %d", req.CeilingMS)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE worker_leases SET
				holder = NULL,
				released_at = now(),
				expires_at = now(),
				ts_ceiling_ms = $5
			WHERE datacenter_id = $1 AND worker_id = $2 AND holder = $3 AND fencing_version = $4`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, req.CeilingMS)
		if err != nil {
			return fmt.Errorf("postgres: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("postgres: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		return insertEvent(ctx, tx, req.Key, req.Holder, req.FencingVersion, allocator.EventRelease,
			fmt.Sprintf("ceiling set to %d", req.CeilingMS))
	})
}

// RecordLeaseEvent appends ev to lease_events at database time; ev.ID and
// ev.At are ignored. A kind other than the allocator.Event constants is
// refused.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := allocator.ValidEventKind(ev.Kind); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return insertEvent(ctx, s.pool, ev.LeaseKey, ev.Holder, ev.FencingVersion, ev.Kind, ev.Detail)
}

// ListLeases returns every row of worker_leases, ordered by datacenter and
// worker ID.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+leaseColumns+`, now() FROM worker_leases ORDER BY datacenter_id, worker_id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list leases: %w", err)
	}
	defer rows.Close()
	var leases []allocator.Lease
	for rows.Next() {
		l, _, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list leases: %w", err)
		}
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list leases: %w", err)
	}
	return leases, nil
}

// ListLeaseEvents returns up to limit events with an ID above afterID, oldest
// first; none when limit is not positive. Pass the last ID of a page as
// afterID to read the next one.
func (s *Store) ListLeaseEvents(ctx context.Context, afterID int64, limit int) ([]allocator.LeaseEvent, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, datacenter_id, worker_id, holder, fencing_version, event, at, detail
		FROM lease_events WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list lease events: %w", err)
	}
	defer rows.Close()
	var events []allocator.LeaseEvent
	for rows.Next() {
		var ev allocator.LeaseEvent
		err := rows.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &ev.FencingVersion, &ev.Kind, &ev.At, &ev.Detail)
		if err != nil {
			return nil, fmt.Errorf("postgres: list lease events: %w", err)
		}
		ev.At = ev.At.UTC()
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list lease events: %w", err)
	}
	return events, nil
}

// execer is what insertEvent needs of a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// insertEvent appends one row to lease_events at database time.
func insertEvent(ctx context.Context, db execer, key allocator.LeaseKey, holder string, version int64, kind, detail string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, at, detail)
		VALUES ($1, $2, $3, $4, $5, now(), $6)`,
		key.DatacenterID, key.WorkerID, holder, version, kind, detail)
	if err != nil {
		return fmt.Errorf("postgres: record %s event of worker %d/%d: %w", kind, key.DatacenterID, key.WorkerID, err)
	}
	return nil
}

// scanLease reads the leaseColumns and one timestamp after them.
func scanLease(row pgx.Row) (allocator.Lease, time.Time, error) {
	var (
		l                                         allocator.Lease
		holder                                    *string
		acquired, heartbeat, expires, released, t *time.Time
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &l.FencingVersion,
		&acquired, &heartbeat, &expires, &released, &l.CeilingMS, &t)
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	if holder != nil {
		l.Holder = *holder
	}
	l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.ReleasedAt = utc(acquired), utc(heartbeat), utc(expires), utc(released)
	return l, utc(t), nil
}

// utc returns *t in UTC, or the zero time for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
