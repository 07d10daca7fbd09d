// Package seqsql is the sequence store (sequence.Store) of idgen's three
// SQL stores, written once on database/sql; each store gives it a Dialect
// and its pool.
//
// Every transaction reads the database's time first and uses it for all it
// writes. A period's counter advances by one UPDATE, queueing on its row
// lock, and the ledger rows go in the same transaction.
package seqsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/sqltx"
)

// Dialect is what differs between the SQL databases.
type Dialect struct {
	// Name begins every error: "postgres", "mysql", "sqlite".
	Name string
	// Dollar marks PostgreSQL's $n placeholders (statements use "?").
	Dollar bool
	// Now is the SQL expression of the database's current time.
	Now string
	// TimeArg turns a UTC millisecond time into a time-column parameter.
	TimeArg func(t time.Time) any
	// InsertCounter inserts a counter row of four parameters, if missing.
	InsertCounter string
	// ForUpdate ends a locking SELECT; "" for SQLite.
	ForUpdate string
	// Duplicate reports whether err is a unique-key violation.
	Duplicate func(err error) bool
}

// MaxReserve bounds the numbers of one store transaction.
const MaxReserve = 10000

// insertChunk is how many ledger rows one INSERT writes, within every
// database's parameter limit.
const insertChunk = 500

// Store is the sequence store on one SQL database; safe for concurrent use.
type Store struct {
	d      Dialect
	db     *sql.DB
	tx     *sqltx.Runner[*sql.Tx]
	offset atomic.Int64 // ShiftTime, for tests

	mu       sync.Mutex
	compiled map[string]*sequence.Compiled // sequences never change once created
}

var (
	_ sequence.Store       = (*Store)(nil)
	_ sequence.TimeShifter = (*Store)(nil)
)

// New returns the sequence store of dialect d on db; tx runs its
// transactions (READ COMMITTED or stronger, retried on conflicts).
func New(d Dialect, db *sql.DB, tx *sqltx.Runner[*sql.Tx]) *Store {
	return &Store{d: d, db: db, tx: tx, compiled: map[string]*sequence.Compiled{}}
}

// ShiftTime implements sequence.TimeShifter.
func (s *Store) ShiftTime(d time.Duration) { s.offset.Add(int64(d)) }

