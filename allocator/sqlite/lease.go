package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/snowflake"
)

// dialect words the store's errors and builds its lease-event queries.
var dialect = sqlstore.Dialect{
	Name:          "sqlite",
	NoRows:        sql.ErrNoRows,
	Placeholder:   sqlstore.Question,
	TimeArg:       func(t time.Time) any { return timeArg(t) },
	SegmentError:  segmentError,
	DuplicateName: duplicateName,
}

// timeLayout is how the schema writes times: UTC text to the millisecond,
// sorting as the times do.
const timeLayout = "2006-01-02 15:04:05.000"

// sqlNow is SQLite's clock in timeLayout.
const sqlNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// leaseColumns are worker_leases' columns as scanLease reads them.
const leaseColumns = `datacenter_id, worker_id, holder, owner, fencing_version,
	acquired_at, heartbeat_at, expires_at, released_at, ts_ceiling_ms, ts_floor_ms`

// defaultPruneBatch is how many events one prune statement deletes.
const defaultPruneBatch = 5000

// EnsureLayout implements allocator.LeaseStore.EnsureLayout.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (snowflake.Layout, error) {
		return dialect.EnsureLayout(layout, func(layout snowflake.Layout) error {
			_, err := tx.ExecContext(ctx, `
				INSERT INTO snowflake_layout
					(id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at)
				VALUES (1, ?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%d %H:%M:%f', ?5 / 1000.0, 'unixepoch'), `+sqlNow+`)
				ON CONFLICT (id) DO NOTHING`,
				layout.TimeBits, layout.DatacenterBits, layout.WorkerBits, layout.SequenceBits, layout.EpochMillis())
			return err
		}, func(query string) sqlstore.Scanner { return tx.QueryRowContext(ctx, query) })
	})
}

// Claim implements allocator.LeaseStore.Claim; missing pool rows are
// created in the claim's own transaction.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("sqlite: %w", err)
	}
	return atNow(ctx, s, func(tx *sql.Tx, now string) (allocator.ClaimResult, error) {
		// Create missing pool rows at the last restore fence's ceiling (a
		// row missing from a restored store may have been used).
		_, err := tx.ExecContext(ctx, `
			WITH RECURSIVE w(id) AS (SELECT ?2 UNION ALL SELECT id + 1 FROM w WHERE id < ?3)
			INSERT INTO worker_leases (datacenter_id, worker_id, ts_ceiling_ms)
			SELECT ?1, id, COALESCE((SELECT ceiling_ms FROM store_fence WHERE id = 1), 0) FROM w WHERE true
			ON CONFLICT (datacenter_id, worker_id) DO NOTHING`,
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID)
		if err != nil {
			return allocator.ClaimResult{}, fmt.Errorf("sqlite: create worker IDs %d/%d..%d: %w", req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, err)
		}
		owned := func() (n int64, err error) {
			err = tx.QueryRowContext(ctx, sqlstore.OwnedQuery(sqlstore.Question, "?3"), req.Owner, req.Holder, now).Scan(&n)
			return n, err
		}
		pick := func() (sqlstore.Candidate, error) {
			return sqlstore.ScanCandidate(tx.QueryRowContext(ctx, `
				SELECT worker_id, holder, fencing_version, ts_ceiling_ms
				FROM worker_leases
				WHERE datacenter_id = ?1 AND worker_id BETWEEN ?2 AND ?3
				  AND (holder IS NULL OR expires_at <= ?4 OR (holder = ?5 AND owner IS ?7))
				  AND (?6 = 0 OR ts_ceiling_ms <= ?6)
				ORDER BY ts_ceiling_ms, worker_id
				LIMIT 1`,
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, now, req.Holder, req.MaxPrevCeilingMS, sqlstore.NullText(req.Owner)))
		}
		take := func(c sqlstore.Candidate) (allocator.Lease, time.Time, error) {
			t, err := parseTime(now)
			if err != nil {
				return allocator.Lease{}, time.Time{}, err
			}
			lease, err := scanLease(tx.QueryRowContext(ctx, `
				UPDATE worker_leases SET
					holder = ?3,
					owner = ?9,
					secret_sha256 = ?10,
					fencing_version = fencing_version + 1,
					acquired_at = ?4,
					heartbeat_at = ?4,
					expires_at = strftime('%Y-%m-%d %H:%M:%f', ?4, ?5),
					released_at = NULL,
					ts_floor_ms = ts_ceiling_ms + 1,
					ts_ceiling_ms = max(ts_ceiling_ms, min(?6, ?8))
				WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?7
				RETURNING `+leaseColumns,
				req.DatacenterID, c.WorkerID, req.Holder, now, ttlModifier(req.TTL), req.CeilingMS, c.Version,
				ceilingBound(t, req.TTL, req.MaxClockOffset), sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash)))
			if err != nil {
				// We hold the write lock since BEGIN IMMEDIATE, so the row
				// cannot have changed: no row is an error.
				return allocator.Lease{}, time.Time{}, dialect.WorkerError("claim",
					allocator.LeaseKey{DatacenterID: req.DatacenterID, WorkerID: c.WorkerID}, err)
			}
			return lease, t, nil
		}
		return dialect.Claim(req, owned, pick, take, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev, now) })
	})
}

