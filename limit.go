package idgen

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Per-caller rate limits.
//
// With RateLimit.Rate above 0 every caller has a bucket of Burst IDs
// refilling at Rate per second; a call is charged the IDs it takes (at
// least one) or refused with TooMany and the wait, taking nothing. A
// caller is its token name, or its address without tokens (IPv6 by /64).
// The lease API has its own limits (leases.go).
//
// A bucket is one atomic word (GCRA), charged by CAS under a shard's read
// lock: x/time/rate cost 60% more (BenchmarkLimiterAddress 145 vs 87 ns).
// A full bucket equals none, so shards at their bound drop full buckets,
// then arbitrary ones: bounded memory, no goroutine.

// Defaults and bounds of RateLimit.
const (
	// DefaultRateLimitAddresses is the default RateLimit.MaxAddresses.
	DefaultRateLimitAddresses = 1 << 16
	maxRate                   = 1e9 // an ID a nanosecond
	minRate                   = 1e-6
	// maxRefill bounds burst/rate: about 31 years, within the ns clock.
	maxRefill = 1e9 * time.Second
	// rateShards is the number of independently locked parts of a table.
	rateShards = 16
	// rateSweepEvery is the least interval between whole-table sweeps.
	rateSweepEvery = time.Minute
)

// RateLimit configures the per-caller rate limit; zero is no limit.
type RateLimit struct {
	// Rate is each caller's average IDs per second; 0 turns it off.
	Rate float64
	// Burst is the IDs a caller may take at once, at least the largest
	// count; 0 means max(that count, rate rounded up).
	Burst int
	// MaxAddresses bounds the per-address buckets kept (0: the default);
	// past it full buckets go first, then arbitrary ones.
	MaxAddresses int
}

// Validate reports, naming the field, a setting out of range given the
// largest count maxCount.
func (r RateLimit) Validate(maxCount int) error {
	switch {
	case math.IsNaN(r.Rate) || r.Rate < 0 || r.Rate > maxRate:
		return fmt.Errorf("invalid RateLimit.Rate %v: want IDs per second, 0 (no limit) up to 1e9", r.Rate)
	case r.Rate > 0 && r.Rate < minRate:
		return fmt.Errorf("invalid RateLimit.Rate %v: want at least one ID in 1e6 seconds", r.Rate)
	case r.Burst < 0:
		return fmt.Errorf("invalid RateLimit.Burst %d: want 0 (the default) or more", r.Burst)
	case r.Rate > 0 && r.Burst > 0 && r.Burst < maxCount:
		return fmt.Errorf("invalid RateLimit.Burst %d: below the largest count %d, a call of that count could never pass", r.Burst, maxCount)
	case r.Rate > 0 && float64(max(r.Burst, maxCount))/r.Rate > maxRefill.Seconds():
		return fmt.Errorf("invalid RateLimit.Burst %d at RateLimit.Rate %v: an empty bucket would take over 1e9 seconds to refill", max(r.Burst, maxCount), r.Rate)
	case r.MaxAddresses < 0:
		return fmt.Errorf("invalid RateLimit.MaxAddresses %d: want 0 (the default) or more", r.MaxAddresses)
	}
	return nil
}

// Limiter charges callers for the IDs they take. A nil *Limiter limits
// nothing.
type Limiter struct {
	rate     float64
	interval int64 // ns per ID at the rate
	capacity int64 // ns a bucket may run ahead of now: burst × interval
	// now returns the limiter's time in ns.
	now       func() int64
	tokens    table[string]
	addresses table[[16]byte]
	// refused counts refused calls, by token and by address.
	refusedTokens, refusedAddresses atomic.Int64
}

// newLimiter returns r's limiter (clock nil: monotonic), or nil when r
// sets no limit.
func newLimiter(r RateLimit, maxCount int, clock func() time.Time) *Limiter {
	if r.Rate == 0 {
		return nil
	}
	burst := r.Burst
	if burst == 0 {
		burst = max(maxCount, int(math.Ceil(r.Rate)), 1)
	}
	bound := r.MaxAddresses
	if bound == 0 {
		bound = DefaultRateLimitAddresses
	}
	l := &Limiter{rate: r.Rate, interval: max(int64(math.Round(float64(time.Second)/r.Rate)), 1)}
	l.capacity = int64(burst) * l.interval
	if clock == nil {
		// One read of the monotonic clock, half the cost of time.Now.
		start := time.Now()
		l.now = func() int64 { return int64(time.Since(start)) }
	} else {
		start := clock()
		l.now = func() int64 { return int64(clock().Sub(start)) }
	}
	// The same bound keeps token names from growing with reloads. A name
	// may be a slice of a larger string: keep a copy.
	l.tokens.init(bound, maphash.String, strings.Clone)
	l.addresses.init(bound, hashAddr, nil)
	return l
}

