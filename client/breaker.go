package client

import (
	"sync"
	"time"
)

// BreakerState is the state of the client's circuit breaker.
type BreakerState string

// Circuit breaker states.
const (
	// BreakerClosed: requests are sent; consecutive failures are counted.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: requests fail at once with ErrCircuitOpen until the
	// cooldown has passed.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: the cooldown has passed; one probe request is let
	// through. Its success closes the breaker, its failure opens it again.
	BreakerHalfOpen BreakerState = "half-open"
)

// breaker is a consecutive-failure circuit breaker. Failures are attempts
// that found the service unhealthy (network error, 5xx, 429); any other
// answer, a 404 included, is a success.
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

// outcome of one attempt, as the breaker sees it.
type outcome int

const (
	outcomeSuccess outcome = iota
	outcomeFailure
	outcomeNeutral // the caller gave up; says nothing about the service
)

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: now, state: BreakerClosed}
}

// allow reports whether an attempt may be sent now. In the half-open state
// it admits one probe at a time; the caller must report the probe's outcome
// with done.
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
		b.probing = true
		return true
	case BreakerHalfOpen:
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
	return true
}

// done records the outcome of an attempt that allow admitted.
func (b *breaker) done(o outcome) {
	if b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch o {
	case outcomeSuccess:
		b.state = BreakerClosed
		b.failures = 0
		b.probing = false
	case outcomeFailure:
		b.failures++
		if b.state == BreakerHalfOpen || b.failures >= b.threshold {
			b.state = BreakerOpen
			b.openedAt = b.now()
			b.probing = false
		}
	case outcomeNeutral:
		b.probing = false
	}
}

// State returns the current state; an open breaker whose cooldown has
// passed reports half-open.
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
