package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// insertChunk is how many worker rows one INSERT creates.
const insertChunk = 500

// leaseColumns are the columns of worker_leases in the order scanLease reads,
// followed by the database time.
const leaseColumns = `datacenter_id, worker_id, holder, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, UTC_TIMESTAMP(6)`

// EnsureLayout records layout (the default layout when layout is zero) as the
// Snowflake layout of the database, unless one is recorded already, and
// returns the recorded one. Of concurrent first calls, exactly one layout
// wins and every call returns it.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	var got snowflake.Layout
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO snowflake_layout
				(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at)
			VALUES (1, ?, ?, ?, ?, ?, TIMESTAMPADD(MICROSECOND, ? * 1000, '1970-01-01 00:00:00'), UTC_TIMESTAMP(6))
			ON DUPLICATE KEY UPDATE id = id`,
			layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits,
			layout.EpochMillis(), layout.EpochMillis())
		if err != nil {
			return fmt.Errorf("mysql: record snowflake layout: %w", err)
		}
		var epochMS int64
		err = tx.QueryRowContext(ctx, `
			SELECT time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms
			FROM snowflake_layout WHERE id = 1`).
			Scan(&got.TimeBits, &got.DatacenterBits, &got.WorkerBits, &got.SequenceBits, &epochMS)
		if err != nil {
			return fmt.Errorf("mysql: read snowflake layout: %w", err)
		}
		got.Epoch = time.UnixMilli(epochMS).UTC()
		return nil
	})
	if err != nil {
		return snowflake.Layout{}, err
	}
	return got, nil
}

// Claim claims a worker ID of the pool req describes: a free row, a row whose
// lease has expired by database time, or a row req.Holder holds already (a
// claim of its own whose outcome it did not learn). Rows whose ceiling lies
// above req.MaxPrevCeilingMS (when not zero) are left alone. Among the
// candidates it takes the lowest ceiling, then the lowest worker ID.
//
// The claim runs in one SERIALIZABLE transaction, retried on deadlocks and
// lock wait timeouts until ctx ends. It returns an error wrapping
// allocator.ErrNoWorkerAvailable when no row can be claimed. A malformed
// request (no holder or one over 255 bytes, a ttl under 1ms, negative or
// reversed IDs, a pool of more than 65536 IDs) is refused with an error that
// wraps no sentinel.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("mysql: %w", err)
	}
	if err := s.ensureWorkers(ctx, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID); err != nil {
		return allocator.ClaimResult{}, err
	}
	var res allocator.ClaimResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			workerID, prevVersion, prevCeiling int64
			prevHolder                         sql.NullString
		)
		err := tx.QueryRowContext(ctx, `
			SELECT worker_id, holder, fencing_version, ts_ceiling_ms
			FROM worker_leases
			WHERE datacenter_id = ? AND worker_id BETWEEN ? AND ?
			  AND (holder IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR holder = ?)
			  AND (? = 0 OR ts_ceiling_ms <= ?)
			ORDER BY ts_ceiling_ms, worker_id
			LIMIT 1`,
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, req.Holder,
			req.MaxPrevCeilingMS, req.MaxPrevCeilingMS).
			Scan(&workerID, &prevHolder, &prevVersion, &prevCeiling)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("mysql: datacenter %d, workers %d..%d: %w",
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, allocator.ErrNoWorkerAvailable)
		}
		if err != nil {
			return fmt.Errorf("mysql: find a worker ID to claim: %w", err)
		}
		// The fencing version we read is compared again: should the row
		// have changed anyway, the claim is tried afresh. UTC_TIMESTAMP(6)
		// is the same instant throughout one statement.
		r, err := tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = ?,
				fencing_version = fencing_version + 1,
				acquired_at = UTC_TIMESTAMP(6),
				heartbeat_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
				released_at = NULL,
				ts_ceiling_ms = GREATEST(ts_ceiling_ms, ?)
			WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
			req.Holder, req.TTL.Milliseconds()*1000, req.CeilingMS, req.DatacenterID, workerID, prevVersion)
		if err != nil {
			return fmt.Errorf("mysql: claim worker %d/%d: %w", req.DatacenterID, workerID, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("mysql: claim worker %d/%d: %w", req.DatacenterID, workerID, err)
		} else if n == 0 {
			return errRetry
		}
		key := allocator.LeaseKey{DatacenterID: req.DatacenterID, WorkerID: workerID}
		lease, _, err := getLease(ctx, tx, key)
		if err != nil {
			return err
		}
		kind, detail := allocator.ClaimEvent(prevHolder.String, req.Holder, prevVersion, prevCeiling)
		if err := insertEvent(ctx, tx, key, req.Holder, lease.FencingVersion, kind, detail); err != nil {
			return err
		}
		res = allocator.ClaimResult{
			Lease:         lease,
			PrevHolder:    prevHolder.String,
			PrevCeilingMS: prevCeiling,
			DBNow:         lease.AcquiredAt,
		}
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
		values := strings.TrimSuffix(strings.Repeat("(?, ?),", int(hi-lo+1)), ",")
		args := make([]any, 0, 2*(hi-lo+1))
		for w := lo; w <= hi; w++ {
			args = append(args, dc, w)
		}
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `
				INSERT INTO worker_leases (datacenter_id, worker_id) VALUES `+values+`
				ON DUPLICATE KEY UPDATE worker_id = worker_id`, args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("mysql: create worker IDs %d/%d..%d: %w", dc, lo, hi, err)
		}
	}
	return nil
}

// Heartbeat extends the lease by req.TTL from database time and raises its
// ceiling to req.CeilingMS (it never lowers it), provided req.Holder still
// holds it at req.FencingVersion and it has not expired. Otherwise it returns
// an error wrapping allocator.ErrLeaseLost. It returns the row after the
// update and the database's UTC_TIMESTAMP(6), read after the update, which
// the caller compares with its own clock.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if req.TTL < time.Millisecond {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("mysql: heartbeat: ttl %s is below 1ms", req.TTL)
	}
	var (
		lease allocator.Lease
		now   time.Time
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
				ts_ceiling_ms = GREATEST(ts_ceiling_ms, ?)
			WHERE datacenter_id = ? AND worker_id = ?
			  AND holder = ? AND fencing_version = ? AND expires_at > UTC_TIMESTAMP(6)`,
			req.TTL.Milliseconds()*1000, req.CeilingMS,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion)
		if err != nil {
			return fmt.Errorf("mysql: heartbeat of worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("mysql: heartbeat of worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		} else if n == 0 {
			return fmt.Errorf("mysql: heartbeat of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		lease, now, err = getLease(ctx, tx, req.Key)
		return err
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
		return fmt.Errorf("mysql: release: negative ceiling %d", req.CeilingMS)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = NULL,
				released_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6),
				ts_ceiling_ms = ?
			WHERE datacenter_id = ? AND worker_id = ? AND holder = ? AND fencing_version = ?`,
			req.CeilingMS, req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion)
		if err != nil {
			return fmt.Errorf("mysql: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("mysql: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		} else if n == 0 {
			return fmt.Errorf("mysql: release of worker %d/%d by %q at version %d: %w",
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
		return fmt.Errorf("mysql: %w", err)
	}
	return insertEvent(ctx, s.db, ev.LeaseKey, ev.Holder, ev.FencingVersion, ev.Kind, ev.Detail)
}

// ListLeases returns every row of worker_leases, ordered by datacenter and
// worker ID.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaseColumns+` FROM worker_leases ORDER BY datacenter_id, worker_id`)
	if err != nil {
		return nil, fmt.Errorf("mysql: list leases: %w", err)
	}
	defer rows.Close()
	var leases []allocator.Lease
	for rows.Next() {
		l, _, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("mysql: list leases: %w", err)
		}
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: list leases: %w", err)
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
	rows, err := s.db.QueryContext(ctx, `
		SELECT id, datacenter_id, worker_id, holder, fencing_version, event, at, detail
		FROM lease_events WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("mysql: list lease events: %w", err)
	}
	defer rows.Close()
	var events []allocator.LeaseEvent
	for rows.Next() {
		var ev allocator.LeaseEvent
		err := rows.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &ev.FencingVersion, &ev.Kind, &ev.At, &ev.Detail)
		if err != nil {
			return nil, fmt.Errorf("mysql: list lease events: %w", err)
		}
		ev.At = ev.At.UTC()
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: list lease events: %w", err)
	}
	return events, nil
}

// execer is what insertEvent needs of a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertEvent appends one row to lease_events at database time.
func insertEvent(ctx context.Context, db execer, key allocator.LeaseKey, holder string, version int64, kind, detail string) error {
	_, err := db.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`,
		key.DatacenterID, key.WorkerID, holder, version, kind, detail)
	if err != nil {
		return fmt.Errorf("mysql: record %s event of worker %d/%d: %w", kind, key.DatacenterID, key.WorkerID, err)
	}
	return nil
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

// scanLease reads the leaseColumns.
func scanLease(row interface{ Scan(...any) error }) (allocator.Lease, time.Time, error) {
	var (
		l                                      allocator.Lease
		holder                                 sql.NullString
		acquired, heartbeat, expires, released sql.NullTime
		now                                    time.Time
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &l.FencingVersion,
		&acquired, &heartbeat, &expires, &released, &l.CeilingMS, &now)
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	l.Holder = holder.String
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
