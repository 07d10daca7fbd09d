package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/snowflake"
)

func scanLayout(row Scanner) (snowflake.Layout, error) {
	var (
		got     snowflake.Layout
		epochMS int64
	)
	if err := row.Scan(&got.TimeBits, &got.DatacenterBits, &got.WorkerBits, &got.SequenceBits, &epochMS); err != nil {
		return snowflake.Layout{}, err
	}
	got.Epoch = time.UnixMilli(epochMS).UTC()
	return got, nil
}

const layoutQuery = `
	SELECT time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms
	FROM snowflake_layout WHERE id = 1`

// EnsureLayout runs allocator.LeaseStore.EnsureLayout's steps in the
// caller's transaction: record inserts layout unless recorded, read reads.
func (d Dialect) EnsureLayout(layout snowflake.Layout, record func(snowflake.Layout) error, read func(query string) Scanner) (snowflake.Layout, error) {
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	if err := record(layout); err != nil {
		return snowflake.Layout{}, fmt.Errorf("%s: record snowflake layout: %w", d.Name, err)
	}
	got, err := scanLayout(read(layoutQuery))
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("%s: read snowflake layout: %w", d.Name, err)
	}
	return got, nil
}

// Candidate is the worker_leases row a claim picked, as it was.
type Candidate struct {
	WorkerID, Version, CeilingMS int64
	Holder                       string
}

// ScanCandidate reads worker_id, holder, fencing_version, ts_ceiling_ms.
func ScanCandidate(row Scanner) (Candidate, error) {
	var (
		c      Candidate
		holder sql.NullString
	)
	err := row.Scan(&c.WorkerID, &holder, &c.Version, &c.CeilingMS)
	c.Holder = holder.String
	return c, err
}

// Claim runs allocator.LeaseStore.Claim's steps in the caller's
// transaction: owned counts the owner's live leases (only when capped),
// pick reads a free row (d.NoRows if none), take writes the claim (errors
// returned as they are), record inserts the event.
func (d Dialect) Claim(req allocator.ClaimRequest, owned func() (int64, error), pick func() (Candidate, error),
	take func(Candidate) (allocator.Lease, time.Time, error), record func(allocator.LeaseEvent) error) (allocator.ClaimResult, error) {
	if req.MaxOwnerLeases > 0 && req.Owner != "" {
		n, err := owned()
		if err != nil {
			return allocator.ClaimResult{}, fmt.Errorf("%s: count the leases of %s: %w", d.Name, req.Owner, err)
		}
		if n >= int64(req.MaxOwnerLeases) {
			return allocator.ClaimResult{}, fmt.Errorf("%s: %s holds %d leases, at most %d: %w",
				d.Name, req.Owner, n, req.MaxOwnerLeases, allocator.ErrTooManyLeases)
		}
	}
	c, err := pick()
	if errors.Is(err, d.NoRows) {
		return allocator.ClaimResult{}, fmt.Errorf("%s: datacenter %d, workers %d..%d: %w",
			d.Name, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, allocator.ErrNoWorkerAvailable)
	}
	if err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("%s: find a worker ID to claim: %w", d.Name, err)
	}
	lease, now, err := take(c)
	if err != nil {
		return allocator.ClaimResult{}, err
	}
	kind, detail := allocator.ClaimEvent(c.Holder, req.Holder, c.Version, c.CeilingMS)
	ev := allocator.LeaseEvent{LeaseKey: lease.LeaseKey, Holder: req.Holder, FencingVersion: lease.FencingVersion,
		Kind: kind, Detail: detail, Owner: req.Owner, RequestID: req.RequestID}
	if err := record(ev); err != nil {
		return allocator.ClaimResult{}, err
	}
	return allocator.ClaimResult{Lease: lease, PrevHolder: c.Holder, PrevCeilingMS: c.CeilingMS, DBNow: now}, nil
}

// OwnedQuery returns Claim's owned count: the owner's live leases other
// than the holder's (parameters owner, holder).
func OwnedQuery(ph func(int) string, now string) string {
	return `SELECT count(*) FROM worker_leases WHERE owner = ` + ph(1) +
		` AND holder IS NOT NULL AND holder <> ` + ph(2) + ` AND expires_at > ` + now
}

// EventColumns are the columns of lease_events that ScanEvent reads.
const EventColumns = `id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail`

