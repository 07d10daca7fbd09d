package main

import "runtime/debug"

// defaultGCPercent is the GOGC idgen runs with when GOGC is unset. A node's
// live heap is about 1 MiB, so at 100 the heap target sits at the 4 MiB
// floor and a busy node collects dozens of times a second; 400 cuts cycles
// about fourfold for some 12 MiB (docs/operations.md, docs/benchmarks.md).
const defaultGCPercent = 400

// setGCPercent applies defaultGCPercent unless GOGC is set.
func setGCPercent(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(-1) // read the current value …
		debug.SetGCPercent(p)       // … and put it back
		return p
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
