package allocator

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestSegmentsStride: a namespace with stride K and offset R hands out the
// IDs n×K + R of its slots n: increasing by K within a node, every one ≡ R
// (mod K), none twice across nodes, each its own range when K > 1, in
// buffered and strict mode.
func TestSegmentsStride(t *testing.T) {
	tests := []struct {
		name           string
		stride, offset int64
		mode           Mode
	}{
		{"default", 1, 0, ModeBuffered},
		{"stride 2 offset 0", 2, 0, ModeBuffered},
		{"stride 2 offset 1", 2, 1, ModeBuffered},
		{"stride 7 offset 6", 7, 6, ModeBuffered},
		{"strict stride 3 offset 2", 3, 2, ModeStrict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeSegmentStore(Namespace{Name: "orders", Step: 50, Mode: tt.mode, Stride: tt.stride, Offset: tt.offset})
			a := newTestSegments(t, store, testSettings())
			b := newTestSegments(t, store, testSettings())
			ctx := testCtx(t)

			seen := map[int64]bool{}
			last := map[*Segments]int64{}
			for i := range 60 {
				s := a
				if i%3 == 2 {
					s = b
				}
				got := mustDraw(t, ctx, s, "orders", 1+i%9)
				if i == 0 {
					if want := 1*tt.stride + tt.offset; got.IDs[0] != want {
						t.Errorf("first ID: got %d, want %d (slot 1)", got.IDs[0], want)
					}
				}
				for j, id := range got.IDs {
					if id%tt.stride != tt.offset {
						t.Fatalf("draw %d: got ID %d ≡ %d (mod %d), want ≡ %d", i, id, id%tt.stride, tt.stride, tt.offset)
					}
					if seen[id] {
						t.Fatalf("draw %d: got ID %d twice", i, id)
					}
					seen[id] = true
					if id <= last[s] {
						t.Fatalf("draw %d: got ID %d after %d, want increasing", i, id, last[s])
					}
					if j > 0 && id-got.IDs[j-1] != tt.stride && tt.mode == ModeStrict {
						t.Fatalf("strict draw %d: got %d after %d, want a step of exactly %d", i, id, got.IDs[j-1], tt.stride)
					}
					last[s] = id
				}
				var fromRanges []int64
				for _, r := range got.Ranges {
					if tt.stride > 1 && r.First != r.Last {
						t.Fatalf("draw %d: got range %v, want one ID per range with stride %d", i, r, tt.stride)
					}
					for id := r.First; id <= r.Last; id++ {
						fromRanges = append(fromRanges, id)
					}
				}
				if len(fromRanges) != len(got.IDs) {
					t.Fatalf("draw %d: got ranges %v covering %d IDs, want the %d IDs %v", i, got.Ranges, len(fromRanges), len(got.IDs), got.IDs)
				}
				for j := range fromRanges {
					if fromRanges[j] != got.IDs[j] {
						t.Fatalf("draw %d: got ranges %v, want them to spell the IDs %v", i, got.Ranges, got.IDs)
					}
				}
			}
		})
	}
}

// TestSegmentsStrideTopOfInt64: a namespace without a max_id_limit stops
// at the last slot whose ID fits an int64 and answers ErrNamespaceExhausted
// after it, instead of overflowing.
func TestSegmentsStrideTopOfInt64(t *testing.T) {
	ns := Namespace{Name: "orders", Step: 10, Stride: 4, Offset: 3}
	top := ns.StrideCap() // slot top has ID top×4+3 <= MaxInt64
	ns.MaxID = top - 5
	store := newFakeSegmentStore(ns)
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)

	got := mustDraw(t, ctx, s, "orders", 5)
	want := []int64{(top-4)*4 + 3, (top-3)*4 + 3, (top-2)*4 + 3, (top-1)*4 + 3, top*4 + 3}
	for i := range want {
		if got.IDs[i] != want[i] || got.IDs[i] < 0 {
			t.Fatalf("IDs: got %v, want %v", got.IDs, want)
		}
	}
	if last := got.IDs[4]; last <= math.MaxInt64-4 {
		t.Errorf("last ID: got %d, want above MaxInt64-4 = %d (the next slot's ID would overflow)", last, int64(math.MaxInt64-4))
	}
	var b Batch
	if err := s.Draw(ctx, "orders", 1, &b); !errors.Is(err, ErrNamespaceExhausted) {
		t.Errorf("Draw past the last slot: got %v (IDs %v), want %v", err, b.IDs, ErrNamespaceExhausted)
	}
}