// ScanEvent reads one EventColumns row; at converts the at column to UTC.
func ScanEvent[At any](row Scanner, at func(At) (time.Time, error)) (allocator.LeaseEvent, error) {
	var (
		ev               allocator.LeaseEvent
		kind             string
		owner, requestID sql.NullString
		rawAt            At
	)
	err := row.Scan(&ev.ID, &ev.DatacenterID, &ev.WorkerID, &ev.Holder, &owner, &requestID, &ev.FencingVersion, &kind, &rawAt, &ev.Detail)
	if err != nil {
		return allocator.LeaseEvent{}, err
	}
	ev.Kind = allocator.EventKind(kind)
	ev.Owner, ev.RequestID = owner.String, requestID.String
	if ev.At, err = at(rawAt); err != nil {
		return allocator.LeaseEvent{}, err
	}
	return ev, nil
}

// UTC is the at of ScanEvent for a driver that reads times as time.Time.
func UTC(t time.Time) (time.Time, error) { return t.UTC(), nil }

// WorkerError wraps err of op on key's row: "mysql: evict worker 1/2: …".
func (d Dialect) WorkerError(op string, key allocator.LeaseKey, err error) error {
	return fmt.Errorf("%s: %s worker %d/%d: %w", d.Name, op, key.DatacenterID, key.WorkerID, err)
}

func (d Dialect) leaseError(op string, key allocator.LeaseKey, holder string, version int64, err error) error {
	return fmt.Errorf("%s: %s of worker %d/%d by %q at version %d: %w",
		d.Name, op, key.DatacenterID, key.WorkerID, holder, version, err)
}

// Heartbeat implements allocator.LeaseStore.Heartbeat for a SQL store,
// running beat in a transaction of r after checking req.
func Heartbeat[Tx any](ctx context.Context, d Dialect, r *sqltx.Runner[Tx], req allocator.HeartbeatRequest,
	beat func(tx Tx) (allocator.Lease, time.Time, error)) (allocator.Lease, time.Time, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("%s: %w", d.Name, err)
	}
	type leaseAt struct {
		lease allocator.Lease
		now   time.Time
	}
	got, err := sqltx.Get(ctx, r, func(tx Tx) (leaseAt, error) {
		lease, now, err := beat(tx)
		return leaseAt{lease, now}, err
	})
	return got.lease, got.now, err
}

// HeartbeatError maps the extending UPDATE's err: d.NoRows is
// ErrLeaseLost, plus ErrLeaseSecret when held finds the holder's live row
// at the version; other errors are wrapped.
func (d Dialect) HeartbeatError(req allocator.HeartbeatRequest, err error, held func() (int64, error)) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, d.NoRows):
		return d.lostError("heartbeat", req.Key, req.Holder, req.FencingVersion, held)
	default:
		return d.WorkerError("heartbeat of", req.Key, err)
	}
}

// lostError is ErrLeaseLost for op, plus ErrLeaseSecret when held counts
// the holder's live row (only owner or secret differed).
func (d Dialect) lostError(op string, key allocator.LeaseKey, holder string, version int64, held func() (int64, error)) error {
	n, err := held()
	switch {
	case err != nil:
		return d.WorkerError(op, key, err)
	case n > 0:
		return d.leaseError(op, key, holder, version, fmt.Errorf("%w: %w", allocator.ErrLeaseLost, allocator.ErrLeaseSecret))
	}
	return d.leaseError(op, key, holder, version, allocator.ErrLeaseLost)
}

// HeldQuery returns the held count of HeartbeatError and Release
// (parameters datacenter, worker, holder, fencing version).
func HeldQuery(ph func(int) string, now string) string {
	return `SELECT count(*) FROM worker_leases WHERE datacenter_id = ` + ph(1) + ` AND worker_id = ` + ph(2) +
		` AND holder = ` + ph(3) + ` AND fencing_version = ` + ph(4) + ` AND expires_at > ` + now
}