// Take charges caller n IDs (at least one), by name, else address. It
// returns nil, or a TooMany *Error with the wait, taking nothing.
func (l *Limiter) Take(caller Caller, n int) error {
	if l == nil {
		return nil
	}
	cost := int64(max(n, 1)) * l.interval
	now := l.now()
	var wait int64
	if caller.Name != "" {
		if wait = l.tokens.take(caller.Name, now, cost, l.capacity); wait > 0 {
			l.refusedTokens.Add(1)
		}
	} else if wait = l.addresses.take(clientKey(caller.Address), now, cost, l.capacity); wait > 0 {
		l.refusedAddresses.Add(1)
	}
	if wait == 0 {
		return nil
	}
	d := time.Duration(wait)
	return &Error{Code: TooMany, RetryAfter: d,
		Detail: fmt.Sprintf("rate limit exceeded (%v IDs a second); retry after %s", l.rate, d.Round(time.Millisecond))}
}

// clientKey returns an address's bucket key: IPv4, or IPv6 /64 (mapped
// ones as IPv4); unparsable ones share the zero address. No allocation.
func clientKey(addr string) [16]byte {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(addr); err != nil {
		return [16]byte{}
	}
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			a = p.Addr()
		}
	}
	return a.As16()
}

// hashAddr is Fibonacci hashing: a byte-wise hash costs more than the
// rest of the lookup.
func hashAddr(_ maphash.Seed, b [16]byte) uint64 {
	x := binary.LittleEndian.Uint64(b[:8]) ^ binary.LittleEndian.Uint64(b[8:])
	return (x * 0x9e3779b97f4a7c15) >> 32
}

// table maps callers to their buckets, in shards locked apart.
type table[K comparable] struct {
	shards [rateShards]shard[K]
	max    int // buckets per shard
	seed   maphash.Seed
	hash   func(maphash.Seed, K) uint64
	clone  func(K) K // nil: keys are kept as given
	// lastSweep is the limiter time of the last sweep of every shard.
	lastSweep atomic.Int64
}

// shard is one part of a table; mu guards m. Charging under the read lock
// keeps a sweep from dropping a bucket between lookup and charge.
type shard[K comparable] struct {
	mu sync.RWMutex
	m  map[K]*bucket
	_  [64]byte // keeps shards' locks off each other's cache lines
}

func (t *table[K]) init(bound int, hash func(maphash.Seed, K) uint64, clone func(K) K) {
	t.max = max(1, bound/rateShards)
	t.seed, t.hash, t.clone = maphash.MakeSeed(), hash, clone
	for i := range t.shards {
		t.shards[i].m = make(map[K]*bucket)
	}
}

// take charges cost ns to key's bucket and returns 0, or the wait (taking
// nothing).
func (t *table[K]) take(key K, now, cost, capacity int64) int64 {
	sh := &t.shards[t.hash(t.seed, key)%rateShards]
	sh.mu.RLock()
	b := sh.m[key]
	for b == nil {
		sh.mu.RUnlock()
		t.add(sh, key, now)
		sh.mu.RLock()
		b = sh.m[key]
	}
	wait := b.take(now, cost, capacity)
	sh.mu.RUnlock()
	return wait
}

// add gives key a full bucket in sh, first sweeping every shard when the
// last sweep is a minute old, and sh when at its bound.
func (t *table[K]) add(sh *shard[K], key K, now int64) {
	if last := t.lastSweep.Load(); now-last >= int64(rateSweepEvery) && t.lastSweep.CompareAndSwap(last, now) {
		for i := range t.shards {
			other := &t.shards[i]
			other.mu.Lock()
			other.sweep(now, t.max)
			other.mu.Unlock()
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[key] != nil {
		return
	}
	if len(sh.m) >= t.max {
		sh.sweep(now, t.max)
	}
	if t.clone != nil {
		key = t.clone(key)
	}
	sh.m[key] = new(bucket)
}

// sweep drops full buckets, then if still at the bound arbitrary ones down
// to three quarters. The caller holds the write lock.
func (sh *shard[K]) sweep(now int64, bound int) {
	for k, b := range sh.m {
		if b.tat.Load() <= now {
			delete(sh.m, k)
		}
	}
	if len(sh.m) < bound {
		return
	}
	for k := range sh.m {
		if len(sh.m) <= bound*3/4 {
			break
		}
		delete(sh.m, k)
	}
}

// size returns the number of buckets in the table.
func (t *table[K]) size() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

// bucket is a token bucket kept as its theoretical arrival time: when it
// is full again.
type bucket struct {
	tat atomic.Int64
}

// take charges cost at now and returns 0, or the wait (taking nothing):
// it conforms when the moved-on time is at most capacity ahead of now.
func (b *bucket) take(now, cost, capacity int64) int64 {
	for {
		old := b.tat.Load()
		tat := max(old, now) + cost
		if ahead := tat - now; ahead > capacity {
			return ahead - capacity
		}
		if b.tat.CompareAndSwap(old, tat) {
			return 0
		}
	}
}

// Refused returns the refused calls, by token and by address.
func (l *Limiter) Refused() (tokens, addresses int64) {
	if l == nil {
		return 0, 0
	}
	return l.refusedTokens.Load(), l.refusedAddresses.Load()
}

// Size returns the number of buckets kept, for the metrics.
func (l *Limiter) Size() int {
	if l == nil {
		return 0
	}
	return l.tokens.size() + l.addresses.size()
}
