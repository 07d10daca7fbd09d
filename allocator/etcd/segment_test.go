package etcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

// TestFetchConflictsRetried has two stores on one prefix (two idgen nodes)
// fetch from one namespace at once: their compare-and-swaps collide, are
// retried, and every range is handed out once, the ranges adjacent.
func TestFetchConflictsRetried(t *testing.T) {
	const (
		rounds    = 5
		stores    = 2
		perStore  = 4
		perWorker = 25
	)
	for round := 1; round <= rounds; round++ {
		a, dsn := openTestDSN(t)
		nodes := []*Store{a}
		for range stores - 1 {
			nodes = append(nodes, openDSN(t, dsn))
		}
		if _, err := a.CreateNamespace(t.Context(), allocator.Namespace{Name: "hot", Step: 10, MinStep: 1, MaxStep: 100,
			Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
			t.Fatalf("CreateNamespace: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var (
			mu   sync.Mutex
			segs []allocator.Segment
			errs []error
			wg   sync.WaitGroup
		)
		for i, s := range nodes {
			for w := range perStore {
				wg.Go(func() {
					for j := range perWorker {
						seg, err := s.FetchSegment(ctx, "hot", int64(1+(w+j)%3))
						mu.Lock()
						if err != nil {
							errs = append(errs, fmt.Errorf("store %d worker %d fetch %d: %w", i, w, j, err))
							cancel()
						} else {
							segs = append(segs, seg)
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				})
			}
		}
		wg.Wait()
		cancel()
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		slices.SortFunc(segs, func(x, y allocator.Segment) int { return cmp.Compare(x.First, y.First) })
		next := int64(1)
		for i, seg := range segs {
			if seg.First != next {
				t.Fatalf("range %d: [%d, %d], want it to start at %d (overlap or gap)", i, seg.First, seg.Last, next)
			}
			if seg.Namespace.Version != int64(i+1) || seg.Namespace.MaxID != seg.Last {
				t.Errorf("range %d: read back version %d max_id %d, want %d and %d", i, seg.Namespace.Version, seg.Namespace.MaxID, i+1, seg.Last)
			}
			next = seg.Last + 1
		}
		var conflicts int64
		for _, s := range nodes {
			conflicts += s.SerializationRetries()
		}
		if conflicts > 0 {
			t.Logf("round %d: %d fetches, %d conflicts retried", round, len(segs), conflicts)
			return
		}
	}
	t.Errorf("no conflict in %d rounds of two stores fetching from one namespace, want some", rounds)
}

// TestFetchFromStaleSnapshot checks that a fetch starting from the record
// its store's previous fetch left, after another node fetched and an
// update changed the record, still hands out the next range and no other,
// and retries at once rather than after a backoff.
func TestFetchFromStaleSnapshot(t *testing.T) {
	ctx := t.Context()
	a, dsn := openTestDSN(t)
	b := openDSN(t, dsn)
	if _, err := a.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeStrict, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	fetch := func(s *Store, n int64) allocator.Segment {
		t.Helper()
		seg, err := s.FetchSegment(ctx, "orders", n)
		if err != nil {
			t.Fatalf("FetchSegment: %v", err)
		}
		return seg
	}
	want := func(seg allocator.Segment, first, last, version int64) {
		t.Helper()
		if seg.First != first || seg.Last != last || seg.Namespace.Version != version {
			t.Errorf("got [%d, %d] version %d, want [%d, %d] version %d", seg.First, seg.Last, seg.Namespace.Version, first, last, version)
		}
	}
	want(fetch(a, 5), 1, 5, 1)
	want(fetch(b, 5), 6, 10, 2)
	if _, err := b.UpdateNamespace(ctx, "orders", allocator.NamespaceUpdate{Description: new("changed")}); err != nil {
		t.Fatalf("UpdateNamespace: %v", err)
	}
	seg := fetch(a, 5)
	want(seg, 11, 15, 3)
	if seg.Namespace.Description != "changed" {
		t.Errorf("fetch returned description %q, want the updated \"changed\"", seg.Namespace.Description)
	}
	if n := a.SerializationRetries(); n != 0 {
		t.Errorf("a stale snapshot counted %d conflicts, want 0 (retried at once)", n)
	}
	if ok, err := a.ReturnTail(ctx, "orders", 15, 3, 12); !ok || err != nil {
		t.Fatalf("ReturnTail: %v, %v", ok, err)
	}
	want(fetch(a, 1), 13, 13, 5)
}

// TestFetchAfterTailReturnAtLimit checks that a stale snapshot that says
// the namespace is exhausted is not believed: a store that fetched up to
// the limit and then gave the tail back can fetch the tail again.
func TestFetchAfterTailReturnAtLimit(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{Name: "orders", MaxIDLimit: 25, Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackSnowflake}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	seg, err := s.FetchSegment(ctx, "orders", 25)
	if err != nil || seg.Last != 25 {
		t.Fatalf("FetchSegment(25): got %+v, %v; want [1, 25]", seg, err)
	}
	if ok, err := s.ReturnTail(ctx, "orders", 25, 1, 20); !ok || err != nil {
		t.Fatalf("ReturnTail(25, 1, 20): got %v, %v; want true, nil", ok, err)
	}
	seg, err = s.FetchSegment(ctx, "orders", 5)
	if err != nil || seg.First != 21 || seg.Last != 25 {
		t.Errorf("FetchSegment(5) after the tail return: got [%d, %d], %v; want [21, 25]", seg.First, seg.Last, err)
	}
}
