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
const leaseColumns = `datacenter_id, worker_id, holder, owner, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, ts_floor_ms, UTC_TIMESTAMP(6)`

// eventColumns are the columns of lease_events in the order scanEvent reads.
const eventColumns = `id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail`

// defaultPruneBatch is how many events one statement of PruneLeaseEvents
// deletes, unless a test sets Store.pruneBatch.
const defaultPruneBatch = 5000

// boundedCeiling is the ts_ceiling_ms a claim or heartbeat writes: the
// proposed ceiling (the first parameter), but never more than database time
// plus the second parameter (the ttl plus the allowed clock offset), all in
// milliseconds, and never below the stored ceiling. UTC_TIMESTAMP(6) is one
// instant throughout a statement, the one expires_at is computed from.
const boundedCeiling = `GREATEST(ts_ceiling_ms, LEAST(?,
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + ?))`

// EnsureLayout implements allocator.LeaseStore.EnsureLayout, documented
// there.
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

// Claim implements allocator.LeaseStore.Claim: which row it picks, what it
// writes and the errors it returns are documented there. The pool's missing
// rows are created first, in transactions of their own; the claim itself is
// one transaction.
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
		// is the same instant throughout one statement. MySQL assigns from
		// left to right, each assignment seeing the ones before it: the
		// floor is computed from the ceiling before the ceiling changes.
		r, err := tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = ?,
				owner = ?,
				fencing_version = fencing_version + 1,
				acquired_at = UTC_TIMESTAMP(6),
				heartbeat_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
				released_at = NULL,
				ts_floor_ms = ts_ceiling_ms + 1,
				ts_ceiling_ms = `+boundedCeiling+`
			WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
			req.Holder, nullText(req.Owner), req.TTL.Milliseconds()*1000, req.CeilingMS, req.TTL.Milliseconds()+req.MaxClockOffset.Milliseconds(),
			req.DatacenterID, workerID, prevVersion)
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
		ev := allocator.LeaseEvent{LeaseKey: key, Holder: req.Holder, FencingVersion: lease.FencingVersion,
			Kind: kind, Detail: detail, Owner: req.Owner, RequestID: req.RequestID}
		if err := insertEvent(ctx, tx, ev); err != nil {
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

// Heartbeat implements allocator.LeaseStore.Heartbeat, documented there.
// It returns the database's UTC_TIMESTAMP(6), read after the update, as
// the store's time.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("mysql: %w", err)
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
				ts_ceiling_ms = `+boundedCeiling+`
			WHERE datacenter_id = ? AND worker_id = ?
			  AND holder = ? AND fencing_version = ? AND expires_at > UTC_TIMESTAMP(6)`,
			req.TTL.Milliseconds()*1000, req.CeilingMS, req.TTL.Milliseconds()+req.MaxClockOffset.Milliseconds(),
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

// Release implements allocator.LeaseStore.Release, documented there: it
// reads the row's floor and ceiling, applies allocator.ReleaseCeiling and
// writes, in one transaction.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("mysql: %w", err)
	}
	var ceiling int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var floor, committed int64
		err := tx.QueryRowContext(ctx, `
			SELECT ts_floor_ms, ts_ceiling_ms FROM worker_leases
			WHERE datacenter_id = ? AND worker_id = ? AND holder = ? AND fencing_version = ?
			FOR UPDATE`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion).Scan(&floor, &committed)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("mysql: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("mysql: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if ceiling, err = allocator.ReleaseCeiling(floor, committed, req.LastTimestampMS); err != nil {
			return fmt.Errorf("mysql: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, err)
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = NULL,
				owner = NULL,
				released_at = UTC_TIMESTAMP(6),
				expires_at = UTC_TIMESTAMP(6),
				ts_ceiling_ms = ?
			WHERE datacenter_id = ? AND worker_id = ? AND holder = ? AND fencing_version = ?`,
			ceiling, req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion)
		if err != nil {
			return fmt.Errorf("mysql: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		return insertEvent(ctx, tx, allocator.LeaseEvent{LeaseKey: req.Key, Holder: req.Holder, FencingVersion: req.FencingVersion,
			Kind: allocator.EventRelease, Detail: fmt.Sprintf("ceiling set to %d", ceiling), Owner: req.Owner, RequestID: req.RequestID})
	})
	if err != nil {
		return 0, err
	}
	return ceiling, nil
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent,
// documented there.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return insertEvent(ctx, s.db, ev)
}