// q writes query's "?" placeholders as the dialect wants them.
func (s *Store) q(query string) string {
	if !s.d.Dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// now reads store time in tx (or on the pool), in UTC whole milliseconds.
func (s *Store) now(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	var tc timeCol
	var row *sql.Row
	if tx != nil {
		row = tx.QueryRowContext(ctx, `SELECT `+s.d.Now)
	} else {
		row = s.db.QueryRowContext(ctx, `SELECT `+s.d.Now)
	}
	if err := row.Scan(&tc); err != nil {
		return time.Time{}, fmt.Errorf("%s: read the database's time: %w", s.d.Name, err)
	}
	return tc.t.Add(time.Duration(s.offset.Load())).UTC().Truncate(time.Millisecond), nil
}

// sequenceColumns are the columns CreateSequence writes; selectColumns
// those scanSequence reads.
const (
	sequenceColumns = `name, format, reset_period, time_zone, start_value, ttl_ms, description, created_at`
	selectColumns   = sequenceColumns + `, pruned_before`
)

func scanSequence(row interface{ Scan(...any) error }) (sequence.Sequence, error) {
	var (
		seq   sequence.Sequence
		reset string
		ttl   int64
		tc    timeCol
	)
	if err := row.Scan(&seq.Name, &seq.Format, &reset, &seq.Zone, &seq.Start, &ttl, &seq.Description, &tc, &seq.PrunedBefore); err != nil {
		return sequence.Sequence{}, err
	}
	seq.Reset = sequence.Reset(reset)
	seq.TTL = time.Duration(ttl) * time.Millisecond
	seq.StartZero = seq.Start == 0
	seq.CreatedAt = tc.t
	return seq, nil
}

// CreateSequence implements sequence.Store.
func (s *Store) CreateSequence(ctx context.Context, seq sequence.Sequence) (sequence.Sequence, error) {
	c, err := seq.Compile()
	if err != nil {
		return sequence.Sequence{}, err
	}
	seq = c.Sequence
	now, err := s.now(ctx, nil)
	if err != nil {
		return sequence.Sequence{}, err
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO sequences (`+sequenceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		seq.Name, seq.Format, string(seq.Reset), seq.Zone, seq.Start, seq.TTL.Milliseconds(), seq.Description, s.d.TimeArg(now))
	switch {
	case err != nil && s.d.Duplicate(err):
		return sequence.Sequence{}, fmt.Errorf("%s: create sequence %q: %w", s.d.Name, seq.Name, sequence.ErrExists)
	case err != nil:
		return sequence.Sequence{}, fmt.Errorf("%s: create sequence %q: %w", s.d.Name, seq.Name, err)
	}
	seq.CreatedAt = now
	return seq, nil
}

// GetSequence implements sequence.Store.
func (s *Store) GetSequence(ctx context.Context, name string) (sequence.Sequence, error) {
	seq, err := scanSequence(s.db.QueryRowContext(ctx, s.q(`SELECT `+selectColumns+` FROM sequences WHERE name = ?`), name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return sequence.Sequence{}, fmt.Errorf("%s: sequence %q: %w", s.d.Name, name, sequence.ErrNotFound)
	case err != nil:
		return sequence.Sequence{}, fmt.Errorf("%s: get sequence %q: %w", s.d.Name, name, err)
	}
	return seq, nil
}

// ListSequences implements sequence.Store.
func (s *Store) ListSequences(ctx context.Context) ([]sequence.Sequence, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+selectColumns+` FROM sequences ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("%s: list sequences: %w", s.d.Name, err)
	}
	defer rows.Close()
	var out []sequence.Sequence
	for rows.Next() {
		seq, err := scanSequence(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: list sequences: %w", s.d.Name, err)
		}
		out = append(out, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list sequences: %w", s.d.Name, err)
	}
	return out, nil
}

// compile returns the compiled sequence name, read in tx the first time.
func (s *Store) compile(ctx context.Context, tx *sql.Tx, name string) (*sequence.Compiled, error) {
	s.mu.Lock()
	c, ok := s.compiled[name]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	seq, err := scanSequence(tx.QueryRowContext(ctx, s.q(`SELECT `+selectColumns+` FROM sequences WHERE name = ?`), name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%s: sequence %q: %w", s.d.Name, name, sequence.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("%s: read sequence %q: %w", s.d.Name, name, err)
	}
	if c, err = seq.Compile(); err != nil {
		return nil, fmt.Errorf("%s: sequence %q as stored: %w", s.d.Name, name, err)
	}
	s.mu.Lock()
	s.compiled[name] = c
	s.mu.Unlock()
	return c, nil
}

// Reserve implements sequence.Store.
func (s *Store) Reserve(ctx context.Context, name string, reqs []sequence.Request) ([]sequence.Reservation, error) {
	total := 0
	for _, r := range reqs {
		if r.Count < 1 || r.Count > MaxReserve || r.ID == "" {
			return nil, fmt.Errorf("%w: count %d: want 1 to %d, with a reservation ID", sequence.ErrInvalid, r.Count, MaxReserve)
		}
		total += r.Count
	}
	if len(reqs) == 0 || total > MaxReserve {
		return nil, fmt.Errorf("%w: %d numbers in one transaction: want 1 to %d", sequence.ErrInvalid, total, MaxReserve)
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) ([]sequence.Reservation, error) {
		now, err := s.now(ctx, tx)
		if err != nil {
			return nil, err
		}
		c, err := s.compile(ctx, tx, name)
		if err != nil {
			return nil, err
		}
		period := c.PeriodAt(now)
		if _, err := tx.ExecContext(ctx, s.q(s.d.InsertCounter), name, period, c.Start-1, s.d.TimeArg(now)); err != nil {
			return nil, fmt.Errorf("%s: reserve on %q: start period %s: %w", s.d.Name, name, period, err)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sequence_counters SET last_number = last_number + ?, updated_at = ?
			WHERE sequence = ? AND period = ? AND last_number <= ?`),
			total, s.d.TimeArg(now), name, period, c.MaxNumber()-int64(total))
		if err != nil {
			return nil, fmt.Errorf("%s: reserve on %q: advance period %s: %w", s.d.Name, name, period, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err == nil {
				err = fmt.Errorf("%w: %d numbers asked for in period %s of %q, whose format shows at most %d", sequence.ErrPeriodExhausted, total, period, name, c.MaxNumber())
			}
			return nil, fmt.Errorf("%s: reserve on %q: %w", s.d.Name, name, err)
		}
		var last int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT last_number FROM sequence_counters WHERE sequence = ? AND period = ?`), name, period).Scan(&last); err != nil {
			return nil, fmt.Errorf("%s: reserve on %q: read period %s: %w", s.d.Name, name, period, err)
		}
		out := make([]sequence.Reservation, len(reqs))
		next := last - int64(total) + 1
		expires := now.Add(c.TTL)
		for i, r := range reqs {
			res := sequence.Reservation{
				ID: r.ID, Sequence: name, Period: period, First: next, Count: r.Count,
				Formatted: make([]string, r.Count), Caller: r.Caller, RequestID: r.RequestID,
				State: sequence.Reserved, ReservedAt: now, ExpiresAt: expires,
			}
			for j := range res.Formatted {
				res.Formatted[j] = c.Write(now, next+int64(j))
			}
			next += int64(r.Count)
			out[i] = res
		}
		if err := s.insertLedger(ctx, tx, out); err != nil {
			return nil, err
		}
		return out, nil
	})
}

func (s *Store) insertLedger(ctx context.Context, tx *sql.Tx, rs []sequence.Reservation) error {
	var (
		args []any
		rows int
	)
	flush := func() error {
		if rows == 0 {
			return nil
		}
		values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL),", rows), ",")
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO sequence_ledger (sequence, period, number, formatted, state,
			reservation_id, caller, request_id, reserved_at, expires_at, settled_at) VALUES `+values), args...)
		args, rows = args[:0], 0
		if err != nil {
			return fmt.Errorf("%s: write the ledger: %w", s.d.Name, err)
		}
		return nil
	}
	for _, r := range rs {
		for j, f := range r.Formatted {
			args = append(args, r.Sequence, r.Period, r.First+int64(j), f, string(sequence.Reserved),
				r.ID, r.Caller, r.RequestID, s.d.TimeArg(r.ReservedAt), s.d.TimeArg(r.ExpiresAt))
			if rows++; rows == insertChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// settleOutcome is what the transaction of Settle decided.
type settleOutcome struct {
	res     sequence.Reservation
	refusal error // committed (an expiry recorded), then returned
}

// Settle implements sequence.Store.
func (s *Store) Settle(ctx context.Context, name, id, caller string, to sequence.State) (sequence.Reservation, error) {
	if to != sequence.Confirmed && to != sequence.Voided {
		return sequence.Reservation{}, fmt.Errorf("%w: a reservation is settled as confirmed or voided, not %q", sequence.ErrInvalid, to)
	}
	out, err := sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (settleOutcome, error) {
		now, err := s.now(ctx, tx)
		if err != nil {
			return settleOutcome{}, err
		}
		entries, err := s.queryEntries(ctx, tx, `SELECT `+entryColumns+` FROM sequence_ledger
			WHERE sequence = ? AND reservation_id = ? ORDER BY period, number`+s.d.ForUpdate, name, id)
		if err != nil {
			return settleOutcome{}, fmt.Errorf("%s: settle %s of %q: %w", s.d.Name, id, name, err)
		}
		if len(entries) == 0 {
			return settleOutcome{}, fmt.Errorf("%s: reservation %s of %q: %w", s.d.Name, id, name, sequence.ErrReservationNotFound)
		}
		first := entries[0]
		res := sequence.Reservation{
			ID: id, Sequence: name, Period: first.Period, First: first.Number, Count: len(entries),
			Caller: first.Caller, RequestID: first.RequestID, State: first.State,
			ReservedAt: first.ReservedAt, ExpiresAt: first.ExpiresAt,
		}
		for _, e := range entries {
			res.Formatted = append(res.Formatted, e.Formatted)
		}
		switch {
		case first.Caller != caller:
			return settleOutcome{}, fmt.Errorf("%s: reservation %s of %q: %w", s.d.Name, id, name, sequence.ErrNotYours)
		case first.State == sequence.Expired:
			return settleOutcome{}, fmt.Errorf("%s: reservation %s of %q expired at %s: %w", s.d.Name, id, name, first.ExpiresAt.Format(time.RFC3339Nano), sequence.ErrExpired)
		case first.State != sequence.Reserved:
			return settleOutcome{}, fmt.Errorf("%s: reservation %s of %q is %s: %w", s.d.Name, id, name, first.State, sequence.ErrSettled)
		case !now.Before(first.ExpiresAt):
			if err := s.setState(ctx, tx, name, id, sequence.Expired, first.ExpiresAt); err != nil {
				return settleOutcome{}, err
			}
			res.State = sequence.Expired
			return settleOutcome{res: res, refusal: fmt.Errorf("%s: reservation %s of %q expired at %s: %w", s.d.Name, id, name, first.ExpiresAt.Format(time.RFC3339Nano), sequence.ErrExpired)}, nil
		}
		if err := s.setState(ctx, tx, name, id, to, now); err != nil {
			return settleOutcome{}, err
		}
		res.State = to
		return settleOutcome{res: res}, nil
	})
	if err != nil {
		return sequence.Reservation{}, err
	}
	if out.refusal != nil {
		return sequence.Reservation{}, out.refusal
	}
	return out.res, nil
}

// setState moves reservation id's reserved numbers to state at at.
func (s *Store) setState(ctx context.Context, tx *sql.Tx, name, id string, state sequence.State, at time.Time) error {
	_, err := tx.ExecContext(ctx, s.q(`UPDATE sequence_ledger SET state = ?, settled_at = ?
		WHERE sequence = ? AND reservation_id = ? AND state = 'reserved'`), string(state), s.d.TimeArg(at), name, id)
	if err != nil {
		return fmt.Errorf("%s: settle %s of %q: %w", s.d.Name, id, name, err)
	}
	return nil
}

// ExpireReservations implements sequence.Store; settled_at is the expiry.
func (s *Store) ExpireReservations(ctx context.Context, name string) (int64, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (int64, error) {
		now, err := s.now(ctx, tx)
		if err != nil {
			return 0, err
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sequence_ledger SET state = 'expired', settled_at = expires_at
			WHERE sequence = ? AND state = 'reserved' AND expires_at <= ?`), name, s.d.TimeArg(now))
		if err != nil {
			return 0, fmt.Errorf("%s: expire reservations of %q: %w", s.d.Name, name, err)
		}
		return res.RowsAffected()
	})
}

