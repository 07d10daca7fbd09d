//go:build !linux

package main

import (
	"errors"
	"time"
)

// pacerClock is the open loop's clock where Linux's timerfd(2) is missing:
// newPacerClock fails and the caller falls back to the system clock.
type pacerClock struct{}

func newPacerClock() (*pacerClock, error) { return nil, errors.New("no timerfd on this system") }

func (c *pacerClock) Now() time.Time        { return time.Now() }
func (c *pacerClock) Sleep(d time.Duration) { time.Sleep(d) }
func (c *pacerClock) Close() error          { return nil }
