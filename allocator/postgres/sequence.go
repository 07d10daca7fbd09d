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

// newSequences returns the sequence store on pool's database/sql view. Its
// transactions are READ COMMITTED: a reservation's UPDATE of the period's
// counter waits for the row lock and then advances the row as committed,
// where SERIALIZABLE would abort every concurrent one; the ledger's
// primary key is the second guard against a number written twice.
func (s *Store) newSequences() *seqsql.Store {
	db := stdlib.OpenDBFromPool(s.pool)
	tx := sqltx.New(sqltx.DB(db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}),
		sqltx.Settings{Name: "postgres", Retryable: retryable})
	return seqsql.New(sequenceDialect, db, tx)
}

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return s.seq }

// ShiftTime moves the time the store's sequence calls read from the
// database by d: a seam for tests that cross period boundaries.
func (s *Store) ShiftTime(d time.Duration) { s.seq.ShiftTime(d) }
