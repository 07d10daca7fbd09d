package app

import (
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

func TestConfigPolicy(t *testing.T) {
	c := Config{DSN: "sqlite::memory:",
		Keeper:   allocator.KeeperSettings{TTL: 20 * time.Second, MaxBackwardWait: -1, RandomSequenceStart: true},
		Segments: allocator.SegmentSettings{Threshold: 0.25, GrowBelow: 5 * time.Minute, ShrinkAbove: time.Hour}}
	rows, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Flag] = r.Value
	}
	for flag, want := range map[string]string{
		"lease-ttl": "20s", "heartbeat": "6.666666666s", "lease-margin": "2s", "max-clock-offset": "±5s",
		"max-backward-wait": "never (refuse at once)", "random-sequence-start": "on",
		"segment-prefetch-threshold": "25% of a range", "segment-grow-below": "5m", "segment-shrink-above": "1h",
	} {
		if got[flag] != want {
			t.Errorf("policy row of --%s: got %q, want %q", flag, got[flag], want)
		}
	}
	c.Segments.GrowBelow = 2 * time.Hour
	if _, err := c.Policy(); err == nil || !strings.Contains(err.Error(), "invalid SegmentSettings.GrowBelow 2h0m0s") {
		t.Errorf("crossed windows: got %v, want the error Validate gives", err)
	}
}
