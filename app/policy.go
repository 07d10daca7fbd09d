package app

import (
	"strconv"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi/statuspage"
)

// Policy returns c's clock, lease and segment settings in force, with the
// flags that set them, as the status page shows them; or Validate's error.
func (c Config) Policy() ([]statuspage.PolicySetting, error) {
	r, err := c.resolve()
	if err != nil {
		return nil, err
	}
	return policy(r.Keeper, r.Segments), nil
}

// policy lists resolved keeper and segment settings.
func policy(ks allocator.KeeperSettings, ss allocator.SegmentSettings) []statuspage.PolicySetting {
	wait := ks.MaxBackwardWait.String()
	if ks.MaxBackwardWait < 0 {
		wait = "never (refuse at once)"
	}
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	return []statuspage.PolicySetting{
		{Name: "Lease TTL", Value: ks.TTL.String(), Flag: "lease-ttl"},
		{Name: "Heartbeat interval", Value: ks.Heartbeat.String(), Flag: "heartbeat"},
		{Name: "Lease margin before the deadline", Value: ks.Margin.String(), Flag: "lease-margin"},
		{Name: "Allowed clock offset from database time", Value: "±" + ks.MaxClockOffset.String(), Flag: "max-clock-offset"},
		{Name: "Backward clock step waited out", Value: wait, Flag: "max-backward-wait"},
		{Name: "Random sequence start", Value: onOff(ks.RandomSequenceStart), Flag: "random-sequence-start"},
		{Name: "Segment prefetch threshold", Value: strconv.FormatFloat(ss.Threshold*100, 'f', -1, 64) + "% of a range", Flag: "segment-prefetch-threshold"},
		{Name: "Step doubles when a range lasted under", Value: fmtWindow(ss.GrowBelow), Flag: "segment-grow-below"},
		{Name: "Step halves when a range lasted over", Value: fmtWindow(ss.ShrinkAbove), Flag: "segment-shrink-above"},
	}
}

// fmtWindow writes d without trailing zero units ("15m", not "15m0s").
func fmtWindow(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if len(s) > len(z) && s[len(s)-len(z):] == z {
			s = s[:len(s)-len(z)+1]
		}
	}
	return s
}
