package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/stores"
)

const sequencesHelp = `List the business-number sequences, create one, read or export a sequence's
ledger, or void a reservation (docs/sequences.md). A sequence hands out
numbers such as INV-2026-000123, restarted every year, month or day in a
time zone by the database's time; every number is a row of its ledger.
Callers reserve, confirm and void through the API (POST /v1/sequences/...).

Flags of create:
  --format F           literal text, date fields ({yyyy} {yy} {MM} {dd}, or run
                       together: {yyMMdd}) and one counter field ({seq}, or {seq:0N}
                       zero-padded to N digits), e.g. INV-{yyyy}-{seq:06} (required)
  --reset R            none, yearly, monthly or daily (default none)
  --time-zone Z        the IANA zone periods and dates are read in (default UTC)
  --start N            first number of each period (default 1)
  --ttl D              how long a reservation waits for its confirmation or void
                       (default 5m, 1s to 24h)
  --description TEXT   free text shown in listings

Flags of ledger and export (filters):
  --period P           only this period: 2026, 2026-11, 2026-11-27, or all
  --state S            only reserved, confirmed, voided or expired numbers
  --reservation ID     only this reservation's numbers
  --caller NAME        only numbers reserved by this token name
  --limit N            ledger only: rows to print (default 100, at most 1000)
  --after P/N          ledger only: start after period P, number N (the last line's)

prune NAME --before PERIOD deletes the ledger rows of the sequence's periods
before PERIOD (2026, 2026-11 or 2026-11-27, as the sequence resets): the
operator's retention rule; idgen deletes nothing by itself. Only closed
periods go: PERIOD may be the current period, not a later one. It first marks
expired what has expired, and refuses, changing nothing, while numbers of
those periods are still reserved and not expired, and for a sequence that
never resets. The sequence records how far it was pruned: list shows it, and
ledger and export of a pruned period say so. --dry-run prints how many rows
would go and deletes none.

void RESERVATION takes --caller NAME, the token name that made the reservation
(only its own caller may void a reservation; the CLI voids on its behalf and
logs that you did, cli:<user>, to standard error).

Flags of every command (environment variable in brackets):
  --dsn DSN            database [IDGEN_DSN] (default sqlite:idgen.db)
`

func runSequences(ctx context.Context, args []string, e env) error {
	return runSub(ctx, "sequences", args, e, []subcommand{
		{"list", sequencesList},
		{"create", sequencesCreate},
		{"ledger", sequencesLedger},
		{"export", sequencesExport},
		{"void", sequencesVoid},
		{"prune", sequencesPrune},
	})
}

// sequenceStore returns store's sequences, or an error if it keeps none.
func sequenceStore(store stores.Store) (sequence.Store, error) {
	sk, ok := store.(interface{ Sequences() sequence.Store })
	if !ok {
		return nil, errors.New("this database keeps no sequences")
	}
	return sk.Sequences(), nil
}

func sequencesList(ctx context.Context, args []string, e env) error {
	const cmd = "sequences list"
	f := newAdminFlags(cmd)
	return adminRun(ctx, f, args, e, flagsOnly(cmd, "list takes flags only"), func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		all, err := seqs.ListSequences(ctx)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("list sequences: %w", err))
		}
		tw := newTable(e.stdout, "NAME\tFORMAT\tRESET\tTIME ZONE\tSTART\tTTL\tPERIOD\tLAST\tOPEN\tPRUNED\tDESCRIPTION")
		for _, seq := range all {
			st, err := seqs.SequenceStatus(ctx, seq.Name)
			if err != nil {
				return fmt.Errorf("status of sequence %q: %w", seq.Name, err)
			}
			pruned := "-"
			if seq.PrunedBefore != "" {
				pruned = "before " + seq.PrunedBefore
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\t%s\t%d\t%d\t%s\t%s\n", seq.Name, seq.Format, seq.Reset, seq.Zone,
				seq.Start, seq.TTL, st.Period, st.LastNumber, st.Open, pruned, seq.Description)
		}
		return tw.Flush()
	})
}

