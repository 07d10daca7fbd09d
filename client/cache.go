package client

import (
	"context"
	"fmt"
	"sync"
)

// cache hands out IDs fetched a block at a time, for Snowflake IDs (ns "")
// or one namespace. One refill runs at a time, under the client's lifetime;
// callers short of IDs wait for it within their own context.
type cache struct {
	c    *Client
	ns   string
	size int // IDs per refill
	low  int // a take that leaves fewer starts a refill

	mu    sync.Mutex
	runs  []run // IDs not handed out yet, oldest first
	count int   // IDs in runs
	fill  *fill // the refill in flight, nil when none
}

// run is a stretch of cached IDs of one source, lease and revision.
type run struct {
	src   Source
	lease *LeaseToken
	rev   int64
	ids   []int64
}

// fill is one refill; err is set before done is closed.
type fill struct {
	done chan struct{}
	err  error
}

func newCache(c *Client, ns string, size int, lowWater float64) *cache {
	return &cache{c: c, ns: ns, size: size, low: max(1, int(float64(size)*lowWater))}
}

// take hands out n IDs (n <= size), waiting for a refill when too few are
// cached. Errors: a failed refill's, ctx's, ErrClosed after Close.
func (k *cache) take(ctx context.Context, n int) (Draw, error) {
	for {
		if k.c.closing.Load() {
			return Draw{}, ErrClosed
		}
		k.mu.Lock()
		if k.count >= n {
			d := k.takeLocked(n)
			if k.count < k.low && k.fill == nil {
				_, _ = k.startLocked() // best effort: a closed client just stops refilling
			}
			k.mu.Unlock()
			return d, nil
		}
		f := k.fill
		if f == nil {
			var err error
			if f, err = k.startLocked(); err != nil {
				k.mu.Unlock()
				return Draw{}, err
			}
		}
		k.mu.Unlock()

		select {
		case <-f.done:
		case <-ctx.Done():
			return Draw{}, fmt.Errorf("idgen client: waiting for cached IDs: %w", ctx.Err())
		}
		if f.err != nil {
			k.mu.Lock()
			enough := k.count >= n // another refill may have landed meanwhile
			k.mu.Unlock()
			if !enough {
				return Draw{}, f.err
			}
		}
	}
}

func (k *cache) takeLocked(n int) Draw {
	d := Draw{Namespace: k.ns, IDs: make([]int64, 0, n)}
	for len(d.IDs) < n {
		r := &k.runs[0]
		m := min(n-len(d.IDs), len(r.ids))
		part := r.ids[:m]
		d.IDs = append(d.IDs, part...)
		if k.ns != "" {
			for _, id := range part {
				d.Ranges = appendRange(d.Ranges, Range{First: id, Last: id, Source: r.src})
			}
		}
		d.Source = mergeSource(d.Source, r.src)
		if r.lease != nil {
			d.Leases = appendLeases(d.Leases, *r.lease)
		}
		d.Revision = max(d.Revision, r.rev)
		r.ids = r.ids[m:]
		if len(r.ids) == 0 {
			k.runs[0] = run{}
			k.runs = k.runs[1:]
		}
	}
	k.count -= n
	return d
}

// startLocked starts a refill owned by the client; ErrClosed after Close.
func (k *cache) startLocked() (*fill, error) {
	if !k.c.goBackground() {
		return nil, ErrClosed
	}
	f := &fill{done: make(chan struct{})}
	k.fill = f
	go func() {
		defer k.c.wg.Done()
		d, err := k.c.fetch(k.c.life, k.ns, k.size) // one request: size <= MaxCount
		k.mu.Lock()
		switch {
		case err == nil:
			k.appendLocked(d)
		case k.c.life.Err() != nil:
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
		f.err = err
		k.fill = nil
		k.mu.Unlock()
		close(f.done)
	}()
	return f, nil
}

// appendLocked adds the IDs of a refill behind those still cached.
func (k *cache) appendLocked(d Draw) {
	var lease *LeaseToken
	if len(d.Leases) > 0 {
		lease = &d.Leases[0]
	}
	if n := len(k.runs); n > 0 && k.runs[n-1].src == d.Source && k.runs[n-1].rev == d.Revision && sameLease(k.runs[n-1].lease, lease) {
		k.runs[n-1].ids = append(k.runs[n-1].ids, d.IDs...)
	} else {
		k.runs = append(k.runs, run{src: d.Source, lease: lease, rev: d.Revision, ids: d.IDs})
	}
	k.count += len(d.IDs)
}

func sameLease(a, b *LeaseToken) bool { return a == b || a != nil && b != nil && *a == *b }
