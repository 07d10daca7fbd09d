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

// scanLayout reads the row of snowflake_layout, its columns time_bits,
// datacenter_bits, worker_bits, sequence_bits and epoch_ms in that order.
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

// layoutQuery reads the row of snowflake_layout, with the columns
// scanLayout reads; every dialect writes it alike.
const layoutQuery = `
	SELECT time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms
	FROM snowflake_layout WHERE id = 1`

// EnsureLayout runs the steps of allocator.LeaseStore.EnsureLayout in the
// caller's transaction: record inserts layout (the default for a zero one)
// unless a layout is recorded already, and read runs the SELECT it is
// given, which returns the recorded row, in the same transaction.
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

// Candidate is the row of worker_leases a claim picked, as it was before
// the claim: its worker ID, holder ("" for none), fencing version and
// ceiling.
type Candidate struct {
	WorkerID, Version, CeilingMS int64
	Holder                       string
}

// ScanCandidate reads a Candidate from the columns worker_id, holder,
// fencing_version and ts_ceiling_ms, in that order.
func ScanCandidate(row Scanner) (Candidate, error) {
	var (
		c      Candidate
		holder sql.NullString
	)
	err := row.Scan(&c.WorkerID, &holder, &c.Version, &c.CeilingMS)
	c.Holder = holder.String
	return c, err
}

// Claim runs the steps of allocator.LeaseStore.Claim in the caller's
// transaction, once the pool's rows exist: pick reads the row to claim (or
// returns d.NoRows when none is free), take writes the claim over it and
// returns the lease it left and the database time (its errors, and
// sqltx.ErrRetry when the row changed, are returned as they are), and
// record inserts the claim's event.
func (d Dialect) Claim(req allocator.ClaimRequest, pick func() (Candidate, error),
	take func(Candidate) (allocator.Lease, time.Time, error), record func(allocator.LeaseEvent) error) (allocator.ClaimResult, error) {
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

// EventColumns are the columns of lease_events that ScanEvent reads, in
// its order.
const EventColumns = `id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail`

// ScanEvent reads one row of the columns id, datacenter_id, worker_id,
// holder, owner, request_id, fencing_version, event, at and detail of
// lease_events, in that order (EventColumns). The at column is read as an
// At, which the dialect's at turns into the event's time (UTC).
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

// WorkerError wraps err, from the statement of op ("claim", "evict", …) on
// the row of key: "mysql: evict worker 1/2: …".
func (d Dialect) WorkerError(op string, key allocator.LeaseKey, err error) error {
	return fmt.Errorf("%s: %s worker %d/%d: %w", d.Name, op, key.DatacenterID, key.WorkerID, err)
}

// leaseError is the error of op ("heartbeat", "release") by holder at
// version on the row of key that err, allocator.ErrLeaseLost or a refusal,
// stopped.
func (d Dialect) leaseError(op string, key allocator.LeaseKey, holder string, version int64, err error) error {
	return fmt.Errorf("%s: %s of worker %d/%d by %q at version %d: %w",
		d.Name, op, key.DatacenterID, key.WorkerID, holder, version, err)
}

// Heartbeat implements allocator.LeaseStore.Heartbeat for a SQL store:
// after checking req, it runs beat in a transaction of r and returns the
// lease beat extended and the database time it read. beat's errors, which
// HeartbeatError words, are returned as they are.
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

// HeartbeatError is what a Heartbeat's beat returns for err, the error of
// the UPDATE that extends the lease: nil for nil, allocator.ErrLeaseLost for
// d.NoRows (no row matched the holder and version, or the lease expired),
// else err wrapped.
func (d Dialect) HeartbeatError(req allocator.HeartbeatRequest, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, d.NoRows):
		return d.leaseError("heartbeat", req.Key, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
	default:
		return d.WorkerError("heartbeat of", req.Key, err)
	}
}

// Release runs the steps of allocator.LeaseStore.Release in the caller's
// transaction: read queries the row's ts_floor_ms and ts_ceiling_ms where
// holder and version match (no row when none does), locked as the dialect
// locks it; allocator.ReleaseCeiling decides the ceiling; write releases
// the row with it, and record inserts the event. It returns the ceiling
// written.
func (d Dialect) Release(req allocator.ReleaseRequest, read func() Scanner,
	write func(ceiling int64) error, record func(allocator.LeaseEvent) error) (int64, error) {
	var floor, committed int64
	err := read().Scan(&floor, &committed)
	if errors.Is(err, d.NoRows) {
		return 0, d.leaseError("release", req.Key, req.Holder, req.FencingVersion, allocator.ErrLeaseLost)
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

// Evict runs the steps of allocator.LeaseAdmin.Evict in the caller's
// transaction: read returns the row (d.NoRows when there is none), locked
// as the dialect locks it; req.CheckRow decides; evict takes the lease
// away from the row's fencing version and returns the row it left (its
// errors are returned as they are), and record inserts the event.
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

// ListLeases implements allocator.LeaseAdmin.ListLeases for a SQL store: it
// runs the SELECT of the columns cols of every row of worker_leases, in key
// order, with query, which reads them.
func (d Dialect) ListLeases(ctx context.Context, cols string, query Query[allocator.Lease]) ([]allocator.Lease, error) {
	leases, err := query(ctx, `SELECT `+cols+` FROM worker_leases ORDER BY datacenter_id, worker_id`)
	if err != nil {
		return nil, fmt.Errorf("%s: list leases: %w", d.Name, err)
	}
	return leases, nil
}

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents for a SQL
// store: it builds the SELECT of the EventColumns of lease_events that f
// selects, in id order, and runs it with query, which reads them.
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

// leaseEventQuery returns the SELECT of ListLeaseEvents and its parameters.
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

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents for a
// SQL store: it runs prune, which deletes at most batch of the oldest
// events before the time given (d.TimeArg of before) and returns how many
// it deleted, until a statement deletes fewer than batch.
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
