package audit_test

import (
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/teststore"
)

// TestSequencesReachTheTrail: reservations, a confirm and a void on a
// SQLite store wrapped by WrapSequences each give one event, with the
// sequence, the numbers, the caller and the request ID; a refused void
// gives none.
func TestSequencesReachTheTrail(t *testing.T) {
	keeper, ok := teststore.Open(t, "sqlite").(interface{ Sequences() sequence.Store })
	if !ok {
		t.Fatal("the SQLite store keeps no sequences")
	}
	sink := newFakeSink()
	rec, err := audit.New(sink, audit.RecorderSettings{FlushInterval: time.Millisecond, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	svc := sequence.NewService(audit.WrapSequences(keeper.Sequences(), rec), sequence.Settings{})
	ctx := t.Context()
	if _, err := svc.Create(ctx, sequence.Sequence{Name: "inv", Format: "INV-{seq:04}"}); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Reserve(ctx, "inv", 3, "alice", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Reserve(ctx, "inv", 1, "bob", "req-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Confirm(ctx, "inv", a.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Void(ctx, "inv", b.ID, "alice"); err == nil {
		t.Fatal("alice voided bob's reservation")
	}
	if _, err := svc.Void(ctx, "inv", b.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}

	type key struct {
		kind        audit.Kind
		owner       string
		first, last int64
	}
	got := map[key]int{}
	for _, ev := range sink.events() {
		if ev.Namespace != "inv" {
			t.Errorf("event %+v: got namespace %q, want inv", ev, ev.Namespace)
		}
		got[key{ev.Kind, ev.Owner, ev.First, ev.Last}]++
	}
	want := map[key]int{
		{audit.KindSequenceReserve, "alice", 1, 3}: 1,
		{audit.KindSequenceReserve, "bob", 4, 4}:   1,
		{audit.KindSequenceConfirm, "alice", 1, 3}: 1,
		{audit.KindSequenceVoid, "bob", 4, 4}:      1,
	}
	if len(got) != len(want) {
		t.Errorf("got events %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%+v: got %d events, want %d (all: %v)", k, got[k], n, got)
		}
	}
}
