package sqlite

import (
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/seqsql"
)

// sequenceDialect is SQLite's to the sequence store: times in timeLayout.
var sequenceDialect = seqsql.Dialect{
	Name:          "sqlite",
	Now:           sqlNow,
	TimeArg:       func(t time.Time) any { return t.UTC().Format(timeLayout) },
	InsertCounter: `INSERT OR IGNORE INTO sequence_counters (sequence, period, last_number, updated_at) VALUES (?, ?, ?, ?)`,
	Duplicate:     duplicateName,
}

// newSequences returns the sequence store on the one connection.
func (s *Store) newSequences() *seqsql.Store { return seqsql.New(sequenceDialect, s.db, s.tx) }

// Sequences returns the store's sequences and ledger (docs/sequences.md).
func (s *Store) Sequences() sequence.Store { return s.seq }

// ShiftTime moves the sequence calls' database time by d (a test seam).
func (s *Store) ShiftTime(d time.Duration) { s.seq.ShiftTime(d) }
