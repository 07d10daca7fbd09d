package httpapi

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-caller rate limits.
//
// With RateLimit.Rate above 0, every caller of /ids (GET /ids, GET
// /ids/{id}) and of the admin API has a bucket of RateLimit.Burst requests
// that refills at Rate requests per second; a request that finds its
// bucket empty is answered 429 (problem code too_many) with a Retry-After
// of the whole seconds until the bucket holds a request again. A caller is
// its token's name on a node with tokens, and the client's address
// without (the TCP peer's address; IPv6 addresses by their /64, which one
// host can fill with addresses of its own). The lease API is not limited:
// a refused heartbeat could cost a holder its lease, and its calls are few
// by construction (a heartbeat every third of a ttl).
//
// A bucket is one atomic word, the instant at which it is full again
// (the generic cell rate algorithm: a token bucket kept as a time), so a
// request costs a map lookup under a read lock and a compare-and-swap, and
// no allocation. A full bucket is the same as no bucket: the limiter drops
// full buckets when a shard of its table reaches its bound, and from the
// whole table at most once a minute when a new caller comes, so memory
// stays bounded however many addresses call, with no goroutine of its own.

// Defaults and bounds of RateLimit.
const (
	// DefaultRateLimitAddresses bounds the per-address buckets kept when
	// RateLimit.MaxAddresses is 0.
	DefaultRateLimitAddresses = 1 << 16
	// rateShards is the number of independently locked parts of a
	// bucket table, picked by the top rateShardBits bits of a key's hash.
	rateShardBits = 4
	rateShards    = 1 << rateShardBits
	// rateSweepEvery is how often, at most, the whole table drops its
	// full buckets when a caller is added.
	rateSweepEvery = time.Minute
)

// RateLimit configures the per-caller request-rate limit. The zero value
// is no limit.
type RateLimit struct {
	// Rate is the requests per second each caller may send on average;
	// 0 turns the limit off.
	Rate float64
	// Burst is how many requests a caller may send at once, after a
	// quiet spell; 0 means the rate rounded up (at least 1).
	Burst int
	// MaxAddresses bounds the per-address buckets kept (callers without a
	// token); 0 means DefaultRateLimitAddresses. Past the bound, full
	// buckets are dropped first, then arbitrary ones (whose callers start
	// again with a full bucket).
	MaxAddresses int
	// Clock times the buckets; nil means the system's monotonic clock.
	// Tests step one of their own.
	Clock interface{ Now() time.Time }
}

// Bounds of RateLimit's settings.
const (
	maxRate = 1e9 // a request a nanosecond
	minRate = 1e-6
	// maxRefill bounds the time an empty bucket takes to fill, burst/rate:
	// about 31 years, far inside the limiter's nanosecond clock.
	maxRefill = 1e9 * time.Second
)

// Validate reports a setting out of range: a rate that is negative, not a
// number, below one request in 1e6 seconds or above 1e9 a second; a
// negative burst or bound; or a burst that takes over 1e9 seconds to
// refill at the rate.
func (r RateLimit) Validate() error {
	switch {
	case math.IsNaN(r.Rate) || r.Rate < 0 || r.Rate > maxRate:
		return fmt.Errorf("rate %v: want requests per second, 0 (no limit) up to 1e9", r.Rate)
	case r.Rate > 0 && r.Rate < minRate:
		return fmt.Errorf("rate %v: want at least one request in 1e6 seconds", r.Rate)
	case r.Rate > 0 && float64(r.Burst)/r.Rate > maxRefill.Seconds():
		return fmt.Errorf("burst %d at rate %v: an empty bucket would take over 1e9 seconds to refill", r.Burst, r.Rate)
	case r.Burst < 0:
		return fmt.Errorf("burst %d: want 0 (the rate rounded up) or more", r.Burst)
	case r.MaxAddresses < 0:
		return fmt.Errorf("max addresses %d (--rate-limit-addresses): want 0 (the default) or more", r.MaxAddresses)
	}
	return nil
}

// Caller kinds, the caller_kind label of the rate-limit metrics.
const (
	callerKindToken   = "token"
	callerKindAddress = "address"
)

