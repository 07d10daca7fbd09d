package statuspage

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHistoryCharts samples a node on a stepped clock through a lost lease,
// a failed heartbeat, a new claim and a missed stretch of samples, and
// checks what the four charts draw and say.
func TestHistoryCharts(t *testing.T) {
	h, clock, src := testHistory(t, 5*time.Second, time.Minute)
	for i := range 12 {
		if i == 9 {
			clock.Step(10 * time.Second) // two samples missed: a gap
		}
		now := clock.Now()
		src.set(func(s *sample) {
			s.snowflake += 100 // 20 IDs/s
			s.held, s.ready = i < 4 || i >= 6, i < 4 || i >= 6
			s.heartbeat, s.offset = time.Time{}, 10*time.Millisecond
			if s.held {
				s.heartbeat = now.Add(-time.Second).Add(s.offset) // database time
				s.ceilingLead = 3 * time.Second
			}
			switch i {
			case 0:
				s.claims, s.fencing = 1, 1
			case 4:
				s.lost++
			case 5:
				s.heartbeatFails++
			case 6:
				s.claims, s.fencing = 2, 2
			}
		})
		h.Sample()
		if i < 11 {
			clock.Step(5 * time.Second)
		}
	}
	v := h.charts(clock.Now(), true)
	if len(v.Charts) != 4 {
		t.Fatalf("got %d charts, want 4", len(v.Charts))
	}
	byID := map[string]chartView{}
	for _, c := range v.Charts {
		byID[c.ID] = c
	}
	if !strings.Contains(v.Window, "the last 1 min, one sample every 5 s") {
		t.Errorf("window: got %q", v.Window)
	}

	ids := string(byID["ids"].SVG)
	if !strings.Contains(byID["ids"].Caption, "snowflake: 20/s at the last sample, peak 20/s, 1,100 IDs in all") {
		t.Errorf("ids caption: got %q", byID["ids"].Caption)
	}
	// Two runs of snowflake rates, split at the missed samples.
	if n := strings.Count(ids, `data-series="snowflake"`); n != 2 {
		t.Errorf("ids chart: got %d snowflake runs, want 2 (split at the gap):\n%s", n, ids)
	}
	if n := strings.Count(ids, `class="gap"`); n != 1 {
		t.Errorf("ids chart: got %d gaps, want 1", n)
	}

	lease := string(byID["lease"].SVG)
	fills := regexp.MustCompile(`<rect x="[^"]*" y="[^"]*" width="[^"]*" height="16.0" fill="(#[0-9a-f]+)"`).FindAllStringSubmatch(lease, -1)
	var got []string
	for _, f := range fills {
		got = append(got, f[1])
	}
	// Held (fencing version 1), no lease, held (2) until the gap, held (2)
	// after it.
	if want := []string{colorHeld, colorNoLease, colorHeld, colorHeld}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("lease band: got %v, want %v", got, want)
	}
	for _, want := range []string{"lease held for 35 s of 45 s sampled", "8 heartbeats seen", "1 failed", "1 claim,", "1 lease lost", "3 to 3 s ahead"} {
		if !strings.Contains(byID["lease"].Caption, want) {
			t.Errorf("lease caption lacks %q: %q", want, byID["lease"].Caption)
		}
	}
	if !strings.Contains(lease, "claimed: fencing version 2") || !strings.Contains(lease, "1 heartbeats failed") {
		t.Errorf("lease chart lacks the claim or the failed heartbeat marks")
	}
	if !strings.Contains(byID["offset"].Caption, "+10 ms at the last sample") {
		t.Errorf("offset caption: got %q", byID["offset"].Caption)
	}
	if !strings.Contains(byID["refills"].Caption, "0 fetches in the window") {
		t.Errorf("refills caption: got %q", byID["refills"].Caption)
	}
}

// TestHistoryChartsEmpty: a history not started draws empty charts that
// say why.
func TestHistoryChartsEmpty(t *testing.T) {
	h, clock, _ := testHistory(t, 5*time.Second, 15*time.Minute)
	for _, c := range h.charts(clock.Now(), true).Charts {
		svg := string(c.SVG)
		if !strings.Contains(svg, "no samples: the history sampler is not running") || strings.Contains(svg, "<polyline") {
			t.Errorf("chart %s of an empty history: want the note and no line:\n%s", c.ID, svg)
		}
	}
}
