package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// timeLayout is how the schema writes times: UTC, to the millisecond, as
// strftime('%Y-%m-%d %H:%M:%f') does. Such strings sort as the times do.
const timeLayout = "2006-01-02 15:04:05.000"

// sqlNow is SQLite's clock in timeLayout.
const sqlNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// leaseColumns are the columns of worker_leases in the order scanLease reads.
const leaseColumns = `datacenter_id, worker_id, holder, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms`

// EnsureLayout records layout (the default layout when layout is zero) as the
// Snowflake layout of the database, unless one is recorded already, and
// returns the recorded one.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	var got snowflake.Layout
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO snowflake_layout
				(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at)
			VALUES (1, ?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%d %H:%M:%f', ?5 / 1000.0, 'unixepoch'), `+sqlNow+`)
			ON CONFLICT (id) DO NOTHING`,
			layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits, layout.EpochMillis())
		if err != nil {
			return fmt.Errorf("sqlite: record snowflake layout: %w", err)
		}
		var epochMS int64
		err = tx.QueryRowContext(ctx, `
			SELECT time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms
			FROM snowflake_layout WHERE id = 1`).
			Scan(&got.TimeBits, &got.DatacenterBits, &got.WorkerBits, &got.SequenceBits, &epochMS)
		if err != nil {
			return fmt.Errorf("sqlite: read snowflake layout: %w", err)
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
// lease has expired, or a row req.Holder holds already (a claim of its own
// whose outcome it did not learn). Rows whose ceiling lies above
// req.MaxPrevCeilingMS (when not zero) are left alone. Among the candidates
// it takes the lowest ceiling, then the lowest worker ID.
//
// The claim runs in one transaction, which holds SQLite's write lock from its
// start. It returns an error wrapping allocator.ErrNoWorkerAvailable when no
// row can be claimed. A malformed request (no holder or one over 255 bytes, a
// ttl under 1ms, negative or reversed IDs, a pool of more than 65536 IDs) is
// refused with an error that wraps no sentinel.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("sqlite: %w", err)
	}
	var res allocator.ClaimResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		// A row for every worker ID of the pool; rows that exist stay as they are.
		_, err = tx.ExecContext(ctx, `
			WITH RECURSIVE w(id) AS (SELECT ?2 UNION ALL SELECT id + 1 FROM w WHERE id < ?3)
			INSERT INTO worker_leases (datacenter_id, worker_id)
			SELECT ?1, id FROM w WHERE true
			ON CONFLICT (datacenter_id, worker_id) DO NOTHING`,
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID)
		if err != nil {
			return fmt.Errorf("sqlite: create worker IDs %d/%d..%d: %w", req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, err)
		}
		var (
			workerID, prevVersion, prevCeiling int64
			prevHolder                         sql.NullString
		)
		err = tx.QueryRowContext(ctx, `
			SELECT worker_id, holder, fencing_version, ts_ceiling_ms
			FROM worker_leases
			WHERE datacenter_id = ?1 AND worker_id BETWEEN ?2 AND ?3
			  AND (holder IS NULL OR expires_at <= ?4 OR holder = ?5)
			  AND (?6 = 0 OR ts_ceiling_ms <= ?6)
			ORDER BY ts_ceiling_ms, worker_id
			LIMIT 1`,
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, now, req.Holder, req.MaxPrevCeilingMS).
			Scan(&workerID, &prevHolder, &prevVersion, &prevCeiling)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: datacenter %d, workers %d..%d: %w",
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, allocator.ErrNoWorkerAvailable)
		}
		if err != nil {
			return fmt.Errorf("sqlite: find a worker ID to claim: %w", err)
		}
		lease, err := scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				holder = ?3,
				fencing_version = fencing_version + 1,
				acquired_at = ?4,
				heartbeat_at = ?4,
				expires_at = strftime('%Y-%m-%d %H:%M:%f', ?4, ?5),
				released_at = NULL,
				ts_ceiling_ms = max(ts_ceiling_ms, ?6)
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?7
			RETURNING `+leaseColumns,
			req.DatacenterID, workerID, req.Holder, now, ttlModifier(req.TTL), req.CeilingMS, prevVersion))
		if err != nil {
			// The write lock is ours since BEGIN IMMEDIATE: the row we
			// just read cannot have changed, and no row is an error.
			return fmt.Errorf("sqlite: claim worker %d/%d: %w", req.DatacenterID, workerID, err)
		}
		kind, detail := allocator.ClaimEvent(prevHolder.String, req.Holder, prevVersion, prevCeiling)
		if err := insertEvent(ctx, tx, lease.LeaseKey, req.Holder, lease.FencingVersion, kind, detail, now); err != nil {
			return err
		}
		t, err := parseTime(now)
		if err != nil {
			return err
		}
		res = allocator.ClaimResult{Lease: lease, PrevHolder: prevHolder.String, PrevCeilingMS: prevCeiling, DBNow: t}
		return nil
	})
	if err != nil {
		return allocator.ClaimResult{}, err
	}
	return res, nil
}

