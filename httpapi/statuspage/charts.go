package statuspage

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// Chart colours, distinguishable with common colour-vision deficiencies;
// every series is also named.
const (
	colorSnowflake = "#1f6fb4"
	colorSegment   = "#e08a00"
	colorFallback  = "#c62828"
	colorRefill    = "#43a047"
	colorFailed    = "#c62828"
	colorHeld      = "#66bb6a"
	colorNotReady  = "#ffb300"
	colorNoLease   = "#e53935"
	colorHeartbeat = "#263238"
	colorClaim     = "#6a1b9a"
	colorCeiling   = "#00838f"
	colorOffset    = "#5e35b1"
)

// chartView is one chart: its SVG and the same figures in text.
type chartView struct {
	ID      string
	Title   string
	SVG     template.HTML
	Caption string
}

type historyView struct {
	Window  string // e.g. "the last 15 min, one sample every 5 s, until 12:00:00 UTC"
	Charts  []chartView
	Running bool
}

// charts draws the charts of the window that ends at now.
func (h *History) charts(now time.Time, details bool) historyView {
	start := now.Add(-h.window)
	gap := h.gapAfter()
	all := h.samples()
	// The window's samples plus the one before, for the first rate.
	var ss []sample
	for i, s := range all {
		if s.at.After(now) {
			continue
		}
		if !s.at.Before(start) || (i+1 < len(all) && !all[i+1].at.Before(start)) {
			ss = append(ss, s)
		}
	}
	v := historyView{
		Window: fmt.Sprintf("the last %s, one sample every %s, until %s",
			fmtSpan(h.window), fmtSpan(h.interval), now.UTC().Format("15:04:05 UTC")),
		Running: h.running(),
	}
	empty := "no samples in this window"
	if !v.Running && len(all) == 0 {
		empty = "no samples: the history sampler is not running"
	} else if len(all) < 2 {
		empty = "no samples yet: the first rates come after " + fmtSpan(h.interval)
	}
	w := window{ss: ss, gap: gap, start: start, end: now, gaps: gaps(ss, gap, start, now), empty: empty}
	v.Charts = []chartView{idsChart(w), refillChart(w, h.interval), leaseChart(w, details), offsetChart(w)}
	return v
}

// window is the samples and time every chart of a page draws.
type window struct {
	ss         []sample
	gap        time.Duration
	start, end time.Time
	gaps       []span
	empty      string
}

func (w window) chart(id, title, yUnit string) chart {
	return chart{ID: id, Title: title, YUnit: yUnit, Start: w.start, End: w.end, Gaps: w.gaps, Empty: w.empty}
}

func (c chart) view() chartView {
	return chartView{ID: c.ID, Title: c.Title, SVG: c.svg(), Caption: c.Summary}
}

func inWindow(runs [][]point, start time.Time) []point {
	var out []point
	for _, run := range runs {
		for _, p := range run {
			if !p.at.Before(start) {
				out = append(out, p)
			}
		}
	}
	return out
}

// deltaInWindow sums a counter's growth in the window, across gaps too.
func deltaInWindow(ss []sample, start time.Time, get func(sample) int64) int64 {
	var n int64
	for i := 1; i < len(ss); i++ {
		if !ss[i].at.Before(start) && ss[i].at.After(ss[i-1].at) {
			n += counterDelta(get(ss[i-1]), get(ss[i]))
		}
	}
	return n
}

