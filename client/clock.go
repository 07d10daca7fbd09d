package client

import (
	"context"
	"time"

	"github.com/idgen-project/idgen/internal/backoff"
)

// clock is the time source of retries and the circuit breaker. Tests
// replace it to measure waits without spending them.
type clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx's error in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }
