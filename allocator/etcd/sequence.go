package etcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// Sequences on etcd (docs/sequences.md).
//
// Keys, under the store's prefix:
//
//	seq/def/<name>            the sequence's settings
//	seq/ctr/<name>/<period>   the period's counter: the last number issued
//	seq/res/<name>/<id>       one reservation: its period, first number,
//	                          count, formatted numbers, state, caller, times
//
// A reservation is one transaction comparing the counter key's mod revision
// and writing the counter and the reservation keys together, so no number
// is taken without its record. The period comes from store time in the
// sequence's zone. A transaction holds at most maxSequenceOps operations
// (etcd's --max-txn-ops), hence MaxReserveRequests.

// MaxReserveRequests is the most reservations one Reserve writes.
const MaxReserveRequests = 100

// maxReserveNumbers bounds the numbers of one Reserve.
const maxReserveNumbers = 10000

func (k keyspace) sequenceDef(name string) string { return string(k) + "seq/def/" + name }
func (k keyspace) sequenceDefs() string           { return string(k) + "seq/def/" }
func (k keyspace) sequenceCounter(name, period string) string {
	return string(k) + "seq/ctr/" + name + "/" + period
}
func (k keyspace) sequenceReservations(name string) string {
	return string(k) + "seq/res/" + name + "/"
}
func (k keyspace) sequenceReservation(name, id string) string {
	return k.sequenceReservations(name) + id
}

// sequenceState holds the test time offset and the compiled sequences,
// which never change once created.
type sequenceState struct {
	offset   atomic.Int64
	mu       sync.Mutex
	compiled map[string]*sequence.Compiled
}

type sequenceRecord struct {
	Name        string    `json:"name"`
	Format      string    `json:"format"`
	Reset       string    `json:"reset_period"`
	Zone        string    `json:"time_zone"`
	Start       int64     `json:"start_value"`
	TTLMS       int64     `json:"ttl_ms"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	// PrunedBefore is the sequence's pruned_before (Prune).
	PrunedBefore string `json:"pruned_before,omitempty"`
}

func (r sequenceRecord) sequence() sequence.Sequence {
	return sequence.Sequence{Name: r.Name, Format: r.Format, Reset: sequence.Reset(r.Reset), Zone: r.Zone, Start: r.Start,
		StartZero: r.Start == 0, TTL: time.Duration(r.TTLMS) * time.Millisecond, Description: r.Description, CreatedAt: r.CreatedAt,
		PrunedBefore: r.PrunedBefore}
}

type counterRecord struct {
	Last int64 `json:"last_number"`
}

type reservationRecord struct {
	ID         string    `json:"reservation_id"`
	Period     string    `json:"period"`
	First      int64     `json:"first"`
	Count      int       `json:"count"`
	Formatted  []string  `json:"formatted"`
	State      string    `json:"state"`
	Caller     string    `json:"caller"`
	RequestID  string    `json:"request_id"`
	ReservedAt time.Time `json:"reserved_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	SettledAt  time.Time `json:"settled_at,omitzero"`
}

func (r reservationRecord) reservation(name string) sequence.Reservation {
	return sequence.Reservation{ID: r.ID, Sequence: name, Period: r.Period, First: r.First, Count: r.Count,
		Formatted: r.Formatted, Caller: r.Caller, RequestID: r.RequestID, State: sequence.State(r.State),
		ReservedAt: r.ReservedAt, ExpiresAt: r.ExpiresAt}
}

type etcdSequences struct{ s *Store }

var (
	_ sequence.Store       = etcdSequences{}
	_ sequence.TimeShifter = (*Store)(nil)
)

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return etcdSequences{s} }

// ShiftTime moves the sequences' store time by d (a seam for tests).
func (s *Store) ShiftTime(d time.Duration) { s.seqs.offset.Add(int64(d)) }