func idsChart(w window) chartView {
	ss, gap, start := w.ss, w.gap, w.start
	sources := []struct {
		name, color string
		dash        bool
		get         func(sample) int64
	}{
		{"snowflake", colorSnowflake, false, func(s sample) int64 { return s.snowflake }},
		{"segment", colorSegment, false, func(s sample) int64 { return s.segment }},
		{"fallback", colorFallback, true, func(s sample) int64 { return s.fallback }},
	}
	c := w.chart("ids", "IDs per second by source, every transport", "IDs per second")
	var text []string
	for _, src := range sources {
		runs := rateRuns(ss, gap, src.get)
		c.Lines = append(c.Lines, chartLine{Name: src.name, Color: src.color, Dash: src.dash, Runs: runs})
		pts := inWindow(runs, start)
		if len(pts) == 0 {
			text = append(text, src.name+": no rate measured")
			continue
		}
		_, peak := minMax(pts) // rates are never negative
		total := deltaInWindow(ss, start, src.get)
		text = append(text, fmt.Sprintf("%s: %s/s at the last sample, peak %s/s, %s IDs in all",
			src.name, formatValue(pts[len(pts)-1].v), formatValue(peak), formatCount(total)))
	}
	c.Summary = "IDs handed out per second over every transport (HTTP, gRPC, the compatibility routes), by source. " + strings.Join(text, "; ") + "."
	return c.view()
}

func refillChart(w window, interval time.Duration) chartView {
	ss, gap, start := w.ss, w.gap, w.start
	ok := func(s sample) int64 { return s.fetches - s.fetchErrors }
	failed := func(s sample) int64 { return s.fetchErrors }
	c := w.chart("refills", "Segment range fetches", "fetches per "+fmtSpan(interval))
	c.YAtLeast = 4 // whole fetches
	c.YFormat = func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	fetched, bad := deltaBars(ss, gap, ok), deltaBars(ss, gap, failed)
	if len(fetched) > 0 || len(bad) > 0 {
		c.Bars = []chartBars{{Name: "fetched", Color: colorRefill, Bars: fetched}, {Name: "failed", Color: colorFailed, Bars: bad}}
	}
	n, nBad := deltaInWindow(ss, start, func(s sample) int64 { return s.fetches }), deltaInWindow(ss, start, failed)
	c.Summary = fmt.Sprintf("Ranges fetched from the database for the namespaces this node draws from, per sampling interval (%s): "+
		"%s in the window, %d of them failed.", fmtSpan(interval), plural(n, "fetch"), nBad)
	return c.view()
}

