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
// With RateLimit.Rate above 0, every caller has a bucket of RateLimit.Burst
// IDs that refills at Rate IDs per second; a call is charged the IDs it
// takes (a stream, each message's batch; a call that takes none, such as
// the admin API's, one). A call that finds its bucket short is refused
// with TooMany and the delay until the bucket holds enough, and takes
// nothing. A caller is its token's name on a node with tokens, and the
// client's address without (IPv6 by its /64, which one host can fill with
// addresses of its own). The lease API has limits of its own (leases.go).
//
// A bucket is one atomic word, the instant it is full again (the generic
// cell rate algorithm), charged by a compare-and-swap under a shard's read
// lock: golang.org/x/time/rate would cost 60% more per call for its mutex
// and wall-clock arithmetic (BenchmarkLimiterAddress 145 against 87 ns).
// A full bucket is the same as none: a shard at its bound drops full
// buckets, then arbitrary ones, so memory stays bounded with no goroutine.

// Defaults and bounds of RateLimit.
const (
	// DefaultRateLimitAddresses bounds the per-address buckets kept when
	// RateLimit.MaxAddresses is 0.
	DefaultRateLimitAddresses = 1 << 16
	maxRate                   = 1e9 // an ID a nanosecond
	minRate                   = 1e-6
	// maxRefill bounds the time an empty bucket takes to fill, burst/rate:
	// about 31 years, far inside the limiter's nanosecond clock.
	maxRefill = 1e9 * time.Second
	// rateShards is the number of independently locked parts of a table.
	rateShards = 16
	// rateSweepEvery is how often, at most, the whole table drops its
	// full buckets when a caller is added.
	rateSweepEvery = time.Minute
)

// RateLimit configures the per-caller rate limit. The zero value is no
// limit.
type RateLimit struct {
	// Rate is the IDs per second each caller may take on average; 0 turns
	// the limit off.
	Rate float64
	// Burst is how many IDs a caller may take at once, after a quiet
	// spell: at least the largest count of one call, so that every call can
	// pass; 0 means the larger of that count and the rate rounded up.
	Burst int
	// MaxAddresses bounds the per-address buckets kept (callers without a
	// token); 0 means DefaultRateLimitAddresses. Past the bound, full
	// buckets are dropped first, then arbitrary ones (whose callers start
	// again with a full bucket).
	MaxAddresses int
}

// Validate reports, naming the field, a setting out of range for a node
// whose largest count is maxCount.
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
	// refused counts the calls refused, of callers with a token and of
	// client addresses.
	refusedTokens, refusedAddresses atomic.Int64
}

// newLimiter returns the limiter of r for a node whose largest count is
// maxCount, timed by clock (nil: the monotonic clock), or nil when r sets
// no limit.
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
	// Token names are few (a tokens file's), but a reload can bring new
	// ones: the same bound keeps the table from growing with reloads. A
	// name may be a slice of a larger string: the table keeps a copy.
	l.tokens.init(bound, maphash.String, strings.Clone)
	l.addresses.init(bound, hashAddr, nil)
	return l
}

// Take charges caller n IDs (at least one), by its name, else by its
// address. It returns nil, or a TooMany *Error with the delay until the
// caller's bucket holds n, having taken nothing.
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

// clientKey returns the bucket key of a client address (host:port or a
// bare address): the IPv4 address, or the /64 of an IPv6 one (IPv4-mapped
// ones as IPv4). An address that does not parse (a test's, a Unix
// socket's) shares the bucket of the zero address. It allocates nothing.
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

// hashAddr mixes an address's two halves by a multiplication (Fibonacci
// hashing): a byte-wise hash costs more than the rest of the lookup.
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

// shard is one part of a table; mu guards m. A bucket is charged under
// the read lock, so that a sweep (under the write lock) never drops a
// bucket between its lookup and its charge.
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

// take charges cost ns to the bucket of key at now and returns 0, or the
// ns until the bucket holds cost (then nothing is taken).
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

// add gives key a full bucket in sh, having dropped full buckets first: of
// every shard when the last such sweep is a minute old, and of sh when it
// is at its bound.
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

// sweep drops the shard's full buckets, which are the same as none; if the
// shard is still at its bound, it drops arbitrary ones down to three
// quarters of it, so that the next sweeps are not at every new caller.
// The caller holds the write lock.
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

// bucket is one caller's token bucket, kept as its theoretical arrival
// time: the limiter time at which the bucket is full again.
type bucket struct {
	tat atomic.Int64
}

// take charges cost at now and returns 0, or the ns to wait until the
// bucket holds cost (then nothing is taken): the charge conforms when the
// bucket, moved cost on, runs at most capacity ahead of now.
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

// Refused returns how many calls were refused, of callers with a token
// and of client addresses.
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
