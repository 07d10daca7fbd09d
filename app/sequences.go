package app

import (
	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/httpapi/statuspage"
)

// sequenceKeeper is a store that keeps sequences: PostgreSQL, MySQL,
// SQLite and etcd.
type sequenceKeeper interface {
	Sequences() sequence.Store
}

// sequencesOf returns the core of the sequence API on store, charging the
// rate limits of svc; nil when the store keeps no sequences.
func sequencesOf(store any, svc *idgen.Service) *idgen.Sequences {
	sk, ok := store.(sequenceKeeper)
	if !ok {
		return nil
	}
	return idgen.NewSequences(sequence.NewService(sk.Sequences(), sequence.Settings{}), svc)
}

// sequenceReader returns the sequences of store for the status page; nil
// when it keeps none.
func sequenceReader(store any) statuspage.SequenceReader {
	sk, ok := store.(sequenceKeeper)
	if !ok {
		return nil
	}
	return sk.Sequences()
}
