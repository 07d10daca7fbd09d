package app

import (
	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/httpapi/statuspage"
)

// sequenceKeeper is a store that keeps sequences: PostgreSQL, MySQL,
// SQLite and etcd.
type sequenceKeeper interface {
	Sequences() sequence.Store
}

// sequencesOf returns the core of the sequence API on store, charging the
// rate limits of svc and reporting to rec when it is not nil; nil when the
// store keeps no sequences.
func sequencesOf(store any, svc *idgen.Service, rec *audit.Recorder) *idgen.Sequences {
	sk, ok := store.(sequenceKeeper)
	if !ok {
		return nil
	}
	var seqs sequence.Store = sk.Sequences()
	if rec != nil {
		seqs = audit.WrapSequences(seqs, rec)
	}
	return idgen.NewSequences(sequence.NewService(seqs, sequence.Settings{}), svc)
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
