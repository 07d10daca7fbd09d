package client

import (
	"context"
	"time"

	"github.com/idgen-project/idgen/internal/backoff"
)

// clock is the time source of retries and the breaker, for tests.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error // ctx's error if it ends first
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }
