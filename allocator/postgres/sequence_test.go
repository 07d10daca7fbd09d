package postgres

import (
	"testing"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/allocator/storetest"
)

func TestSequences(t *testing.T) {
	storetest.RunSequences(t, func(t *testing.T) storetest.SequenceStore {
		s := openTest(t)
		return struct {
			sequence.Store
			sequence.TimeShifter
		}{s.Sequences(), s}
	})
}