func sequencesCreate(ctx context.Context, args []string, e env) error {
	const cmd = "sequences create"
	f := newAdminFlags(cmd)
	fs := f.fs
	format := fs.String("format", "", "")
	reset := fs.String("reset", string(sequence.ResetNone), "")
	zone := fs.String("time-zone", "UTC", "")
	start := fs.Int64("start", sequence.DefaultStart, "")
	ttl := fs.Duration("ttl", sequence.DefaultTTL, "")
	description := fs.String("description", "", "")
	for _, name := range []string{"format", "reset", "time-zone", "start", "ttl", "description"} {
		f.noEnv[name] = true // settings of one sequence, not of the environment
	}
	var seq sequence.Sequence
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "sequence NAME", "create takes one NAME"); err != nil {
			return err
		}
		if *format == "" {
			return usagef(cmd, "missing --format, e.g. --format 'INV-{yyyy}-{seq:06}'")
		}
		seq = sequence.Sequence{Name: pos[0], Format: *format, Reset: sequence.Reset(*reset), Zone: *zone,
			Start: *start, StartZero: *start == 0, TTL: *ttl, Description: *description}
		if _, err := seq.Compile(); err != nil {
			return usagef(cmd, "%v", err)
		}
		return nil
	}, func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		got, err := seqs.CreateSequence(ctx, seq)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("create sequence %q: %w", seq.Name, err))
		}
		fmt.Fprintf(e.stdout, "created sequence %s: format %s, reset %s in %s, first number %d, ttl %v\n",
			got.Name, got.Format, got.Reset, got.Zone, got.Start, got.TTL)
		return nil
	})
}

// ledgerFlags are the filters of ledger and export.
type ledgerFlags struct {
	period, state, reservation, caller *string
}

func newLedgerFlags(f *settings) ledgerFlags {
	l := ledgerFlags{
		period:      f.fs.String("period", "", ""),
		state:       f.fs.String("state", "", ""),
		reservation: f.fs.String("reservation", "", ""),
		caller:      f.fs.String("caller", "", ""),
	}
	for _, name := range []string{"period", "state", "reservation", "caller"} {
		f.noEnv[name] = true
	}
	return l
}

// query returns the ledger query of the filters on sequence name.
func (l ledgerFlags) query(cmd, name string) (sequence.LedgerQuery, error) {
	q := sequence.LedgerQuery{Sequence: name, Period: *l.period, ReservationID: *l.reservation, Caller: *l.caller}
	if *l.state != "" {
		st, err := sequence.ParseState(*l.state)
		if err != nil {
			return q, usagef(cmd, "invalid --state %q: want reserved, confirmed, voided or expired", *l.state)
		}
		q.State = st
	}
	if err := validName(cmd, name); err != nil {
		return q, err
	}
	return q, nil
}

// validName refuses a malformed sequence NAME.
func validName(cmd, name string) error {
	if _, err := (sequence.Sequence{Name: name, Format: "{seq}"}).Compile(); err != nil {
		return usagef(cmd, "invalid NAME %q: want 1 to 64 characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit", name)
	}
	return nil
}