// TestSegmentsStrideFallback: the Snowflake fallback serves only when the
// Snowflake IDs of now lie above the ID of the namespace's limit
// (limit×K + R), not merely above the limit.
func TestSegmentsStrideFallback(t *testing.T) {
	const limit = 1000 // slots: the largest segment ID is 1000×4+3 = 4003
	tests := []struct {
		name     string
		smallest int64
		wantErr  error
	}{
		{"Snowflake IDs above the limit but not its ID", limit + 1, ErrUnavailable},
		{"Snowflake IDs at the limit's ID", limit*4 + 3, ErrUnavailable},
		{"Snowflake IDs just above the limit's ID", limit*4 + 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeSegmentStore(Namespace{Name: "orders", Step: 10, Fallback: FallbackSnowflake, MaxIDLimit: limit, Stride: 4, Offset: 3})
			sf := &fakeSnowflakeSource{}
			sf.set(tt.smallest+5, tt.smallest, nil)
			set := testSettings()
			set.Fallback = sf
			s := newTestSegments(t, store, set)
			ctx := testCtx(t)

			mustDrawOne(t, ctx, s, "orders")
			waitIdle(t, s, "orders")
			store.setDown(errFakeDown)
			mustDraw(t, ctx, s, "orders", 9) // the rest of the first range

			var b Batch
			err := s.Draw(ctx, "orders", 3, &b)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(b.IDs) != 0 {
					t.Fatalf("Draw: got %v with IDs %v, want %v and none", err, b.IDs, tt.wantErr)
				}
				return
			}
			if err != nil || b.Source != SourceSnowflake || b.IDs[0] != tt.smallest+5 {
				t.Fatalf("Draw: got %v, %+v; want Snowflake IDs from %d", err, b, tt.smallest+5)
			}
		})
	}
}

// TestNamespaceInterleave: IDOf, StrideCap and Limit of a namespace with
// and without a stride, and Revive refusing another interleave.
func TestNamespaceInterleave(t *testing.T) {
	tests := []struct {
		name               string
		ns                 Namespace
		slot, wantID       int64
		wantCap, wantLimit int64
	}{
		{"zero value reads as stride 1", Namespace{}, 7, 7, math.MaxInt64, math.MaxInt64},
		{"stride 2 offset 0", Namespace{Stride: 2}, 7, 14, math.MaxInt64 / 2, math.MaxInt64 / 2},
		{"stride 2 offset 1", Namespace{Stride: 2, Offset: 1}, 7, 15, (math.MaxInt64 - 1) / 2, (math.MaxInt64 - 1) / 2},
		{"limit below the cap", Namespace{Stride: 3, Offset: 1, MaxIDLimit: 50}, 1, 4, (math.MaxInt64 - 1) / 3, 50},
		{"limit above the cap", Namespace{Stride: 3, Offset: 1, MaxIDLimit: math.MaxInt64 - 1}, 1, 4, (math.MaxInt64 - 1) / 3, (math.MaxInt64 - 1) / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ns.IDOf(tt.slot); got != tt.wantID {
				t.Errorf("IDOf(%d): got %d, want %d", tt.slot, got, tt.wantID)
			}
			if got := tt.ns.StrideCap(); got != tt.wantCap {
				t.Errorf("StrideCap: got %d, want %d", got, tt.wantCap)
			}
			if got := tt.ns.Limit(); got != tt.wantLimit {
				t.Errorf("Limit: got %d, want %d", got, tt.wantLimit)
			}
			// The cap's ID fits; the next slot's would not.
			k, _ := tt.ns.Interleave()
			if id := tt.ns.IDOf(tt.ns.StrideCap()); id < 0 || id <= math.MaxInt64-k {
				t.Errorf("IDOf(StrideCap()): got %d, want from MaxInt64-%d+1 to MaxInt64", id, k)
			}
		})
	}

	tomb := Namespace{Name: "orders", MaxID: 10, Version: 4, Stride: 2, Offset: 1, DeletedAt: time.Unix(1700000000, 0).UTC()}
	for _, ns := range []Namespace{
		{Name: "orders", MaxID: 20, Stride: 1},
		{Name: "orders", MaxID: 20, Stride: 2, Offset: 0},
		{Name: "orders", MaxID: 20, Stride: 4, Offset: 1},
	} {
		if got, err := tomb.Revive(ns); !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("Revive with stride %d offset %d over stride 2 offset 1: got %+v, %v; want %v", ns.Stride, ns.Offset, got, err, ErrInvalidNamespace)
		}
	}
	if got, err := tomb.Revive(Namespace{Name: "orders", MaxID: 20, Stride: 2, Offset: 1}); err != nil || got.Version != 5 {
		t.Errorf("Revive with the same stride and offset: got %+v, %v; want version 5", got, err)
	}
}
