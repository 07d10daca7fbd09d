package sqlite

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

// timeLayout is how the schema writes times: UTC, to the millisecond, as
// strftime('%Y-%m-%d %H:%M:%f') does. Such strings sort as the times do.
const timeLayout = "2006-01-02 15:04:05.000"

// sqlNow is SQLite's clock in timeLayout.
const sqlNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// leaseColumns are the columns of worker_leases in the order scanLease reads.
const leaseColumns = `datacenter_id, worker_id, holder, owner, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, ts_floor_ms`

// eventColumns are the columns of lease_events in the order scanEvent reads.
const eventColumns = `id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail`

// defaultPruneBatch is how many events one statement of PruneLeaseEvents
// deletes, unless a test sets Store.pruneBatch.
const defaultPruneBatch = 5000

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

// Claim implements allocator.LeaseStore.Claim: which row it picks, what it
// writes and the errors it returns are documented there. The pool's missing
// rows are created in the claim's own transaction.
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
		t, err := parseTime(now)
		if err != nil {
			return err
		}
		lease, err := scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				holder = ?3,
				owner = ?9,
				fencing_version = fencing_version + 1,
				acquired_at = ?4,
				heartbeat_at = ?4,
				expires_at = strftime('%Y-%m-%d %H:%M:%f', ?4, ?5),
				released_at = NULL,
				ts_floor_ms = ts_ceiling_ms + 1,
				ts_ceiling_ms = max(ts_ceiling_ms, min(?6, ?8))
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?7
			RETURNING `+leaseColumns,
			req.DatacenterID, workerID, req.Holder, now, ttlModifier(req.TTL), req.CeilingMS, prevVersion,
			ceilingBound(t, req.TTL, req.MaxClockOffset), nullText(req.Owner)))
		if err != nil {
			// The write lock is ours since BEGIN IMMEDIATE: the row we
			// just read cannot have changed, and no row is an error.
			return fmt.Errorf("sqlite: claim worker %d/%d: %w", req.DatacenterID, workerID, err)
		}
		kind, detail := allocator.ClaimEvent(prevHolder.String, req.Holder, prevVersion, prevCeiling)
		ev := allocator.LeaseEvent{LeaseKey: lease.LeaseKey, Holder: req.Holder, FencingVersion: lease.FencingVersion,
			Kind: kind, Detail: detail, Owner: req.Owner, RequestID: req.RequestID}
		if err := insertEvent(ctx, tx, ev, now); err != nil {
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

// Heartbeat implements allocator.LeaseStore.Heartbeat, documented there.
// It returns the time of the update as the store's time.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("sqlite: %w", err)
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
		if now, err = parseTime(nowText); err != nil {
			return err
		}
		lease, err = scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = ?5,
				expires_at = strftime('%Y-%m-%d %H:%M:%f', ?5, ?6),
				ts_ceiling_ms = max(ts_ceiling_ms, min(?7, ?8))
			WHERE datacenter_id = ?1 AND worker_id = ?2
			  AND holder = ?3 AND fencing_version = ?4 AND expires_at > ?5
			RETURNING `+leaseColumns,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
			nowText, ttlModifier(req.TTL), req.CeilingMS, ceilingBound(now, req.TTL, req.MaxClockOffset)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: heartbeat of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: heartbeat of worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		return nil
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
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	var ceiling int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		var floor, committed int64
		err = tx.QueryRowContext(ctx, `
			SELECT ts_floor_ms, ts_ceiling_ms FROM worker_leases
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND holder = ?3 AND fencing_version = ?4`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion).Scan(&floor, &committed)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("sqlite: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if ceiling, err = allocator.ReleaseCeiling(floor, committed, req.LastTimestampMS); err != nil {
			return fmt.Errorf("sqlite: release of worker %d/%d by %q at version %d: %w",
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, err)
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE worker_leases SET
				holder = NULL,
				owner = NULL,
				released_at = ?5,
				expires_at = ?5,
				ts_ceiling_ms = ?6
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND holder = ?3 AND fencing_version = ?4`,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, now, ceiling)
		if err != nil {
			return fmt.Errorf("sqlite: release worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		return insertEvent(ctx, tx, allocator.LeaseEvent{LeaseKey: req.Key, Holder: req.Holder, FencingVersion: req.FencingVersion,
			Kind: allocator.EventRelease, Detail: fmt.Sprintf("ceiling set to %d", ceiling), Owner: req.Owner, RequestID: req.RequestID}, now)
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
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev, now)
	})
}

// Evict implements allocator.LeaseAdmin.Evict, documented there.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("sqlite: %w", err)
	}
	var lease allocator.Lease
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		prev, err := scanLease(tx.QueryRowContext(ctx,
			`SELECT `+leaseColumns+` FROM worker_leases WHERE datacenter_id = ? AND worker_id = ?`,
			req.Key.DatacenterID, req.Key.WorkerID))
		found := !errors.Is(err, sql.ErrNoRows)
		if found && err != nil {
			return fmt.Errorf("sqlite: evict worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		if err := req.CheckRow(prev, found); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		lease, err = scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				fencing_version = fencing_version + 1,
				holder = NULL,
				owner = NULL,
				expires_at = ?4
			WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?3
			RETURNING `+leaseColumns,
			req.Key.DatacenterID, req.Key.WorkerID, prev.FencingVersion, now))
		if err != nil {
			return fmt.Errorf("sqlite: evict worker %d/%d: %w", req.Key.DatacenterID, req.Key.WorkerID, err)
		}
		return insertEvent(ctx, tx, allocator.LeaseEvent{LeaseKey: req.Key, Holder: prev.Holder, FencingVersion: prev.FencingVersion,
			Kind: allocator.EventEvict, Detail: allocator.EvictDetail(prev, req.Reason), Owner: req.Owner, RequestID: req.RequestID}, now)
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

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents,
// documented there. Events are stored to the millisecond; Since and Until
// are rounded up to it, which selects exactly the stored times at or after
// Since and before Until.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
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
		add("at >= ?", timeArg(f.Since))
	}
	if !f.Until.IsZero() {
		add("at < ?", timeArg(f.Until))
	}
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, `SELECT `+eventColumns+` FROM lease_events WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list lease events: %w", err)
	}
	defer rows.Close()
	var events []allocator.LeaseEvent
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list lease events: %w", err)
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list lease events: %w", err)
	}
	return events, nil
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents,
// documented there; before is rounded up to the millisecond, like Until in
// ListLeaseEvents.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	var total int64
	for {
		r, err := s.db.ExecContext(ctx, `
			DELETE FROM lease_events WHERE id IN (
				SELECT id FROM lease_events WHERE at < ? ORDER BY id LIMIT ?)`, timeArg(before), s.pruneBatch)
		if err != nil {
			return total, fmt.Errorf("sqlite: prune lease events: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("sqlite: prune lease events: %w", err)
		}
		total += n
		if n < int64(s.pruneBatch) {
			return total, nil
		}
	}
}

// timeArg formats t as the schema stores times, rounded up to the
// millisecond: a stored time (whole milliseconds) is before the result
// exactly when it is before t.
func timeArg(t time.Time) string {
	t = t.UTC()
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		t = r.Add(time.Millisecond)
	}
	return t.Format(timeLayout)
}

// dbNow returns the current time as SQLite writes it.
func dbNow(ctx context.Context, tx *sql.Tx) (string, error) {
	var now string
	if err := tx.QueryRowContext(ctx, `SELECT `+sqlNow).Scan(&now); err != nil {
		return "", fmt.Errorf("sqlite: read the clock: %w", err)
	}
	return now, nil
}

// ceilingBound is the highest ceiling a claim or heartbeat may write:
// database time now (read in the same transaction, which holds the write
// lock) plus the ttl plus the allowed clock offset, in Unix milliseconds.
func ceilingBound(now time.Time, ttl, offset time.Duration) int64 {
	return now.UnixMilli() + ttl.Milliseconds() + offset.Milliseconds()
}

// ttlModifier returns the strftime modifier that adds ttl, to the millisecond.
func ttlModifier(ttl time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", float64(ttl.Milliseconds())/1000)
}

// insertEvent appends ev to lease_events at time now; ev.ID and ev.At are
// ignored.
func insertEvent(ctx context.Context, tx *sql.Tx, ev allocator.LeaseEvent, now string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.DatacenterID, ev.WorkerID, ev.Holder, nullText(ev.Owner), nullText(ev.RequestID), ev.FencingVersion, string(ev.Kind), now, ev.Detail)
	if err != nil {
		return fmt.Errorf("sqlite: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
	}
	return nil
}

// scanEvent reads one row of eventColumns.
func scanEvent(row interface{ Scan(...any) error }) (allocator.LeaseEvent, error) {
	var (
		ev               allocator.LeaseEvent
		kind, at         string
		owner, requestID sql.NullString
	)
	err := row.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &owner, &requestID, &ev.FencingVersion, &kind, &at, &ev.Detail)
	if err != nil {
		return allocator.LeaseEvent{}, err
	}
	ev.Kind = allocator.EventKind(kind)
	ev.Owner, ev.RequestID = owner.String, requestID.String
	if ev.At, err = parseTime(at); err != nil {
		return allocator.LeaseEvent{}, err
	}
	return ev, nil
}

// nullText turns "" into NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// scanLease reads the leaseColumns.
func scanLease(row interface{ Scan(...any) error }) (allocator.Lease, error) {
	var (
		l             allocator.Lease
		holder, owner sql.NullString
		times         [4]sql.NullString
	)
	err := row.Scan(&l.DatacenterID, &l.WorkerID, &holder, &owner, &l.FencingVersion,
		&times[0], &times[1], &times[2], &times[3], &l.CeilingMS, &l.FloorMS)
	if err != nil {
		return allocator.Lease{}, err
	}
	l.Holder, l.Owner = holder.String, owner.String
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
