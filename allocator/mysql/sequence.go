package mysql

import (
	"database/sql"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqltx"
)

// sequenceDialect is MySQL's to the sequence store. Times are UTC
// (UTC_TIMESTAMP(6)), whatever the server's zone.
var sequenceDialect = seqsql.Dialect{
	Name:          "mysql",
	Now:           "UTC_TIMESTAMP(6)",
	TimeArg:       func(t time.Time) any { return t.UTC() },
	InsertCounter: `INSERT IGNORE INTO sequence_counters (sequence, period, last_number, updated_at) VALUES (?, ?, ?, ?)`,
	ForUpdate:     " FOR UPDATE",
	Duplicate:     duplicateName,
}

// newSequences returns the sequence store on the store's pool, in READ
// COMMITTED transactions retried on deadlocks and lock wait timeouts: a
// reservation's UPDATE of the period's counter queues on the row lock.
func (s *Store) newSequences() *seqsql.Store {
	tx := sqltx.New(sqltx.DB(s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}),
		sqltx.Settings{Name: "mysql", Retryable: retryable})
	return seqsql.New(sequenceDialect, s.db, tx)
}

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return s.seq }

// ShiftTime moves the time the store's sequence calls read from the
// database by d: a seam for tests that cross period boundaries.
func (s *Store) ShiftTime(d time.Duration) { s.seq.ShiftTime(d) }