// Evict implements allocator.LeaseAdmin.Evict, documented there.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("mysql: %w", err)
	}
	var lease allocator.Lease
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		prev, _, err := scanLease(tx.QueryRowContext(ctx,
			`SELECT `+leaseColumns+` FROM worker_leases WHERE datacenter_id = ? AND worker_id = ? FOR UPDATE`,
			req.Key.DatacenterID, req.Key.WorkerID))
		found := !errors.Is(err, sql.ErrNoRows)
		if found && err != nil {
			return fmt.Errorf("mysql: evict worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if err := req.CheckRow(prev, found); err != nil {
			return fmt.Errorf("mysql: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				fencing_version = fencing_version + 1,
				holder = NULL,
				owner = NULL,
				expires_at = UTC_TIMESTAMP(6)
			WHERE datacenter_id = ? AND worker_id = ? AND fencing_version = ?`,
			req.Key.DatacenterID, req.Key.WorkerID, prev.FencingVersion)
		if err != nil {
			return fmt.Errorf("mysql: evict worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if lease, _, err = getLease(ctx, tx, req.Key); err != nil {
			return err
		}
		return insertEvent(ctx, tx, allocator.LeaseEvent{LeaseKey: req.Key, Holder: prev.Holder, FencingVersion: prev.FencingVersion,
			Kind: allocator.EventEvict, Detail: allocator.EvictDetail(prev, req.Reason), Owner: req.Owner, RequestID: req.RequestID})
	})
	if err != nil {
		return allocator.Lease{}, err
	}
	return lease, nil
}

// ListLeases implements allocator.LeaseAdmin.ListLeases, documented there.
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

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents,
// documented there.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	where, args := []string{"id > ?"}, []any{f.AfterID}
	add := func(cond string, arg any) {
		where, args = append(where, cond), append(args, arg)
	}
	if f.DatacenterID != nil {
		add("datacenter_id = ?", *f.DatacenterID)
	}
	if f.WorkerID != nil {
		add("worker_id = ?", *f.WorkerID)
	}
	if f.Holder != "" {
		add("holder = ?", f.Holder)
	}
	if f.Owner != "" {
		add("owner = ?", f.Owner)
	}
	if f.Kind != "" {
		add("event = ?", string(f.Kind))
	}
	if !f.Since.IsZero() {
		add("at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		add("at < ?", f.Until.UTC())
	}
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, `SELECT `+eventColumns+` FROM lease_events WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: list lease events: %w", err)
	}
	defer rows.Close()
	var events []allocator.LeaseEvent
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("mysql: list lease events: %w", err)
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: list lease events: %w", err)
	}
	return events, nil
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents,
// documented there.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	var total int64
	for {
		r, err := s.db.ExecContext(ctx, `DELETE FROM lease_events WHERE at < ? ORDER BY id LIMIT ?`, before.UTC(), s.pruneBatch)
		if err != nil {
			return total, fmt.Errorf("mysql: prune lease events: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("mysql: prune lease events: %w", err)
		}
		total += n
		if n < int64(s.pruneBatch) {
			return total, nil
		}
	}
}

// execer is what insertEvent needs of a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertEvent appends ev to lease_events at database time; ev.ID and ev.At
// are ignored.
func insertEvent(ctx context.Context, db execer, ev allocator.LeaseEvent) error {
	_, err := db.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`,
		ev.DatacenterID, ev.WorkerID, ev.Holder, nullText(ev.Owner), nullText(ev.RequestID), ev.FencingVersion, string(ev.Kind), ev.Detail)
	if err != nil {
		return fmt.Errorf("mysql: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
	}
	return nil
}

// scanEvent reads one row of eventColumns.
func scanEvent(row interface{ Scan(...any) error }) (allocator.LeaseEvent, error) {
	var (
		ev               allocator.LeaseEvent
		kind             string
		owner, requestID sql.NullString
	)
	err := row.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &owner, &requestID, &ev.FencingVersion, &kind, &ev.At, &ev.Detail)
	if err != nil {
		return allocator.LeaseEvent{}, err
	}
	ev.Kind = allocator.EventKind(kind)
	ev.At = ev.At.UTC()
	ev.Owner, ev.RequestID = owner.String, requestID.String
	return ev, nil
}

// nullText turns "" into NULL.
func nullText(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

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
