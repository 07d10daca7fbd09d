package main

import "runtime/debug"

// defaultGCPercent is the garbage collector's target (GOGC) idgen runs
// with when the GOGC environment variable is not set.
//
// A node's live heap is small, about 1 MiB serving /ids on SQLite, so at
// Go's default of 100 the heap target stays at the runtime's 4 MiB floor
// and a node answering tens of thousands of requests per second collects
// garbage dozens of times a second, each cycle with its fixed costs (the
// stop-the-world phases, stack scans, write barriers and assists on the
// request path). At 400 the floor is 16 MiB: about a quarter of the
// cycles, for some 12 MiB more memory. docs/operations.md says how to
// change it (GOGC, GOMEMLIMIT) and docs/benchmarks.md what it saves.
const defaultGCPercent = 400

// setGCPercent sets the collector's target to defaultGCPercent unless the
// environment sets GOGC, which the runtime has applied already and which
// wins. It returns the target in force.
func setGCPercent(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(-1) // read the current value …
		debug.SetGCPercent(p)       // … and put it back
		return p
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
