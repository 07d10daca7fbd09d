package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNextStaysWithinHalfAndAllOfTheBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(n int64) int64 // the jitter drawn
	}{
		{"lowest jitter", func(int64) int64 { return 0 }},
		{"highest jitter", func(n int64) int64 { return n }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(10*time.Millisecond, 70*time.Millisecond)
			b.rand = tc.pick
			bounds := []int64{10, 20, 40, 70, 70} // ms
			for i, ms := range bounds {
				bound := time.Duration(ms) * time.Millisecond
				if got := b.Bound(); got != bound {
					t.Fatalf("step %d: Bound() = %v, want %v", i, got, bound)
				}
				d := b.Next()
				if d < bound/2 || d > bound {
					t.Fatalf("step %d: Next() = %v, want within [%v, %v]", i, d, bound/2, bound)
				}
			}
			b.Reset()
			if got := b.Bound(); got != 10*time.Millisecond {
				t.Fatalf("after Reset: Bound() = %v, want 10ms", got)
			}
		})
	}
}

func TestNewRaisesSillyBounds(t *testing.T) {
	b := New(0, -time.Second)
	if got := b.Bound(); got != time.Millisecond {
		t.Fatalf("Bound() = %v, want 1ms", got)
	}
	b.Next()
	if got := b.Bound(); got != time.Millisecond {
		t.Fatalf("Bound() after Next = %v, want 1ms (max raised to min)", got)
	}
}

func TestRealJitterSpreads(t *testing.T) {
	b := New(time.Second, time.Second)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.Next()
		if d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("Next() = %v, want within [500ms, 1s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("200 delays took %d distinct values, want a spread (at least 100)", len(seen))
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled ctx = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v, want nil", err)
	}
	b := New(time.Hour, time.Hour)
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled ctx = %v, want context.Canceled", err)
	}
}