// entryColumns are the columns scanEntry reads.
const entryColumns = `sequence, period, number, formatted, state, reservation_id, caller, request_id, reserved_at, expires_at, settled_at`

func (s *Store) queryEntries(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]sequence.Entry, error) {
	rows, err := q.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sequence.Entry
	for rows.Next() {
		var (
			e                 sequence.Entry
			state             string
			reserved, expires timeCol
			settled           nullTimeCol
		)
		if err := rows.Scan(&e.Sequence, &e.Period, &e.Number, &e.Formatted, &state, &e.ReservationID,
			&e.Caller, &e.RequestID, &reserved, &expires, &settled); err != nil {
			return nil, err
		}
		e.State = sequence.State(state)
		e.ReservedAt, e.ExpiresAt, e.SettledAt = reserved.t, expires.t, settled.t
		out = append(out, e)
	}
	return out, rows.Err()
}

// Ledger implements sequence.Store.
func (s *Store) Ledger(ctx context.Context, q sequence.LedgerQuery) ([]sequence.Entry, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	if _, err := s.ExpireReservations(ctx, q.Sequence); err != nil {
		return nil, err
	}
	where := []string{"sequence = ?"}
	args := []any{q.Sequence}
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if q.Period != "" {
		add("period = ?", q.Period)
	}
	if q.State != "" {
		add("state = ?", string(q.State))
	}
	if q.ReservationID != "" {
		add("reservation_id = ?", q.ReservationID)
	}
	if q.Caller != "" {
		add("caller = ?", q.Caller)
	}
	if q.AfterPeriod != "" {
		where = append(where, "(period > ? OR (period = ? AND number > ?))")
		args = append(args, q.AfterPeriod, q.AfterPeriod, q.AfterNumber)
	}
	args = append(args, q.Limit)
	entries, err := s.queryEntries(ctx, s.db, `SELECT `+entryColumns+` FROM sequence_ledger WHERE `+
		strings.Join(where, " AND ")+` ORDER BY period, number LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: ledger of %q: %w", s.d.Name, q.Sequence, err)
	}
	return entries, nil
}

// SequenceStatus implements sequence.Store.
func (s *Store) SequenceStatus(ctx context.Context, name string) (sequence.Status, error) {
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (sequence.Status, error) {
		now, err := s.now(ctx, tx)
		if err != nil {
			return sequence.Status{}, err
		}
		c, err := s.compile(ctx, tx, name)
		if err != nil {
			return sequence.Status{}, err
		}
		st := sequence.Status{Sequence: name, Period: c.PeriodAt(now), LastNumber: c.Start - 1, StoreTime: now}
		err = tx.QueryRowContext(ctx, s.q(`SELECT last_number FROM sequence_counters WHERE sequence = ? AND period = ?`),
			name, st.Period).Scan(&st.LastNumber)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return sequence.Status{}, fmt.Errorf("%s: status of %q: %w", s.d.Name, name, err)
		}
		err = tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM sequence_ledger WHERE sequence = ? AND state = 'reserved' AND expires_at > ?`),
			name, s.d.TimeArg(now)).Scan(&st.Open)
		if err != nil {
			return sequence.Status{}, fmt.Errorf("%s: status of %q: %w", s.d.Name, name, err)
		}
		return st, nil
	})
}