// Heartbeat implements allocator.LeaseStore.Heartbeat, returning the
// update's time as store time.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	return sqlstore.Heartbeat(ctx, dialect, s.tx, req, func(tx *sql.Tx) (allocator.Lease, time.Time, error) {
		nowText, now, err := dbTime(ctx, tx)
		if err != nil {
			return allocator.Lease{}, time.Time{}, err
		}
		lease, err := scanLease(tx.QueryRowContext(ctx, `
			UPDATE worker_leases SET
				heartbeat_at = ?5,
				expires_at = strftime('%Y-%m-%d %H:%M:%f', ?5, ?6),
				ts_ceiling_ms = max(ts_ceiling_ms, min(?7, ?8))
			WHERE datacenter_id = ?1 AND worker_id = ?2
			  AND holder = ?3 AND fencing_version = ?4 AND expires_at > ?5
			  AND owner IS ?9 AND secret_sha256 IS ?10
			RETURNING `+leaseColumns,
			req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion,
			nowText, ttlModifier(req.TTL), req.CeilingMS, ceilingBound(now, req.TTL, req.MaxClockOffset),
			sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash)))
		return lease, now, dialect.HeartbeatError(req, err, held(ctx, tx, nowText, req.Key, req.Holder, req.FencingVersion))
	})
}

// Release implements allocator.LeaseStore.Release: it reads floor and
// ceiling, applies allocator.ReleaseCeiling and writes, in one transaction.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	return atNow(ctx, s, func(tx *sql.Tx, now string) (int64, error) {
		read := func() sqlstore.Scanner {
			return tx.QueryRowContext(ctx, `
				SELECT ts_floor_ms, ts_ceiling_ms FROM worker_leases
				WHERE datacenter_id = ?1 AND worker_id = ?2 AND holder = ?3 AND fencing_version = ?4
				  AND expires_at > ?5 AND owner IS ?6 AND secret_sha256 IS ?7`,
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, now,
				sqlstore.NullText(req.Owner), sqlstore.NullText(req.SecretHash))
		}
		write := func(ceiling int64) error {
			_, err := tx.ExecContext(ctx, `
				UPDATE worker_leases SET
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					released_at = ?5,
					expires_at = ?5,
					ts_ceiling_ms = ?6
				WHERE datacenter_id = ?1 AND worker_id = ?2 AND holder = ?3 AND fencing_version = ?4`,
				req.Key.DatacenterID, req.Key.WorkerID, req.Holder, req.FencingVersion, now, ceiling)
			return err
		}
		return dialect.Release(req, read, held(ctx, tx, now, req.Key, req.Holder, req.FencingVersion), write,
			func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev, now) })
	})
}