// now returns store time for the sequence calls, in whole milliseconds.
func (q etcdSequences) now(ctx context.Context) (time.Time, error) {
	t, err := q.s.storeNow(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return t.Add(time.Duration(q.s.seqs.offset.Load())).UTC().Truncate(time.Millisecond), nil
}

// CreateSequence implements sequence.Store.
func (q etcdSequences) CreateSequence(ctx context.Context, seq sequence.Sequence) (sequence.Sequence, error) {
	c, err := seq.Compile()
	if err != nil {
		return sequence.Sequence{}, err
	}
	seq = c.Sequence
	now, err := q.now(ctx)
	if err != nil {
		return sequence.Sequence{}, err
	}
	seq.CreatedAt = now
	key := q.s.keys.sequenceDef(seq.Name)
	rec := sequenceRecord{Name: seq.Name, Format: seq.Format, Reset: string(seq.Reset), Zone: seq.Zone, Start: seq.Start,
		TTLMS: seq.TTL.Milliseconds(), Description: seq.Description, CreatedAt: now}
	var exists bool
	err = q.s.retry(ctx, "create sequence "+seq.Name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, encode(rec))).Commit()
		if err != nil {
			return false, err
		}
		exists = !resp.Succeeded
		return true, nil
	})
	switch {
	case err != nil:
		return sequence.Sequence{}, fmt.Errorf("etcd: create sequence %q: %w", seq.Name, err)
	case exists:
		return sequence.Sequence{}, fmt.Errorf("etcd: create sequence %q: %w", seq.Name, sequence.ErrExists)
	}
	return seq, nil
}

// readSequence returns the record of name, or ErrNotFound.
func (q etcdSequences) readSequence(ctx context.Context, cli *clientv3.Client, name string) (sequenceRecord, error) {
	rec, _, err := q.readSequenceKV(ctx, cli, name)
	return rec, err
}

// readSequenceKV returns name's record and key-value, or ErrNotFound.
func (q etcdSequences) readSequenceKV(ctx context.Context, cli *clientv3.Client, name string) (sequenceRecord, *mvccpb.KeyValue, error) {
	key := q.s.keys.sequenceDef(name)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return sequenceRecord{}, nil, fmt.Errorf("etcd: read sequence %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return sequenceRecord{}, nil, fmt.Errorf("etcd: sequence %q: %w", name, sequence.ErrNotFound)
	}
	var rec sequenceRecord
	return rec, resp.Kvs[0], decode(key, resp.Kvs[0].Value, &rec)
}

// GetSequence implements sequence.Store.
func (q etcdSequences) GetSequence(ctx context.Context, name string) (sequence.Sequence, error) {
	rec, err := q.readSequence(ctx, q.s.cli, name)
	if err != nil {
		return sequence.Sequence{}, err
	}
	return rec.sequence(), nil
}

// ListSequences implements sequence.Store: the keys' order is the names'.
func (q etcdSequences) ListSequences(ctx context.Context) ([]sequence.Sequence, error) {
	return listRecords(ctx, q.s.cli, q.s.keys.sequenceDefs(), "sequences", func(r sequenceRecord) (sequence.Sequence, bool) {
		return r.sequence(), true
	})
}

func (q etcdSequences) compile(ctx context.Context, cli *clientv3.Client, name string) (*sequence.Compiled, error) {
	st := &q.s.seqs
	st.mu.Lock()
	c, ok := st.compiled[name]
	st.mu.Unlock()
	if ok {
		return c, nil
	}
	rec, err := q.readSequence(ctx, cli, name)
	if err != nil {
		return nil, err
	}
	if c, err = rec.sequence().Compile(); err != nil {
		return nil, fmt.Errorf("etcd: sequence %q as stored: %w", name, err)
	}
	st.mu.Lock()
	if st.compiled == nil {
		st.compiled = map[string]*sequence.Compiled{}
	}
	st.compiled[name] = c
	st.mu.Unlock()
	return c, nil
}

