package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histSubBits sets the histogram's precision: every power of two is split
// into 2^histSubBits linear buckets, so a bucket is at most 1/128 (0.8%) of
// its values wide.
const histSubBits = 7

// histBuckets covers latencies up to 2^41 ns (about 36 minutes); longer ones
// are counted in the last bucket.
const histBuckets = (41 - histSubBits + 1) << histSubBits

// histogram counts latencies in log-linear buckets. One goroutine records
// into it; any goroutine may read it at the same time (the counters are
// atomic), which is how the progress line reads the latency of the last
// second while the connections keep recording.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	max    atomic.Int64
}

// bucketOf returns the bucket that holds a latency of v nanoseconds.
func bucketOf(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits // ≥ 1
	m := v >> (e - 1)                // in [2^histSubBits, 2^(histSubBits+1))
	i := e<<histSubBits + int(m) - 1<<histSubBits
	return min(i, histBuckets-1)
}

// bucketValue returns the middle of bucket i, in nanoseconds.
func bucketValue(i int) uint64 {
	if i < 1<<histSubBits {
		return uint64(i)
	}
	e := i >> histSubBits
	m := uint64(i&(1<<histSubBits-1)) + 1<<histSubBits
	lo := m << (e - 1)
	return lo + (uint64(1)<<(e-1))/2
}

// record counts one latency.
func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	if v > h.max.Load() {
		h.max.Store(v) // one writer: a plain compare is enough
	}
}

// snapshot is a copy of histogram counts that can be summed and queried.
type snapshot struct {
	counts [histBuckets]uint64
	total  uint64
	max    int64
}

// addTo adds h's counts to s.
func (h *histogram) addTo(s *snapshot) {
	for i := range h.counts {
		c := h.counts[i].Load()
		s.counts[i] += c
		s.total += c
	}
	s.max = max(s.max, h.max.Load())
}

// sub returns s minus an earlier snapshot of the same histograms: the counts
// recorded in between. The max is s's, not the interval's.
func (s *snapshot) sub(earlier *snapshot) *snapshot {
	d := &snapshot{max: s.max}
	for i := range s.counts {
		d.counts[i] = s.counts[i] - earlier.counts[i]
		d.total += d.counts[i]
	}
	return d
}

// quantile returns the latency at quantile q (0 < q ≤ 1), to the precision
// of a bucket, or 0 when nothing was recorded.
func (s *snapshot) quantile(q float64) time.Duration {
	if s.total == 0 {
		return 0
	}
	rank := uint64(q * float64(s.total))
	rank = min(max(rank, 1), s.total)
	var seen uint64
	for i, c := range s.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(bucketValue(i))
			if s.max > 0 {
				v = min(v, time.Duration(s.max))
			}
			return v
		}
	}
	return time.Duration(s.max)
}

// mean returns the mean latency, to the precision of a bucket.
func (s *snapshot) mean() time.Duration {
	if s.total == 0 {
		return 0
	}
	var sum float64
	for i, c := range s.counts {
		if c != 0 {
			sum += float64(c) * float64(bucketValue(i))
		}
	}
	return time.Duration(sum / float64(s.total))
}
