//go:build !idgen_testclock

package main

import (
	"log/slog"

	"github.com/idgen-project/idgen/snowflake"
)

// testClock is empty in the default build (see testclock.go).
type testClock struct{}

func (*testClock) define(*settings) {}

func (testClock) start(*slog.Logger) (snowflake.Clock, func()) { return nil, func() {} }