// Reserve implements sequence.Store in one transaction: see above.
func (q etcdSequences) Reserve(ctx context.Context, name string, reqs []sequence.Request) ([]sequence.Reservation, error) {
	total := 0
	for _, r := range reqs {
		if r.Count < 1 || r.Count > maxReserveNumbers || r.ID == "" {
			return nil, fmt.Errorf("%w: count %d: want 1 to %d, with a reservation ID", sequence.ErrInvalid, r.Count, maxReserveNumbers)
		}
		total += r.Count
	}
	if len(reqs) == 0 || len(reqs) > MaxReserveRequests || total > maxReserveNumbers {
		return nil, fmt.Errorf("%w: %d reservations of %d numbers in one transaction: want 1 to %d of at most %d",
			sequence.ErrInvalid, len(reqs), total, MaxReserveRequests, maxReserveNumbers)
	}
	var out []sequence.Reservation
	err := q.s.retry(ctx, "reserve on sequence "+name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		now, err := q.now(ctx)
		if err != nil {
			return false, err
		}
		c, err := q.compile(ctx, cli, name)
		if err != nil {
			return false, err
		}
		period := c.PeriodAt(now)
		key := q.s.keys.sequenceCounter(name, period)
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return false, err
		}
		last, guard := c.Start-1, clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			var ctr counterRecord
			if err := decode(key, resp.Kvs[0].Value, &ctr); err != nil {
				return false, err
			}
			last, guard = ctr.Last, clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
		}
		if last > c.MaxNumber()-int64(total) {
			return false, fmt.Errorf("etcd: reserve on %q: %w: %d numbers asked for in period %s, whose format shows at most %d",
				name, sequence.ErrPeriodExhausted, total, period, c.MaxNumber())
		}
		ops := []clientv3.Op{clientv3.OpPut(key, encode(counterRecord{Last: last + int64(total)}))}
		out = make([]sequence.Reservation, len(reqs))
		next := last + 1
		for i, r := range reqs {
			rec := reservationRecord{ID: r.ID, Period: period, First: next, Count: r.Count, Formatted: make([]string, r.Count),
				State: string(sequence.Reserved), Caller: r.Caller, RequestID: r.RequestID, ReservedAt: now, ExpiresAt: now.Add(c.TTL)}
			for j := range rec.Formatted {
				rec.Formatted[j] = c.Write(now, next+int64(j))
			}
			next += int64(r.Count)
			ops = append(ops, clientv3.OpPut(q.s.keys.sequenceReservation(name, r.ID), encode(rec)))
			out[i] = rec.reservation(name)
		}
		cmps := []clientv3.Cmp{guard}
		for _, r := range reqs {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(q.s.keys.sequenceReservation(name, r.ID)), "=", 0))
		}
		tresp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return false, err
		}
		if tresp.Succeeded {
			return true, nil
		}
		// An earlier uncertain try may have committed these reservations.
		mine, err := q.committed(ctx, cli, name, reqs)
		if err != nil || mine == nil {
			return false, err
		}
		out = mine
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// committed returns reqs' reservations if an earlier try wrote them.
func (q etcdSequences) committed(ctx context.Context, cli *clientv3.Client, name string, reqs []sequence.Request) ([]sequence.Reservation, error) {
	var out []sequence.Reservation
	for _, r := range reqs {
		rec, kv, err := q.readReservation(ctx, cli, name, r.ID)
		switch {
		case err != nil:
			return nil, err
		case kv == nil && out == nil:
			return nil, nil
		case kv == nil || rec.Caller != r.Caller || rec.Count != r.Count:
			return nil, fmt.Errorf("etcd: reserve on %q: reservation %s written otherwise than asked", name, r.ID)
		}
		out = append(out, rec.reservation(name))
	}
	return out, nil
}

// readReservation returns reservation id's record and key-value, or nil.
func (q etcdSequences) readReservation(ctx context.Context, cli *clientv3.Client, name, id string) (reservationRecord, *mvccpb.KeyValue, error) {
	key := q.s.keys.sequenceReservation(name, id)
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return reservationRecord{}, nil, err
	}
	var rec reservationRecord
	return rec, resp.Kvs[0], decode(key, resp.Kvs[0].Value, &rec)
}

