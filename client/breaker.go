package client

import (
	"sync"
	"time"
)

// BreakerState is the state of the client's circuit breaker.
type BreakerState string

// Circuit breaker states.
const (
	BreakerClosed   BreakerState = "closed"    // requests are sent; consecutive failures are counted
	BreakerOpen     BreakerState = "open"      // requests fail at once with ErrCircuitOpen until the cooldown has passed
	BreakerHalfOpen BreakerState = "half-open" // one probe is let through: its success closes, its failure opens
)

// breaker is a consecutive-failure circuit breaker on the client's clock;
// any answer but a failure (a 404 included) is a success.
type breaker struct {
	threshold int // consecutive failures that open it; <= 0 disables it
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
	probing  bool // half-open and the probe is in flight
}

type outcome int

const (
	outcomeSuccess outcome = iota
	outcomeFailure
	outcomeNeutral // the caller gave up: says nothing about the service, frees the probe
)

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: now, state: BreakerClosed}
}

// allow reports whether an attempt may be sent now (half-open, one probe
// at a time); an admitted attempt reports its outcome with done.
func (b *breaker) allow() bool {
	if b.threshold <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerOpen:
		if b.now().Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.state = BreakerHalfOpen
	case BreakerHalfOpen:
		if b.probing {
			return false
		}
	default:
		return true
	}
	b.probing = true
	return true
}

func (b *breaker) done(o outcome) {
	if b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	switch o {
	case outcomeSuccess:
		b.state, b.failures = BreakerClosed, 0
	case outcomeFailure:
		if b.failures++; b.state == BreakerHalfOpen || b.failures >= b.threshold {
			b.state, b.openedAt = BreakerOpen, b.now()
		}
	}
}

// State returns the state; an open breaker past its cooldown is half-open.
func (b *breaker) State() BreakerState {
	if b.threshold <= 0 {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && b.now().Sub(b.openedAt) >= b.cooldown {
		return BreakerHalfOpen
	}
	return b.state
}
