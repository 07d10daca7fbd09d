package mysql

import (
	"database/sql"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqltx"
)

// sequenceDialect is MySQL's to the sequence store; times are UTC.
var sequenceDialect = seqsql.Dialect{
	Name:          "mysql",
	Now:           "UTC_TIMESTAMP(6)",
	TimeArg:       func(t time.Time) any { return t.UTC() },
	InsertCounter: `INSERT IGNORE INTO sequence_counters (sequence, period, last_number, updated_at) VALUES (?, ?, ?, ?)`,
	ForUpdate:     " FOR UPDATE",
	Duplicate:     duplicateName,
}

// newSequences returns the sequence store in READ COMMITTED transactions,
// retried on deadlocks and lock wait timeouts (the counter row queues).
func (s *Store) newSequences() *seqsql.Store {
	tx := sqltx.New(sqltx.DB(s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}),
		sqltx.Settings{Name: "mysql", Retryable: retryable})
	return seqsql.New(sequenceDialect, s.db, tx)
}

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return s.seq }

// ShiftTime moves the sequence calls' database time by d (a test seam).
func (s *Store) ShiftTime(d time.Duration) { s.seq.ShiftTime(d) }