// Settle implements sequence.Store by swapping the reservation's record.
func (q etcdSequences) Settle(ctx context.Context, name, id, caller string, to sequence.State) (sequence.Reservation, error) {
	if to != sequence.Confirmed && to != sequence.Voided {
		return sequence.Reservation{}, fmt.Errorf("%w: a reservation is settled as confirmed or voided, not %q", sequence.ErrInvalid, to)
	}
	var (
		out     sequence.Reservation
		refusal error
	)
	err := q.s.retry(ctx, "settle reservation "+id, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		refusal = nil
		if _, err := q.readSequence(ctx, cli, name); err != nil {
			return false, err
		}
		now, err := q.now(ctx)
		if err != nil {
			return false, err
		}
		rec, kv, err := q.readReservation(ctx, cli, name, id)
		switch {
		case err != nil:
			return false, err
		case kv == nil:
			return false, fmt.Errorf("etcd: reservation %s of %q: %w", id, name, sequence.ErrReservationNotFound)
		case rec.Caller != caller:
			return false, fmt.Errorf("etcd: reservation %s of %q: %w", id, name, sequence.ErrNotYours)
		case rec.State == string(sequence.Expired):
			return false, fmt.Errorf("etcd: reservation %s of %q expired at %s: %w", id, name, rec.ExpiresAt.Format(time.RFC3339Nano), sequence.ErrExpired)
		case rec.State != string(sequence.Reserved):
			return false, fmt.Errorf("etcd: reservation %s of %q is %s: %w", id, name, rec.State, sequence.ErrSettled)
		case !now.Before(rec.ExpiresAt):
			rec.State, rec.SettledAt = string(sequence.Expired), rec.ExpiresAt
			refusal = fmt.Errorf("etcd: reservation %s of %q expired at %s: %w", id, name, rec.ExpiresAt.Format(time.RFC3339Nano), sequence.ErrExpired)
		default:
			rec.State, rec.SettledAt = string(to), now
		}
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpPut(string(kv.Key), encode(rec))).Commit()
		if err != nil {
			return false, err
		}
		out = rec.reservation(name)
		return resp.Succeeded, nil
	})
	if err == nil {
		err = refusal
	}
	if err != nil {
		return sequence.Reservation{}, err
	}
	return out, nil
}

// ExpireReservations implements sequence.Store, swapping each expired
// record compared on its mod revision.
func (q etcdSequences) ExpireReservations(ctx context.Context, name string) (int64, error) {
	now, err := q.now(ctx)
	if err != nil {
		return 0, err
	}
	prefix := q.s.keys.sequenceReservations(name)
	resp, err := q.s.cli.Get(ctx, prefix, clientv3.WithRange(rangeEnd(prefix)))
	if err != nil {
		return 0, fmt.Errorf("etcd: expire reservations of %q: %w", name, err)
	}
	var n int64
	for _, kv := range resp.Kvs {
		var rec reservationRecord
		if err := decode(string(kv.Key), kv.Value, &rec); err != nil {
			return n, err
		}
		if rec.State != string(sequence.Reserved) || now.Before(rec.ExpiresAt) {
			continue
		}
		rec.State, rec.SettledAt = string(sequence.Expired), rec.ExpiresAt
		tresp, err := q.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpPut(string(kv.Key), encode(rec))).Commit()
		if err != nil {
			return n, fmt.Errorf("etcd: expire reservations of %q: %w", name, err)
		}
		if tresp.Succeeded { // else settled meanwhile
			n += int64(rec.Count)
		}
	}
	return n, nil
}

func (q etcdSequences) reservations(ctx context.Context, name string) ([]reservationRecord, error) {
	return listRecords(ctx, q.s.cli, q.s.keys.sequenceReservations(name), "reservations of "+name,
		func(r reservationRecord) (reservationRecord, bool) { return r, true })
}

// Ledger implements sequence.Store: every record of the sequence, expanded
// into rows, sorted and filtered.
func (q etcdSequences) Ledger(ctx context.Context, lq sequence.LedgerQuery) ([]sequence.Entry, error) {
	lq, err := lq.Normalize()
	if err != nil {
		return nil, err
	}
	if _, err := q.ExpireReservations(ctx, lq.Sequence); err != nil {
		return nil, err
	}
	recs, err := q.reservations(ctx, lq.Sequence)
	if err != nil {
		return nil, err
	}
	var rows []sequence.Entry
	for _, r := range recs {
		if (lq.Period != "" && r.Period != lq.Period) || (lq.State != "" && r.State != string(lq.State)) ||
			(lq.ReservationID != "" && r.ID != lq.ReservationID) || (lq.Caller != "" && r.Caller != lq.Caller) {
			continue
		}
		for j, f := range r.Formatted {
			e := sequence.Entry{Sequence: lq.Sequence, Period: r.Period, Number: r.First + int64(j), Formatted: f, State: sequence.State(r.State),
				ReservationID: r.ID, Caller: r.Caller, RequestID: r.RequestID, ReservedAt: r.ReservedAt, ExpiresAt: r.ExpiresAt, SettledAt: r.SettledAt}
			if lq.AfterPeriod != "" && (e.Period < lq.AfterPeriod || (e.Period == lq.AfterPeriod && e.Number <= lq.AfterNumber)) {
				continue
			}
			rows = append(rows, e)
		}
	}
	slices.SortFunc(rows, func(a, b sequence.Entry) int {
		return cmp.Or(cmp.Compare(a.Period, b.Period), cmp.Compare(a.Number, b.Number))
	})
	if len(rows) > lq.Limit {
		rows = rows[:lq.Limit]
	}
	return rows, nil
}

