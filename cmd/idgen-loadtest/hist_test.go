package main

import (
	"testing"
	"time"
)

func TestBucketPrecision(t *testing.T) {
	// Every value lands in a bucket whose middle is within 1% of it, and
	// buckets grow with the value.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 4095, 4096, 99_999, 1_000_000, 123_456_789, 1 << 40} {
		b := bucketOf(v)
		if b < prev {
			t.Errorf("bucketOf(%d) = %d, below the bucket of a smaller value (%d)", v, b, prev)
		}
		prev = b
		mid := bucketValue(b)
		if diff := float64(mid) - float64(v); diff > 0.01*float64(v)+1 || -diff > 0.01*float64(v)+1 {
			t.Errorf("bucketValue(bucketOf(%d)) = %d, want within 1%%", v, mid)
		}
	}
	if got := bucketOf(1 << 62); got != histBuckets-1 {
		t.Errorf("bucketOf(2^62) = %d, want the last bucket %d", got, histBuckets-1)
	}
}

func TestQuantiles(t *testing.T) {
	var h histogram
	// 1..1000 µs, once each.
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	var s snapshot
	h.addTo(&s)
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.50, 500 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{0.999, 999 * time.Microsecond},
		{1, 1000 * time.Microsecond},
	}
	for _, tt := range tests {
		got := s.quantile(tt.q)
		if d := got - tt.want; d > tt.want/100 || -d > tt.want/100 {
			t.Errorf("quantile(%v) = %v, want %v ± 1%%", tt.q, got, tt.want)
		}
	}
	if got, want := s.total, uint64(1000); got != want {
		t.Errorf("total = %d, want %d", got, want)
	}
	if got, want := time.Duration(s.max), 1000*time.Microsecond; got != want {
		t.Errorf("max = %v, want %v", got, want)
	}
	if got, want := s.mean(), 500500*time.Nanosecond; got-want > want/100 || want-got > want/100 {
		t.Errorf("mean = %v, want %v ± 1%%", got, want)
	}

	// The difference of two snapshots holds only what came in between.
	h.record(5 * time.Second)
	var s2 snapshot
	h.addTo(&s2)
	d := s2.sub(&s)
	if got := d.total; got != 1 {
		t.Errorf("interval total = %d, want 1", got)
	}
	if got := d.quantile(0.5); got < 4950*time.Millisecond || got > 5*time.Second {
		t.Errorf("interval p50 = %v, want about 5s", got)
	}
	var empty snapshot
	if got := empty.quantile(0.99); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
}
