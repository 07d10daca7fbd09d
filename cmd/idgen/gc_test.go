package main

import (
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: without GOGC the binary runs with defaultGCPercent;
// with it, the environment's value stays in force.
func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	if got := setGCPercent(func(string) string { return "" }); got != defaultGCPercent {
		t.Errorf("without GOGC: got %d, want %d", got, defaultGCPercent)
	}
	if got := debug.SetGCPercent(150); got != defaultGCPercent {
		t.Errorf("without GOGC: the runtime's target is %d, want %d", got, defaultGCPercent)
	}
	// The runtime applied GOGC=150 at start; setGCPercent leaves it.
	env := func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	}
	if got := setGCPercent(env); got != 150 {
		t.Errorf("with GOGC=150: got %d, want 150", got)
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("with GOGC=150: the runtime's target is %d, want 150", got)
	}
}