// Heartbeat extends the lease by req.TTL from now and raises its ceiling to
// req.CeilingMS (it never lowers it), provided req.Holder still holds it at
// req.FencingVersion and it has not expired. Otherwise it returns an error
// wrapping allocator.ErrLeaseLost. It returns the row after the update and
// the time of the update.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if req.TTL < time.Millisecond {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("sqlite: heartbeat: ttl %s is below 1ms", req.TTL)
	}
	var (
		lease allocator.Lease
		now   time.Time
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		nowText, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		lease, err = scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = ?5,
				expires_at = strftime('%Y-%m-%d %H:%M:%f', ?5, ?6),
				ts_ceiling_ms = max(ts_ceiling_ms, ?7)
			WHERE datacenter_id = ?1 AND worker_id = ?2
			  AND holder = ?3 AND fencing_version = ?4 AND expires_at > ?5
			RETURNING `+leaseColumns,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
			nowText, ttlModifier(req.TTL), req.CeilingMS))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: heartbeat of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: heartbeat of worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		now, err = parseTime(nowText)
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
		return fmt.Errorf("sqlite: release: negative ceiling %d", req.CeilingMS)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = NULL,
				released_at = ?5,
				expires_at = ?5,
				ts_ceiling_ms = ?6
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND holder = ?3 AND fencing_version = ?4`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, now, req.CeilingMS)
		if err != nil {
			return fmt.Errorf("sqlite: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		} else if n == 0 {
			return fmt.Errorf("sqlite: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		return insertEvent(ctx, tx, req.Key, req.Holder, req.FencingVersion, allocator.EventRelease,
			fmt.Sprintf("ceiling set to %d", req.CeilingMS), now)
	})
}

// RecordLeaseEvent appends ev to lease_events at the current time; ev.ID and
// ev.At are ignored. A kind other than the allocator.Event constants is
// refused.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := allocator.ValidEventKind(ev.Kind); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev.LeaseKey, ev.Holder, ev.FencingVersion, ev.Kind, ev.Detail, now)
	})
}

// ListLeases returns every row of worker_leases, ordered by datacenter and
// worker ID.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaseColumns+` FROM worker_leases ORDER BY datacenter_id, worker_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list leases: %w", err)
	}
	defer rows.Close()
	var leases []allocator.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list leases: %w", err)
		}
		leases = append(leases, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list leases: %w", err)
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
		return nil, fmt.Errorf("sqlite: list lease events: %w", err)
	}
	defer rows.Close()
	var events []allocator.LeaseEvent
	for rows.Next() {
		var (
			ev allocator.LeaseEvent
			at string
		)
		err := rows.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &ev.FencingVersion, &ev.Kind, &at, &ev.Detail)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list lease events: %w", err)
		}
		if ev.At, err = parseTime(at); err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list lease events: %w", err)
	}
	return events, nil
}

// dbNow returns the current time as SQLite writes it.
func dbNow(ctx context.Context, tx *sql.Tx) (string, error) {
	var now string
	if err := tx.QueryRowContext(ctx, `SELECT `+sqlNow).Scan(&now); err != nil {
		return "", fmt.Errorf("sqlite: read the clock: %w", err)
	}
	return now, nil
}

// ttlModifier returns the strftime modifier that adds ttl, to the millisecond.
func ttlModifier(ttl time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", float64(ttl.Milliseconds())/1000)
}

// insertEvent appends one row to lease_events at time now.
func insertEvent(ctx context.Context, tx *sql.Tx, key allocator.LeaseKey, holder string, version int64, kind, detail, now string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		key.DatacenterID, key.WorkerID, holder, version, kind, now, detail)
	if err != nil {
		return fmt.Errorf("sqlite: record %s event of worker %d/%d: %w", kind, key.DatacenterID, key.WorkerID, err)
	}
	return nil
}

// scanLease reads the leaseColumns.
func scanLease(row interface{ Scan(...any) error }) (allocator.Lease, error) {
	var (
		l      allocator.Lease
		holder sql.NullString
		times  [4]sql.NullString
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &l.FencingVersion,
		&times[0], &times[1], &times[2], &times[3], &l.CeilingMS)
	if err != nil {
		return allocator.Lease{}, err
	}
	l.Holder = holder.String
	for i, dst := range []*time.Time{&l.AcquiredAt, &l.HeartbeatAt, &l.ExpiresAt, &l.ReleasedAt} {
		if !times[i].Valid {
			continue
		}
		if *dst, err = parseTime(times[i].String); err != nil {
			return allocator.Lease{}, err
		}
	}
	return l, nil
}

// parseTime reads a time written in timeLayout.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: time %q: %w", s, err)
	}
	return t.UTC(), nil
}