func sequencesLedger(ctx context.Context, args []string, e env) error {
	const cmd = "sequences ledger"
	f := newAdminFlags(cmd)
	lf := newLedgerFlags(f)
	limit := f.fs.Int("limit", sequence.DefaultLedgerLimit, "")
	after := f.fs.String("after", "", "")
	f.noEnv["limit"], f.noEnv["after"] = true, true
	var q sequence.LedgerQuery
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "sequence NAME", "ledger takes one NAME"); err != nil {
			return err
		}
		var err error
		if q, err = lf.query(cmd, pos[0]); err != nil {
			return err
		}
		if *limit < 1 || *limit > sequence.MaxLedgerLimit {
			return usagef(cmd, "invalid --limit %d: want 1 to %d", *limit, sequence.MaxLedgerLimit)
		}
		q.Limit = *limit
		if *after != "" {
			p, n, ok := cutAfter(*after)
			if !ok {
				return usagef(cmd, "invalid --after %q: want PERIOD/NUMBER, e.g. 2026/120", *after)
			}
			q.AfterPeriod, q.AfterNumber = p, n
		}
		return nil
	}, func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		seq, err := seqs.GetSequence(ctx, q.Sequence)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("ledger of sequence %q: %w", q.Sequence, err))
		}
		if q.Period != "" && seq.Pruned(q.Period) {
			fmt.Fprintf(e.stdout, "period %s of sequence %s is pruned: its ledger was deleted (idgen sequences prune --before %s)\n",
				q.Period, q.Sequence, seq.PrunedBefore)
			return nil
		}
		rows, err := seqs.Ledger(ctx, q)
		if err != nil {
			return fmt.Errorf("ledger of sequence %q: %w", q.Sequence, err)
		}
		tw := newTable(e.stdout, "PERIOD\tNUMBER\tFORMATTED\tSTATE\tRESERVATION\tCALLER\tRESERVED\tEXPIRES\tSETTLED")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Period, r.Number, r.Formatted, r.State, r.ReservationID,
				dash(r.Caller), timeText(r.ReservedAt), timeText(r.ExpiresAt), timeText(r.SettledAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rows) == q.Limit {
			last := rows[len(rows)-1]
			fmt.Fprintf(e.stdout, "(more: --after %s/%d)\n", last.Period, last.Number)
		}
		return nil
	})
}

// cutAfter parses PERIOD/NUMBER.
func cutAfter(s string) (string, int64, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			n, err := strconv.ParseInt(s[i+1:], 10, 64)
			return s[:i], n, err == nil && i > 0
		}
	}
	return "", 0, false
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxExportPages bounds one export: 10,000 pages of 1,000 rows.
const maxExportPages = 10000

func sequencesExport(ctx context.Context, args []string, e env) error {
	const cmd = "sequences export"
	f := newAdminFlags(cmd)
	lf := newLedgerFlags(f)
	var q sequence.LedgerQuery
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "sequence NAME", "export takes one NAME"); err != nil {
			return err
		}
		var err error
		q, err = lf.query(cmd, pos[0])
		return err
	}, func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		seq, err := seqs.GetSequence(ctx, q.Sequence)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("export sequence %q: %w", q.Sequence, err))
		}
		if q.Period != "" && seq.Pruned(q.Period) {
			return fmt.Errorf("export sequence %q: period %s is pruned: its ledger was deleted (idgen sequences prune --before %s)",
				q.Sequence, q.Period, seq.PrunedBefore)
		}
		w := csv.NewWriter(e.stdout)
		if err := w.Write([]string{"sequence", "period", "number", "formatted", "state", "reservation_id", "caller",
			"request_id", "reserved_at", "expires_at", "settled_at"}); err != nil {
			return err
		}
		q.Limit = sequence.MaxLedgerLimit
		for range maxExportPages {
			rows, err := seqs.Ledger(ctx, q)
			if err != nil {
				return fmt.Errorf("export sequence %q: %w", q.Sequence, err)
			}
			for _, r := range rows {
				settled := ""
				if !r.SettledAt.IsZero() {
					settled = r.SettledAt.UTC().Format(time.RFC3339Nano)
				}
				if err := w.Write([]string{r.Sequence, r.Period, strconv.FormatInt(r.Number, 10), r.Formatted, string(r.State),
					r.ReservationID, r.Caller, r.RequestID, r.ReservedAt.UTC().Format(time.RFC3339Nano),
					r.ExpiresAt.UTC().Format(time.RFC3339Nano), settled}); err != nil {
					return err
				}
			}
			if len(rows) < q.Limit {
				w.Flush()
				return w.Error()
			}
			last := rows[len(rows)-1]
			q.AfterPeriod, q.AfterNumber = last.Period, last.Number
		}
		w.Flush()
		return fmt.Errorf("export sequence %q: more than %d rows; export a period at a time (--period)", q.Sequence, maxExportPages*sequence.MaxLedgerLimit)
	})
}