// Prune implements sequence.Store in one transaction under the sequence
// row's lock, so prunes queue.
func (s *Store) Prune(ctx context.Context, name, before string, dryRun bool) (int64, error) {
	if !dryRun {
		// Expire first, committed whether the prune goes ahead or not.
		if _, err := s.ExpireReservations(ctx, name); err != nil {
			return 0, err
		}
	}
	return sqltx.Get(ctx, s.tx, func(tx *sql.Tx) (int64, error) {
		now, err := s.now(ctx, tx)
		if err != nil {
			return 0, err
		}
		seq, err := scanSequence(tx.QueryRowContext(ctx, s.q(`SELECT `+selectColumns+` FROM sequences WHERE name = ?`+s.d.ForUpdate), name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return 0, fmt.Errorf("%s: sequence %q: %w", s.d.Name, name, sequence.ErrNotFound)
		case err != nil:
			return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
		}
		c, err := seq.Compile()
		if err != nil {
			return 0, fmt.Errorf("%s: sequence %q as stored: %w", s.d.Name, name, err)
		}
		if err := c.CheckPrune(before, c.PeriodAt(now)); err != nil {
			return 0, err
		}
		var open int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM sequence_ledger
			WHERE sequence = ? AND period < ? AND state = 'reserved' AND expires_at > ?`), name, before, s.d.TimeArg(now)).Scan(&open); err != nil {
			return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
		}
		if open > 0 {
			return 0, fmt.Errorf("%s: prune sequence %q before %s: %d numbers are reserved and not expired: %w; confirm or void them, or wait for their expiry",
				s.d.Name, name, before, open, sequence.ErrOpenReservations)
		}
		if dryRun {
			var n int64
			if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM sequence_ledger WHERE sequence = ? AND period < ?`), name, before).Scan(&n); err != nil {
				return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
			}
			return n, nil
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM sequence_ledger WHERE sequence = ? AND period < ?`), name, before)
		if err != nil {
			return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sequences SET pruned_before = ? WHERE name = ? AND pruned_before < ?`), before, name, before); err != nil {
			return 0, fmt.Errorf("%s: prune sequence %q: %w", s.d.Name, name, err)
		}
		return n, nil
	})
}

// timeCol scans a time column whatever the driver returns for it.
type timeCol struct{ t time.Time }

func (c *timeCol) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		c.t = v.UTC()
		return nil
	case string:
		return c.parse(v)
	case []byte:
		return c.parse(string(v))
	}
	return fmt.Errorf("time column: unexpected %T", v)
}

func (c *timeCol) parse(s string) error {
	// SQLite's text, and RFC 3339.
	for _, layout := range [...]string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			c.t = t.UTC()
			return nil
		}
	}
	return fmt.Errorf("time column: cannot read %q", s)
}

// nullTimeCol is a timeCol that may be NULL (the zero time).
type nullTimeCol struct{ timeCol }

func (c *nullTimeCol) Scan(v any) error {
	if v == nil {
		c.t = time.Time{}
		return nil
	}
	return c.timeCol.Scan(v)
}