// limiter is the server's rate limiter; nil when there is no limit.
type limiter struct {
	interval  int64                        // ns between two requests at the rate
	tolerance int64                        // ns a bucket may run ahead of now: (burst-1) × interval
	clock     interface{ Now() time.Time } // nil: the monotonic clock
	start     time.Time

	tokens    bucketTable[string]
	addresses bucketTable[netip.Addr]

	limitedToken, limitedAddress prometheus.Counter
}

// newLimiter returns the limiter of r, nil when r sets no limit.
func newLimiter(r RateLimit) *limiter {
	if r.Rate == 0 {
		return nil
	}
	burst := r.Burst
	if burst == 0 {
		burst = max(1, int(math.Ceil(r.Rate)))
	}
	maxAddr := r.MaxAddresses
	if maxAddr == 0 {
		maxAddr = DefaultRateLimitAddresses
	}
	l := &limiter{
		interval: int64(math.Round(float64(time.Second) / r.Rate)),
		clock:    r.Clock,
	}
	l.interval = max(l.interval, 1)
	l.tolerance = int64(burst-1) * l.interval
	if l.clock == nil {
		l.start = time.Now()
	} else {
		l.start = l.clock.Now()
	}
	// Token names are few (a tokens file's), but a reload can bring new
	// ones: the same bound keeps the table from growing with reloads.
	l.tokens.init(maxAddr)
	// A name may be a slice of a larger string: the table keeps a copy.
	l.tokens.clone = strings.Clone
	l.addresses.init(maxAddr)
	return l
}

// now returns the limiter's time: nanoseconds since it was built. On the
// system's clock that is one read of the monotonic clock (time.Since),
// half the cost of time.Now.
func (l *limiter) now() int64 {
	if l.clock == nil {
		return int64(time.Since(l.start))
	}
	return int64(l.clock.Now().Sub(l.start))
}

// allowToken takes a request from the bucket of the caller named name, or
// returns the 429 problem.
func (l *limiter) allowToken(name string) *apiError {
	now := l.now()
	if wait := l.tokens.take(name, hashString(name), now, l); wait > 0 {
		l.limitedToken.Inc()
		return tooMany(wait)
	}
	return nil
}

// allow takes a request from the bucket of the caller named name, or of
// the client at remoteAddr when name is empty.
func (l *limiter) allow(name, remoteAddr string) *apiError {
	if name != "" {
		return l.allowToken(name)
	}
	return l.allowAddress(remoteAddr)
}

// allowAddress takes a request from the bucket of the client at
// remoteAddr (an http.Request's RemoteAddr, host:port), or returns the
// 429 problem. An address that does not parse (a test's, a Unix socket's)
// shares the bucket of the unspecified address.
func (l *limiter) allowAddress(remoteAddr string) *apiError {
	now := l.now()
	key := clientKey(remoteAddr)
	if wait := l.addresses.take(key, hashAddr(key), now, l); wait > 0 {
		l.limitedAddress.Inc()
		return tooMany(wait)
	}
	return nil
}

// clientKey returns the bucket key of a client address: the IPv4 address,
// or the /64 of an IPv6 address (IPv4-mapped ones as IPv4). It allocates
// nothing.
func clientKey(remoteAddr string) netip.Addr {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remoteAddr); err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// tooMany is the 429 problem of a caller whose bucket holds a request
// again in wait nanoseconds.
func tooMany(wait int64) *apiError {
	d := time.Duration(wait)
	return &apiError{
		code:       codeTooMany,
		detail:     "request rate limit exceeded; retry after " + retryAfterSeconds(d) + "s",
		retryAfter: d,
	}
}

// bucketTable maps callers to their buckets, in shards locked apart.
type bucketTable[K comparable] struct {
	shards [rateShards]bucketShard[K]
	max    int // buckets per shard
	// clone, when set, copies a key before the table keeps it.
	clone func(K) K
	// lastSweep is the limiter time of the last sweep of every shard.
	lastSweep atomic.Int64
}

type bucketShard[K comparable] struct {
	mu sync.RWMutex
	m  map[K]*bucket
	_  [64]byte // keeps shards' locks off each other's cache lines
}

func (t *bucketTable[K]) init(maxBuckets int) {
	t.max = max(1, maxBuckets/rateShards)
	for i := range t.shards {
		t.shards[i].m = make(map[K]*bucket)
	}
}

