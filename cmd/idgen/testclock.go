//go:build idgen_testclock

package main

// The test clock exists only with the tag idgen_testclock (test/chaos):
// two hidden flags step a running node's clock:
//
//	--test-clock-offset D   its wall clock (the time in its IDs) moved by D
//	--test-clock-file PATH  the offset re-read from PATH every 100 ms
//
// The default build refuses them as unknown.

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/snowflake"
)

// clockFilePeriod is how often --test-clock-file is re-read.
const clockFilePeriod = 100 * time.Millisecond

type testClock struct {
	offset time.Duration
	file   string
}

func (tc *testClock) define(d *settings) {
	d.fs.DurationVar(&tc.offset, "test-clock-offset", 0, "")
	d.fs.StringVar(&tc.file, "test-clock-file", "", "")
	for _, name := range []string{"test-clock-offset", "test-clock-file"} {
		// Hidden: not in usage, docs or --print-config; no variable or key.
		d.list = append(d.list, &setting{name: name, value: d.fs.Lookup(name).Value, hidden: true, noFile: true})
		d.noEnv[name] = true
	}
}

// start returns the IDs' clock (nil: the system's) and a stop function.
func (tc testClock) start(log *slog.Logger) (snowflake.Clock, func()) {
	if tc.offset == 0 && tc.file == "" {
		return nil, func() {}
	}
	shifted := snowflake.NewShiftedClock(snowflake.SystemClock(), tc.offset)
	stop := func() {}
	if tc.file != "" {
		stop = startClockWatcher(shifted, tc.file, clockFilePeriod, log).stop
	}
	log.Warn("test clock in use: IDs carry a shifted time", "offset", shifted.Offset(), "file", tc.file)
	return shifted, stop
}

// clockWatcher re-reads a Go duration from a file every period and sets a
// ShiftedClock's offset to it; a missing or empty file changes nothing.
type clockWatcher struct {
	clock *snowflake.ShiftedClock
	path  string
	log   *slog.Logger
	last  string // the file's last content seen; only the watcher goroutine uses it
	loop  *periodic.Loop
}

// startClockWatcher applies path once, then re-reads it every period.
func startClockWatcher(clock *snowflake.ShiftedClock, path string, period time.Duration, log *slog.Logger) *clockWatcher {
	w := &clockWatcher{clock: clock, path: path, log: log}
	w.read()
	w.loop = periodic.Start(period, period, func(context.Context) { w.read() })
	return w
}

// read applies the file's duration if it changed.
func (w *clockWatcher) read() {
	b, err := os.ReadFile(w.path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && w.last != "\x00error" {
			w.log.Warn("test clock file unreadable", "file", w.path, "error", err)
			w.last = "\x00error"
		}
		return
	}
	s := strings.TrimSpace(string(b))
	if s == "" || s == w.last {
		return
	}
	w.last = s
	d, err := time.ParseDuration(s)
	if err != nil {
		w.log.Warn("test clock file holds no Go duration", "file", w.path, "content", s)
		return
	}
	w.clock.Shift(d - w.clock.Offset())
	w.log.Warn("test clock offset changed", "offset", d)
}

// stop stops the watcher and waits for its goroutine; it may be called again.
func (w *clockWatcher) stop() { w.loop.Stop() }