// leaseChart draws the lease's timeline, with fencing versions if details.
func leaseChart(w window, details bool) chartView {
	ss, gap, start, end := w.ss, w.gap, w.start, w.end
	fencing := func(s sample) string {
		if !details {
			return ""
		}
		return fmt.Sprintf(" (fencing version %d)", s.fencing)
	}
	c := w.chart("lease", "Lease timeline", "ceiling lead (s)")
	c.BandKey = []legendItem{{"held, ready", colorHeld}, {"held, not ready", colorNotReady}, {"no lease", colorNoLease},
		{"heartbeat", colorHeartbeat}, {"claim", colorClaim}}
	var heldFor, sampled time.Duration
	var heartbeats, hbFailed, claims, lost int64
	lastHB := time.Time{}
	for i, s := range ss {
		// A state lasts until the next sample, unless a gap follows.
		to := end
		if i+1 < len(ss) {
			to = ss[i+1].at
		}
		if !continuous(s, sample{at: to}, gap) {
			to = s.at
		}
		color, label := colorNoLease, "no lease"
		switch {
		case s.held && s.ready:
			color, label = colorHeld, "held, ready"+fencing(s)
		case s.held:
			color, label = colorNotReady, "held, not ready"+fencing(s)
		}
		if to.After(s.at) && to.After(start) {
			if n := len(c.Band); n > 0 && c.Band[n-1].To.Equal(s.at) && c.Band[n-1].Label == label {
				c.Band[n-1].To = to
			} else {
				c.Band = append(c.Band, bandSpan{From: s.at, To: to, Color: color, Label: label})
			}
			d := to.Sub(maxTime(s.at, start))
			sampled += d
			if s.held {
				heldFor += d
			}
		}
		if !s.heartbeat.IsZero() && !s.heartbeat.Equal(lastHB) {
			lastHB = s.heartbeat
			// Database time: one clock offset earlier on the node's axis.
			at := s.heartbeat.Add(-s.offset)
			if !at.Before(start) {
				heartbeats++
				c.Marks = append(c.Marks, chartMark{At: at, Color: colorHeartbeat, Label: "heartbeat " + s.heartbeat.UTC().Format("15:04:05.000") + " (database time)"})
			}
		}
		if i == 0 || !continuous(ss[i-1], s, gap) || s.at.Before(start) {
			continue
		}
		p := ss[i-1]
		if d := counterDelta(p.claims, s.claims); d > 0 {
			claims += d
			label := "claimed"
			if details {
				label = fmt.Sprintf("claimed: fencing version %d", s.fencing)
			}
			c.Marks = append(c.Marks, chartMark{At: s.at, Color: colorClaim, Label: label})
		}
		if d := counterDelta(p.heartbeatFails, s.heartbeatFails); d > 0 {
			hbFailed += d
			c.Marks = append(c.Marks, chartMark{At: s.at, Color: colorFailed, Label: fmt.Sprintf("%d heartbeats failed", d)})
		}
		if d := counterDelta(p.lost, s.lost); d > 0 {
			lost += d
			c.Marks = append(c.Marks, chartMark{At: s.at, Color: colorFailed, Label: "lease lost"})
		}
	}
	for i, b := range c.Band {
		c.Band[i].Label = fmt.Sprintf("%s, %s to %s", b.Label, b.From.UTC().Format("15:04:05"), b.To.UTC().Format("15:04:05"))
	}
	runs := gaugeRuns(ss, gap, func(s sample) (float64, bool) { return s.ceilingLead.Seconds(), s.held })
	c.Lines = []chartLine{{Name: "ceiling lead", Color: colorCeiling, Runs: runs}}
	lead := inWindow(runs, start)
	var text []string
	if sampled > 0 {
		text = append(text, fmt.Sprintf("lease held for %s of %s sampled", fmtSpan(heldFor.Round(time.Second)), fmtSpan(sampled.Round(time.Second))))
	} else {
		text = append(text, "no samples of the lease in this window")
	}
	text = append(text, fmt.Sprintf("%s seen (the latest at each sample), %d failed; %s, %s lost",
		plural(heartbeats, "heartbeat"), hbFailed, plural(claims, "claim"), plural(lost, "lease")))
	if len(lead) > 0 {
		lo, hi := minMax(lead)
		text = append(text, fmt.Sprintf("the committed timestamp ceiling ran %s to %s s ahead of the node's clock", formatValue(lo), formatValue(hi)))
	}
	c.Summary = "The lease of this node: " + strings.Join(text, "; ") + "."
	return c.view()
}

func offsetChart(w window) chartView {
	runs := gaugeRuns(w.ss, w.gap, func(s sample) (float64, bool) {
		return float64(s.offset) / float64(time.Millisecond), s.held || s.offset != 0
	})
	c := w.chart("offset", "Clock offset from database time", "offset (ms)")
	c.Lines = []chartLine{{Name: "database minus node", Color: colorOffset, Runs: runs}}
	pts := inWindow(runs, w.start)
	if len(pts) == 0 {
		c.Summary = "Database time minus this node's clock, as each heartbeat measures it: no measurement in this window."
	} else {
		lo, hi := minMax(pts)
		c.Summary = fmt.Sprintf("Database time minus this node's clock, as each heartbeat measures it: %s ms at the last sample, from %s to %s ms in the window.",
			signed(pts[len(pts)-1].v), signed(lo), signed(hi))
	}
	return c.view()
}

func minMax(pts []point) (lo, hi float64) {
	lo, hi = pts[0].v, pts[0].v
	for _, p := range pts {
		lo, hi = min(lo, p.v), max(hi, p.v)
	}
	return lo, hi
}

func signed(v float64) string {
	if v > 0 {
		return "+" + formatValue(v)
	}
	return formatValue(v)
}

// plural writes n and the noun, with an s (es after ch) unless n is 1.
func plural(n int64, noun string) string {
	if n != 1 {
		if strings.HasSuffix(noun, "ch") {
			noun += "e"
		}
		noun += "s"
	}
	return formatCount(n) + " " + noun
}

func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtSpan writes a duration the way people say it: 15 min, 5 s, 250 ms.
func fmtSpan(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	default:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
	}
}
