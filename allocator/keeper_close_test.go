package allocator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
)

// remoteBlocks stands for a lease store reached over a network (the lease
// API): each heartbeat takes delay on its way, and one cancelled before it
// arrived reaches nothing. It adds up the blocks of IDs that arrived.
type remoteBlocks struct {
	allocator.LeaseStore
	delay   time.Duration
	started chan struct{} // a heartbeat is on its way

	mu      sync.Mutex
	arrived int64
}

func (r *remoteBlocks) add(b allocator.Block) {
	r.mu.Lock()
	r.arrived += b.Count
	r.mu.Unlock()
}

func (r *remoteBlocks) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	select {
	case r.started <- struct{}{}:
	default:
	}
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
		return allocator.Lease{}, time.Time{}, ctx.Err()
	}
	r.add(req.Block)
	return r.LeaseStore.Heartbeat(ctx, req)
}

func (r *remoteBlocks) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	r.add(req.Block)
	return r.LeaseStore.Release(ctx, req)
}

// TestCloseLetsAHeartbeatInFlightFinish: a keeper closed while a
// heartbeat is on its way lets it arrive, so that the block of IDs it
// reports is not lost; with its release, the blocks that reached the
// store add up to every ID the keeper issued. (Close used to cancel it:
// TestChaosAuditOutage saw a generator's block of 9,600 IDs go missing.)
func TestCloseLetsAHeartbeatInFlightFinish(t *testing.T) {
	store := &remoteBlocks{LeaseStore: testserver.OpenStore(t, "sqlite"), delay: 300 * time.Millisecond, started: make(chan struct{}, 1)}
	k, err := allocator.NewKeeper(store, allocator.KeeperSettings{Holder: "closing", WorkerIDs: pool(0, 0),
		TTL: 3 * time.Second, Heartbeat: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); k.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", k.Ready())
		}
	}
	var issued int64
	for range 3 {
		select { // forget a heartbeat that started before these IDs
		case <-store.started:
		default:
		}
		for range 1000 {
			if _, err := k.Next(); err != nil {
				t.Fatal(err)
			}
			issued++
		}
		<-store.started // the next heartbeat carries them
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.arrived != issued {
		t.Errorf("blocks of %d IDs reached the store, want the %d issued", store.arrived, issued)
	}
}