func sequencesVoid(ctx context.Context, args []string, e env) error {
	const cmd = "sequences void"
	f := newAdminFlags(cmd)
	caller := f.fs.String("caller", "", "")
	f.noEnv["caller"] = true
	var name, id string
	return adminRun(ctx, f, args, e, func(pos []string) error {
		switch {
		case len(pos) < 2:
			return usagef(cmd, "want NAME RESERVATION: the sequence and the reservation ID to void")
		case len(pos) > 2:
			return usagef(cmd, "unexpected argument %q (void takes NAME RESERVATION)", pos[2])
		case !f.isSet("caller"):
			return usagef(cmd, "missing --caller: the token name that made the reservation (\"\" on a node without tokens)")
		}
		name, id = pos[0], pos[1]
		return validName(cmd, name)
	}, func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		r, err := seqs.Settle(ctx, name, id, *caller, sequence.Voided)
		if err != nil {
			return withSchemaHint(ctx, store, fmt.Errorf("void reservation %s of sequence %q: %w", id, name, err))
		}
		audit := slog.New(slog.NewTextHandler(e.stderr, nil))
		audit.Info("reservation voided", "sequence", name, "reservation", id, "for", *caller,
			"caller", cliOwner(e), "request_id", cliRequestID(), "host", hostname())
		fmt.Fprintf(e.stdout, "voided reservation %s of sequence %s: %d numbers of period %s from %s\n",
			r.ID, name, r.Count, r.Period, r.Formatted[0])
		return nil
	})
}

func sequencesPrune(ctx context.Context, args []string, e env) error {
	const cmd = "sequences prune"
	f := newAdminFlags(cmd)
	before := f.fs.String("before", "", "")
	dryRun := f.fs.Bool("dry-run", false, "")
	f.noEnv["before"], f.noEnv["dry-run"] = true, true
	var name string
	return adminRun(ctx, f, args, e, func(pos []string) error {
		if err := oneArg(cmd, pos, "sequence NAME", "prune takes one NAME"); err != nil {
			return err
		}
		if *before == "" {
			return usagef(cmd, "missing --before PERIOD: the ledger of the periods before it is deleted, e.g. --before 2026")
		}
		name = pos[0]
		return validName(cmd, name)
	}, func(store stores.Store) error {
		seqs, err := sequenceStore(store)
		if err != nil {
			return err
		}
		n, err := seqs.Prune(ctx, name, *before, *dryRun)
		switch {
		case errors.Is(err, sequence.ErrNotFound), errors.Is(err, sequence.ErrInvalid), errors.Is(err, sequence.ErrOpenReservations):
			// The operator's to change: nothing was deleted.
			return usagef(cmd, "prune sequence %q: %v; nothing deleted", name, err)
		case err != nil:
			return withSchemaHint(ctx, store, fmt.Errorf("prune sequence %q: %w", name, err))
		}
		if *dryRun {
			fmt.Fprintf(e.stdout, "would prune %d ledger rows of sequence %s: periods before %s (dry run: nothing deleted)\n", n, name, *before)
			return nil
		}
		audit := slog.New(slog.NewTextHandler(e.stderr, nil))
		audit.Info("sequence ledger pruned", "sequence", name, "before", *before, "rows", n,
			"caller", cliOwner(e), "request_id", cliRequestID(), "host", hostname())
		fmt.Fprintf(e.stdout, "pruned %d ledger rows of sequence %s: periods before %s\n", n, name, *before)
		return nil
	})
}