// SequenceStatus implements sequence.Store.
func (q etcdSequences) SequenceStatus(ctx context.Context, name string) (sequence.Status, error) {
	c, err := q.compile(ctx, q.s.cli, name)
	if err != nil {
		return sequence.Status{}, err
	}
	now, err := q.now(ctx)
	if err != nil {
		return sequence.Status{}, err
	}
	st := sequence.Status{Sequence: name, Period: c.PeriodAt(now), LastNumber: c.Start - 1, StoreTime: now}
	key := q.s.keys.sequenceCounter(name, st.Period)
	resp, err := q.s.cli.Get(ctx, key)
	if err != nil {
		return sequence.Status{}, fmt.Errorf("etcd: status of %q: %w", name, err)
	}
	if len(resp.Kvs) > 0 {
		var ctr counterRecord
		if err := decode(key, resp.Kvs[0].Value, &ctr); err != nil {
			return sequence.Status{}, err
		}
		st.LastNumber = ctr.Last
	}
	recs, err := q.reservations(ctx, name)
	if err != nil {
		return sequence.Status{}, err
	}
	for _, r := range recs {
		if r.State == string(sequence.Reserved) && now.Before(r.ExpiresAt) {
			st.Open += int64(r.Count)
		}
	}
	return st, nil
}

// pruneBatch is how many records one Prune transaction deletes.
const pruneBatch = 100

// Prune implements sequence.Store: it records pruned_before in one
// transaction compared on the sequence's record, then deletes the pruned
// periods' records in batches. Run again, it finishes a prune cut short.
func (q etcdSequences) Prune(ctx context.Context, name, before string, dryRun bool) (int64, error) {
	if !dryRun {
		// As a read of the ledger does: what has expired is marked so.
		if _, err := q.ExpireReservations(ctx, name); err != nil {
			return 0, err
		}
	}
	var (
		n    int64
		keys []string
	)
	err := q.s.retry(ctx, "prune sequence "+name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		n, keys = 0, nil
		rec, kv, err := q.readSequenceKV(ctx, cli, name)
		if err != nil {
			return false, err
		}
		c, err := rec.sequence().Compile()
		if err != nil {
			return false, fmt.Errorf("etcd: sequence %q as stored: %w", name, err)
		}
		now, err := q.now(ctx)
		if err != nil {
			return false, err
		}
		if err := c.CheckPrune(before, c.PeriodAt(now)); err != nil {
			return false, err
		}
		prefix := q.s.keys.sequenceReservations(name)
		resp, err := cli.Get(ctx, prefix, clientv3.WithRange(rangeEnd(prefix)))
		if err != nil {
			return false, fmt.Errorf("etcd: prune sequence %q: %w", name, err)
		}
		var open int64
		for _, kv := range resp.Kvs {
			var r reservationRecord
			if err := decode(string(kv.Key), kv.Value, &r); err != nil {
				return false, err
			}
			if r.Period >= before {
				continue
			}
			if r.State == string(sequence.Reserved) && now.Before(r.ExpiresAt) {
				open += int64(r.Count)
			}
			n += int64(r.Count)
			keys = append(keys, string(kv.Key))
		}
		if open > 0 {
			return false, fmt.Errorf("etcd: prune sequence %q before %s: %d numbers are reserved and not expired: %w; confirm or void them, or wait for their expiry",
				name, before, open, sequence.ErrOpenReservations)
		}
		if dryRun || rec.PrunedBefore >= before {
			return true, nil
		}
		rec.PrunedBefore = before
		tresp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpPut(string(kv.Key), encode(rec))).Commit()
		if err != nil {
			return false, err
		}
		return tresp.Succeeded, nil
	})
	if err != nil {
		return 0, err
	}
	if dryRun {
		return n, nil
	}
	for batch := range slices.Chunk(keys, pruneBatch) {
		err := q.s.retry(ctx, "prune sequence "+name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
			ops := make([]clientv3.Op, len(batch))
			for i, k := range batch {
				ops[i] = clientv3.OpDelete(k)
			}
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return err == nil, err
		})
		if err != nil {
			return 0, fmt.Errorf("etcd: prune sequence %q: %w (run it again to delete the rest)", name, err)
		}
	}
	return n, nil
}