// FNV-1a, which picks a name's shard.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func hashString(s string) uint32 {
	h := uint32(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return h
}

// hashAddr mixes the address's two halves by a multiplication (Fibonacci
// hashing): a byte-wise hash costs more than the rest of the lookup.
func hashAddr(a netip.Addr) uint32 {
	b := a.As16()
	x := binary.LittleEndian.Uint64(b[:8]) ^ binary.LittleEndian.Uint64(b[8:])
	return uint32((x * 0x9e3779b97f4a7c15) >> 32)
}

// take takes a request from the bucket of key, whose hash is hash, at time now and returns 0, or
// the nanoseconds until the bucket holds one again when it is empty.
func (t *bucketTable[K]) take(key K, hash uint32, now int64, l *limiter) int64 {
	sh := &t.shards[hash>>(32-rateShardBits)]
	sh.mu.RLock()
	if b := sh.m[key]; b != nil {
		// Taken under the read lock: a sweep, which holds the write lock,
		// cannot drop the bucket between the lookup and the take.
		wait := b.take(now, l.interval, l.tolerance)
		sh.mu.RUnlock()
		return wait
	}
	sh.mu.RUnlock()

	// A new caller: once a minute, that is the moment to drop the full
	// buckets of every shard (one at a time, none locked yet).
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
	b := sh.m[key]
	if b == nil {
		if len(sh.m) >= t.max {
			sh.sweep(now, t.max)
		}
		b = new(bucket)
		if t.clone != nil {
			key = t.clone(key)
		}
		sh.m[key] = b
	}
	return b.take(now, l.interval, l.tolerance)
}

// sweep drops the shard's full buckets, which are the same as none; if the
// shard is still at its bound, it drops arbitrary ones down to three
// quarters of it, so that the next sweeps are not at every new caller.
// The caller holds the write lock.
func (sh *bucketShard[K]) sweep(now int64, bound int) {
	for k, b := range sh.m {
		if b.tat.Load() <= now {
			delete(sh.m, k)
		}
	}
	if len(sh.m) < bound {
		return
	}
	keep := bound * 3 / 4
	for k := range sh.m {
		if len(sh.m) <= keep {
			break
		}
		delete(sh.m, k)
	}
}

// size returns the number of buckets in the table.
func (t *bucketTable[K]) size() int {
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
// time: the limiter time at which the bucket is full again. A request at
// now conforms when tat - now ≤ tolerance, and moves tat one interval on.
type bucket struct {
	tat atomic.Int64
}

// take takes a request at now and returns 0, or the nanoseconds to wait
// when the bucket is empty (then nothing is taken).
func (b *bucket) take(now, interval, tolerance int64) int64 {
	for {
		old := b.tat.Load()
		tat := max(old, now)
		if ahead := tat - now; ahead > tolerance {
			return ahead - tolerance
		}
		if b.tat.CompareAndSwap(old, tat+interval) {
			return 0
		}
	}
}

// newRateMetrics registers the rate-limit metrics with reg and gives l
// (when not nil) its counters. The families exist, at 0, without a limit,
// so that dashboards and alerts need not know whether one is set.
func newRateMetrics(reg prometheus.Registerer, l *limiter) error {
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idgen_http_rate_limited_total",
		Help: "Requests answered 429 for going over the per-caller rate limit, by kind of caller: token (a caller of the tokens file) or address (a client address, on a node without tokens).",
	}, []string{"caller_kind"})
	tokenCounter := limited.WithLabelValues(callerKindToken)
	addressCounter := limited.WithLabelValues(callerKindAddress)
	buckets := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idgen_http_rate_limit_buckets",
		Help: "Callers that have a rate-limit bucket on this node (tokens and client addresses; full buckets are dropped when the table grows); 0 without a limit.",
	}, func() float64 {
		if l == nil {
			return 0
		}
		return float64(l.tokens.size() + l.addresses.size())
	})
	for _, c := range []prometheus.Collector{limited, buckets} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("httpapi: rate limit metrics: %w", err)
		}
	}
	if l != nil {
		l.limitedToken, l.limitedAddress = tokenCounter, addressCounter
	}
	return nil
}
