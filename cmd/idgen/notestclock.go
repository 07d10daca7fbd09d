//go:build !idgen_testclock

package main

import (
	"log/slog"

	"github.com/idgen-project/idgen/snowflake"
)

// testClock is empty in the default build: idgen serve has no test clock
// flags and its IDs carry the system clock (see testclock.go).
type testClock struct{}

func (*testClock) define(*settings) {}

func (testClock) start(*slog.Logger) (snowflake.Clock, func()) { return nil, func() {} }
