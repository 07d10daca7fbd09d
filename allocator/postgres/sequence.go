package postgres

import (
	"database/sql"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqltx"
)

// sequenceDialect is PostgreSQL's to the sequence store.
var sequenceDialect = seqsql.Dialect{
	Name:    "postgres",
	Dollar:  true,
	Now:     "now()",
	TimeArg: func(t time.Time) any { return t },
	InsertCounter: `INSERT INTO sequence_counters (sequence, period, last_number, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (sequence, period) DO NOTHING`,
	ForUpdate: " FOR UPDATE",
	Duplicate: duplicateName,
}

// newSequences returns the sequence store on pool's database/sql view.
// READ COMMITTED: a reservation waits for the counter's row lock instead
// of aborting as SERIALIZABLE would; the ledger's primary key guards
// against a number written twice.
func (s *Store) newSequences() *seqsql.Store {
	db := stdlib.OpenDBFromPool(s.pool)
	tx := sqltx.New(sqltx.DB(db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}),
		sqltx.Settings{Name: "postgres", Retryable: retryable})
	return seqsql.New(sequenceDialect, db, tx)
}

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return s.seq }

// ShiftTime moves the time sequence calls read by d (tests crossing
// periods).
func (s *Store) ShiftTime(d time.Duration) { s.seq.ShiftTime(d) }