// Release runs allocator.LeaseStore.Release's steps in the caller's
// transaction: read locks the row's floor and ceiling (held as for
// HeartbeatError when none), write writes allocator.ReleaseCeiling's
// ceiling, record inserts the event.
func (d Dialect) Release(req allocator.ReleaseRequest, read func() Scanner, held func() (int64, error),
	write func(ceiling int64) error, record func(allocator.LeaseEvent) error) (int64, error) {
	var floor, committed int64
	err := read().Scan(&floor, &committed)
	if errors.Is(err, d.NoRows) {
		return 0, d.lostError("release", req.Key, req.Holder, req.FencingVersion, held)
	}
	if err != nil {
		return 0, d.WorkerError("release", req.Key, err)
	}
	ceiling, err := allocator.ReleaseCeiling(floor, committed, req.LastTimestampMS)
	if err != nil {
		return 0, d.leaseError("release", req.Key, req.Holder, req.FencingVersion, err)
	}
	if err := write(ceiling); err != nil {
		return 0, d.WorkerError("release", req.Key, err)
	}
	err = record(allocator.LeaseEvent{LeaseKey: req.Key, Holder: req.Holder, FencingVersion: req.FencingVersion,
		Kind: allocator.EventRelease, Detail: fmt.Sprintf("ceiling set to %d", ceiling), Owner: req.Owner, RequestID: req.RequestID})
	if err != nil {
		return 0, err
	}
	return ceiling, nil
}

// Evict runs allocator.LeaseAdmin.Evict's steps in the caller's
// transaction: read locks the row, req.CheckRow decides, evict writes,
// record inserts the event.
func (d Dialect) Evict(req allocator.EvictRequest, read func() (allocator.Lease, error),
	evict func(prev allocator.Lease) (allocator.Lease, error), record func(allocator.LeaseEvent) error) (allocator.Lease, error) {
	prev, err := read()
	found := !errors.Is(err, d.NoRows)
	if found && err != nil {
		return allocator.Lease{}, d.WorkerError("evict", req.Key, err)
	}
	if err := req.CheckRow(prev, found); err != nil {
		return allocator.Lease{}, fmt.Errorf("%s: %w", d.Name, err)
	}
	lease, err := evict(prev)
	if err != nil {
		return allocator.Lease{}, err
	}
	err = record(allocator.LeaseEvent{LeaseKey: req.Key, Holder: prev.Holder, FencingVersion: prev.FencingVersion,
		Kind: allocator.EventEvict, Detail: allocator.EvictDetail(prev, req.Reason), Owner: req.Owner, RequestID: req.RequestID})
	if err != nil {
		return allocator.Lease{}, err
	}
	return lease, nil
}

// ListLeases implements allocator.LeaseAdmin.ListLeases in key order.
func (d Dialect) ListLeases(ctx context.Context, cols string, query Query[allocator.Lease]) ([]allocator.Lease, error) {
	leases, err := query(ctx, `SELECT `+cols+` FROM worker_leases ORDER BY datacenter_id, worker_id`)
	if err != nil {
		return nil, fmt.Errorf("%s: list leases: %w", d.Name, err)
	}
	return leases, nil
}

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents.
func (d Dialect) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter,
	query Query[allocator.LeaseEvent]) ([]allocator.LeaseEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name, err)
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	q, args := d.leaseEventQuery(f, EventColumns)
	events, err := query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: list lease events: %w", d.Name, err)
	}
	return events, nil
}

func (d Dialect) leaseEventQuery(f allocator.LeaseEventFilter, cols string) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, cond+" "+d.Placeholder(len(args)))
	}
	add("id >", f.AfterID)
	if f.DatacenterID != nil {
		add("datacenter_id =", *f.DatacenterID)
	}
	if f.WorkerID != nil {
		add("worker_id =", *f.WorkerID)
	}
	if f.Holder != "" {
		add("holder =", f.Holder)
	}
	if f.Owner != "" {
		add("owner =", f.Owner)
	}
	if f.Kind != "" {
		add("event =", string(f.Kind))
	}
	if !f.Since.IsZero() {
		add("at >=", d.TimeArg(f.Since))
	}
	if !f.Until.IsZero() {
		add("at <", d.TimeArg(f.Until))
	}
	args = append(args, f.Limit)
	return `SELECT ` + cols + ` FROM lease_events WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id LIMIT ` + d.Placeholder(len(args)), args
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents,
// running prune (at most batch oldest events) until it deletes fewer.
func (d Dialect) PruneLeaseEvents(ctx context.Context, before time.Time, batch int,
	prune func(ctx context.Context, before any, batch int) (int64, error)) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	var total int64
	for {
		n, err := prune(ctx, d.TimeArg(before), batch)
		if err != nil {
			return total, fmt.Errorf("%s: prune lease events: %w", d.Name, err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