// held returns the held step of sqlstore's HeartbeatError and Release.
func held(ctx context.Context, tx *sql.Tx, now string, key allocator.LeaseKey, holder string, version int64) func() (int64, error) {
	return func() (n int64, err error) {
		err = tx.QueryRowContext(ctx, sqlstore.HeldQuery(sqlstore.Question, "?5"), key.DatacenterID, key.WorkerID, holder, version, now).Scan(&n)
		return n, err
	}
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent.
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

// Evict implements allocator.LeaseAdmin.Evict.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("sqlite: %w", err)
	}
	return atNow(ctx, s, func(tx *sql.Tx, now string) (allocator.Lease, error) {
		read := func() (allocator.Lease, error) {
			return scanLease(tx.QueryRowContext(ctx,
				`SELECT `+leaseColumns+` FROM worker_leases WHERE datacenter_id = ? AND worker_id = ?`,
				req.Key.DatacenterID, req.Key.WorkerID))
		}
		evict := func(prev allocator.Lease) (allocator.Lease, error) {
			lease, err := scanLease(tx.QueryRowContext(ctx, `
				UPDATE worker_leases SET
					fencing_version = fencing_version + 1,
					holder = NULL,
					owner = NULL,
					secret_sha256 = NULL,
					expires_at = ?4
				WHERE datacenter_id = ?1 AND worker_id = ?2 AND fencing_version = ?3
				RETURNING `+leaseColumns,
				req.Key.DatacenterID, req.Key.WorkerID, prev.FencingVersion, now))
			if err != nil {
				return allocator.Lease{}, dialect.WorkerError("evict", req.Key, err)
			}
			return lease, nil
		}
		return dialect.Evict(req, read, evict, func(ev allocator.LeaseEvent) error { return insertEvent(ctx, tx, ev, now) })
	})
}

// ListLeases implements allocator.LeaseAdmin.ListLeases.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	return dialect.ListLeases(ctx, leaseColumns, sqlstore.Rows(s.db, scanLease))
}

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents; Since
// and Until are rounded up to the stored millisecond (timeArg).
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	return dialect.ListLeaseEvents(ctx, f, sqlstore.Rows(s.db, scanEvent))
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents; before
// is rounded up like Until.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	return dialect.PruneLeaseEvents(ctx, before, s.pruneBatch, func(ctx context.Context, before any, batch int) (int64, error) {
		return sqlstore.ExecCount(ctx, s.db, `
			DELETE FROM lease_events WHERE id IN (
				SELECT id FROM lease_events WHERE at < ? ORDER BY id LIMIT ?)`, before, batch)
	})
}

// timeArg formats t as stored, rounded up to the millisecond, so a stored
// time is before it exactly when it is before t.
func timeArg(t time.Time) string {
	t = t.UTC()
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		t = r.Add(time.Millisecond)
	}
	return t.Format(timeLayout)
}

// atNow runs fn in a transaction with now, its start in SQLite's form.
func atNow[T any](ctx context.Context, s *Store, fn func(tx *sql.Tx, now string) (T, error)) (T, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (T, error) {
		now, err := dbNow(ctx, tx)
		if err != nil {
			var zero T
			return zero, err
		}
		return fn(tx, now)
	})
}

// dbNow returns the current time as SQLite writes it.
func dbNow(ctx context.Context, tx *sql.Tx) (string, error) {
	var now string
	if err := tx.QueryRowContext(ctx, `SELECT `+sqlNow).Scan(&now); err != nil {
		return "", fmt.Errorf("sqlite: read the clock: %w", err)
	}
	return now, nil
}

// dbTime returns the current time as SQLite writes it, and parsed.
func dbTime(ctx context.Context, tx *sql.Tx) (string, time.Time, error) {
	text, err := dbNow(ctx, tx)
	if err != nil {
		return "", time.Time{}, err
	}
	t, err := parseTime(text)
	return text, t, err
}

// ceilingBound is the highest ceiling a claim or heartbeat may write:
// database time (under the write lock) + ttl + offset, in Unix ms.
func ceilingBound(now time.Time, ttl, offset time.Duration) int64 {
	return now.UnixMilli() + ttl.Milliseconds() + offset.Milliseconds()
}

// ttlModifier returns the strftime modifier that adds ttl, to the millisecond.
func ttlModifier(ttl time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", float64(ttl.Milliseconds())/1000)
}

// insertEvent appends ev at now, ignoring ev.ID and ev.At.
func insertEvent(ctx context.Context, tx *sql.Tx, ev allocator.LeaseEvent, now string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO lease_events (datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.DatacenterID, ev.WorkerID, ev.Holder, sqlstore.NullText(ev.Owner), sqlstore.NullText(ev.RequestID), ev.FencingVersion, string(ev.Kind), now, ev.Detail)
	if err != nil {
		return fmt.Errorf("sqlite: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
	}
	return nil
}

// scanEvent reads one row of sqlstore.EventColumns (at in timeLayout).
func scanEvent(row sqlstore.Scanner) (allocator.LeaseEvent, error) {
	return sqlstore.ScanEvent(row, parseTime)
}

func scanLease(row sqlstore.Scanner) (allocator.Lease, error) {
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

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: time %q: %w", s, err)
	}
	return t.UTC(), nil
}
