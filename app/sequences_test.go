package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// gathered returns the value of the counter name in a's metrics.
func gathered(t *testing.T, a *app.App, name string) float64 {
	t.Helper()
	mfs, err := a.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSequenceSweepExpiresWithoutARead: a node marks expired the numbers
// reserved past their expiry (at the store's time, moved by the test)
// with no one reading the ledger, and stops its sweep at Close.
func TestSequenceSweepExpiresWithoutARead(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	seqs := store.(interface{ Sequences() sequence.Store }).Sequences()
	ctx := context.Background()
	if _, err := seqs.CreateSequence(ctx, sequence.Sequence{Name: "inv", Format: "INV-{seq:04}", TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	rs, err := seqs.Reserve(ctx, "inv", []sequence.Request{{ID: "a", Count: 2, Caller: "shop"}, {ID: "b", Count: 1, Caller: "shop"}, {ID: "c", Count: 1, Caller: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seqs.Settle(ctx, "inv", rs[2].ID, "shop", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, app.Config{Store: store, Listen: "127.0.0.1:0", SequenceExpiryInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = a.Close(ctx)
		}
	}()
	if got := gathered(t, a, "idgen_sequence_expired_total"); got != 0 {
		t.Errorf("before the expiry: %v numbers expired, want 0", got)
	}
	store.(sequence.TimeShifter).ShiftTime(11 * time.Second)
	testkit.WaitFor(t, 10*time.Second, "the node's sweep to expire the 3 numbers", func() bool {
		return gathered(t, a, "idgen_sequence_expired_total") == 3
	})
	if got := gathered(t, a, "idgen_sequence_sweep_errors_total"); got != 0 {
		t.Errorf("sweep errors: got %v, want 0", got)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	// The sweep did it: nothing is left for a read of the ledger to expire.
	if n, err := seqs.ExpireReservations(ctx, "inv"); err != nil || n != 0 {
		t.Errorf("after the sweep: ExpireReservations got %d, %v; want 0 left", n, err)
	}
	entries, err := seqs.Ledger(ctx, sequence.LedgerQuery{Sequence: "inv"})
	if err != nil {
		t.Fatal(err)
	}
	want := []sequence.State{sequence.Expired, sequence.Expired, sequence.Expired, sequence.Confirmed}
	if len(entries) != len(want) {
		t.Fatalf("ledger: %d rows, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		if e.State != want[i] || (e.State == sequence.Expired && !e.SettledAt.Equal(e.ExpiresAt)) {
			t.Errorf("row %d: got %s settled at %v, want %s (expired at its expiry %v)", i, e.State, e.SettledAt, want[i], e.ExpiresAt)
		}
	}
}

// TestSequenceExpiryIntervalRefused: a negative interval is refused.
func TestSequenceExpiryIntervalRefused(t *testing.T) {
	err := app.Config{Store: testserver.OpenStore(t, "sqlite"), SequenceExpiryInterval: -time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Config.SequenceExpiryInterval") {
		t.Errorf("got %v, want an error naming Config.SequenceExpiryInterval", err)
	}
}
