package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestSequencesReachTheTrail: reservations, a confirm and a void on a
// SQLite store wrapped by WrapSequences each give one event, with the
// sequence, the numbers, the caller and the request ID; a refused void
// gives none.
func TestSequencesReachTheTrail(t *testing.T) {
	_, seqs, rec, sink := auditedSequences(t)
	svc := sequence.NewService(seqs, sequence.Settings{})
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

// TestSequencePruneReachesTheTrail: a prune through the wrapper gives one
// event with the numbers deleted; a dry run and a refused prune give none.
func TestSequencePruneReachesTheTrail(t *testing.T) {
	keeper, seqs, rec, sink := auditedSequences(t)
	ctx := t.Context()
	if _, err := seqs.CreateSequence(ctx, sequence.Sequence{Name: "m", Format: "{yyyyMM}{seq:04}", Reset: sequence.ResetMonthly, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	keeper.ShiftTime(-62 * 24 * time.Hour)
	if _, err := seqs.Reserve(ctx, "m", []sequence.Request{{ID: "r", Count: 2, Caller: "shop"}}); err != nil {
		t.Fatal(err)
	}
	keeper.ShiftTime(62 * 24 * time.Hour)
	st, err := seqs.SequenceStatus(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := seqs.Prune(ctx, "m", st.Period, true); err != nil || n != 2 {
		t.Fatalf("dry run: got %d, %v; want 2", n, err)
	}
	if _, err := seqs.Prune(ctx, "m", "2999-01", false); err == nil {
		t.Fatal("a prune of a later period was not refused")
	}
	if n, err := seqs.Prune(ctx, "m", st.Period, false); err != nil || n != 2 {
		t.Fatalf("prune: got %d, %v; want 2", n, err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var prunes []audit.Event
	for _, ev := range sink.events() {
		if ev.Kind == audit.KindSequencePrune {
			prunes = append(prunes, ev)
		}
	}
	if len(prunes) != 1 || prunes[0].Namespace != "m" || prunes[0].Count != 2 || !strings.Contains(prunes[0].Detail, "before "+st.Period) {
		t.Errorf("prune events: got %+v, want one of m with 2 numbers, before %s", prunes, st.Period)
	}
}

// auditedSequences returns the sequences of a SQLite store (and the store,
// to move its time) wrapped by a started recorder of node n1 that sends to
// sink.
func auditedSequences(t *testing.T) (sequence.TimeShifter, sequence.Store, *audit.Recorder, *fakeSink) {
	t.Helper()
	keeper, ok := testserver.OpenStore(t, "sqlite").(interface {
		Sequences() sequence.Store
		sequence.TimeShifter
	})
	if !ok {
		t.Fatal("the SQLite store keeps no sequences")
	}
	sink := newFakeSink()
	rec, err := audit.New(sink, audit.RecorderSettings{FlushInterval: time.Millisecond, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	return keeper, audit.WrapSequences(keeper.Sequences(), rec), rec, sink
}
