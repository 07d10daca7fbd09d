package etcd

import (
	"fmt"
	"os"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/storetest"
	"github.com/idgen-project/idgen/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.EtcdMain(m)) }

// openTest opens a store on a fresh key prefix of the test cluster, closed
// when t ends.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, _ := openTestDSN(t)
	return s
}

// openTestDSN is openTest that also returns the DSN, to open more stores on
// the same prefix.
func openTestDSN(t testing.TB) (*Store, string) {
	t.Helper()
	dsn := testkit.EtcdDSN(t)
	return openDSN(t, dsn), dsn
}

func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) allocator.Store { return openTest(t) })
}

func TestRestoreFence(t *testing.T) {
	storetest.RunRestoreFence(t, func(t *testing.T) storetest.FencedStore { return openTest(t) })
}

// TestPruneLeaseEventsInBatches prunes more events than one transaction
// deletes and one read returns.
func TestPruneLeaseEventsInBatches(t *testing.T) {
	storetest.PruneInBatches(t, openTest(t), createBatch)
}

// TestListLeaseEventsAcrossPages reads, with a filter, events spread over
// more than one read of the event keys.
func TestListLeaseEventsAcrossPages(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	const n = 2*eventPage + 10
	for i := range n {
		ev := allocator.LeaseEvent{Holder: fmt.Sprintf("h%d", i%2), Kind: allocator.EventLost, FencingVersion: int64(i)}
		if err := s.RecordLeaseEvent(ctx, ev); err != nil {
			t.Fatalf("RecordLeaseEvent: %v", err)
		}
	}
	for _, limit := range []int{n, 7} {
		var got []allocator.LeaseEvent
		for after := int64(0); ; {
			page, err := s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{AfterID: after, Limit: limit, Holder: "h1"})
			if err != nil {
				t.Fatalf("ListLeaseEvents: %v", err)
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].ID
		}
		if len(got) != n/2 {
			t.Fatalf("limit %d: got %d events of h1, want %d", limit, len(got), n/2)
		}
		for i, ev := range got {
			if ev.Holder != "h1" || ev.FencingVersion != int64(2*i+1) {
				t.Errorf("limit %d: event %d: holder %q version %d, want h1 %d", limit, i, ev.Holder, ev.FencingVersion, 2*i+1)
			}
		}
	}
}
