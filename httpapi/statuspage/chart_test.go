package statuspage

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// wellFormed parses svg as XML and returns the elements by name.
func wellFormed(t *testing.T, svg string) map[string][]xml.StartElement {
	t.Helper()
	els := map[string][]xml.StartElement{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			els[se.Name.Local] = append(els[se.Name.Local], se)
		}
	}
	return els
}

func attr(se xml.StartElement, name string) string {
	for _, a := range se.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// TestChartPoints draws known data and checks where the points land: the
// plot spans x 58–586 and y 170 (bottom) to 26 (top) of a 600×200 chart.
func TestChartPoints(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := chart{
		ID: "t", Title: "Test", Summary: "figures", YUnit: "per second",
		Start: t0, End: t0.Add(100 * time.Second),
		Lines: []chartLine{
			{Name: "a", Color: "#111111", Runs: [][]point{
				{{t0, 0}, {t0.Add(50 * time.Second), 50}, {t0.Add(100 * time.Second), 100}},
			}},
			{Name: "b", Color: "#222222", Runs: [][]point{
				{{t0.Add(25 * time.Second), 25}, {t0.Add(50 * time.Second), 25}},
				{{t0.Add(75 * time.Second), 75}}, // a run of one: a dot
			}},
		},
	}
	svg := string(c.svg())
	els := wellFormed(t, svg)
	var got []string
	for _, pl := range els["polyline"] {
		got = append(got, attr(pl, "data-series")+": "+attr(pl, "points"))
	}
	want := []string{
		"a: 58.0,170.0 322.0,98.0 586.0,26.0",
		"b: 190.0,134.0 322.0,134.0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("polylines:\ngot  %q\nwant %q", got, want)
	}
	if dots := els["circle"]; len(dots) != 1 || attr(dots[0], "cx") != "454.0" || attr(dots[0], "cy") != "62.0" {
		t.Errorf("the run of one point: got circles %v, want one at 454.0,62.0", dots)
	}
	// The y axis: 0 to 100 in steps of 50, labelled.
	for _, label := range []string{">0</text>", ">50</text>", ">100</text>", ">per second</text>", ">now</text>"} {
		if !strings.Contains(svg, label) {
			t.Errorf("the chart lacks the label %s", label)
		}
	}
	if len(els["title"]) != 1 || len(els["desc"]) != 1 || attr(els["svg"][0], "role") != "img" ||
		attr(els["svg"][0], "aria-labelledby") != "chart-t-title chart-t-desc" {
		t.Errorf("the chart lacks its text alternative: title %d, desc %d, svg %v", len(els["title"]), len(els["desc"]), els["svg"])
	}
}

// TestChartNoNaN feeds values and windows that could produce NaN or Inf
// coordinates.
func TestChartNoNaN(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	bad := [][]point{{{t0, math.NaN()}, {t0.Add(time.Second), math.Inf(1)}, {t0.Add(2 * time.Second), 5}, {t0.Add(3 * time.Second), math.Inf(-1)}}}
	for _, c := range []chart{
		{ID: "a", Start: t0, End: t0.Add(time.Minute), Lines: []chartLine{{Name: "x", Runs: bad}}},
		{ID: "b", Start: t0, End: t0, Lines: []chartLine{{Name: "x", Runs: [][]point{{{t0, 1}, {t0, 2}}}}}},          // empty window
		{ID: "c", Start: t0, End: t0.Add(-time.Minute), Lines: []chartLine{{Name: "x", Runs: [][]point{{{t0, 1}}}}}}, // reversed
		{ID: "d", Start: t0, End: t0.Add(time.Minute), Lines: []chartLine{{Name: "x", Runs: [][]point{{{t0, 1e300}, {t0.Add(time.Second), -1e300}}}}}},
		{ID: "e", Start: t0, End: t0.Add(time.Minute), Bars: []chartBars{{Name: "x", Bars: []bar{{t0, t0.Add(time.Second), math.NaN()}, {t0, t0.Add(time.Second), 3}}}}},
	} {
		svg := string(c.svg())
		wellFormed(t, svg)
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("chart %s: NaN or Inf in the SVG:\n%s", c.ID, svg)
		}
	}
}

func TestChartEmpty(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := chart{ID: "e", Title: "Nothing", YUnit: "IDs per second", Start: t0, End: t0.Add(15 * time.Minute),
		Lines: []chartLine{{Name: "snowflake", Color: "#000"}},
		Gaps:  []span{{t0, t0.Add(15 * time.Minute)}}, Empty: "no samples yet"}
	svg := string(c.svg())
	els := wellFormed(t, svg)
	if len(els["polyline"]) != 0 || len(els["circle"]) != 0 {
		t.Errorf("an empty chart draws lines: %s", svg)
	}
	if !strings.Contains(svg, `class="empty"`) || !strings.Contains(svg, ">no samples yet</text>") {
		t.Errorf("an empty chart lacks its note:\n%s", svg)
	}
	// Axes are still there, with units and the window.
	for _, want := range []string{">IDs per second</text>", ">−15 min</text>", ">now</text>", `class="gap"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("an empty chart lacks %s", want)
		}
	}
}

func TestChartEscapes(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := chart{ID: `x"y`, Title: "<script>alert(1)</script>", Summary: `a & b < c`, YUnit: `"u"`, Start: t0, End: t0.Add(time.Minute),
		Lines: []chartLine{{Name: "<b>", Color: `red" onload="x`, Runs: [][]point{{{t0, 1}, {t0.Add(time.Second), 2}}}}},
		Band:  []bandSpan{{From: t0, To: t0.Add(time.Second), Color: "#000", Label: "<i>"}}}
	svg := string(c.svg())
	wellFormed(t, svg)
	for _, bad := range []string{"<script>", "<b>", "<i>", `" onload="`} {
		if strings.Contains(svg, bad) {
			t.Errorf("the SVG contains %s unescaped", bad)
		}
	}
}

func TestBarsStack(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := chart{ID: "b", Start: t0, End: t0.Add(4 * time.Second),
		Bars: []chartBars{
			{Name: "ok", Color: "#0a0", Bars: []bar{{t0, t0.Add(time.Second), 2}, {t0.Add(time.Second), t0.Add(2 * time.Second), 4}}},
			{Name: "failed", Color: "#a00", Bars: []bar{{t0.Add(time.Second), t0.Add(2 * time.Second), 4}}},
		}}
	els := wellFormed(t, string(c.svg()))
	var got []string
	for _, r := range els["rect"] {
		if attr(r, "class") == "bar" {
			got = append(got, attr(r, "fill")+" "+attr(r, "y")+" "+attr(r, "height"))
		}
	}
	// y from 0 to 8 (the stack of 4 + 4) over 170..26: 18 units per ID.
	want := "#0a0 134.0 36.0|#0a0 98.0 72.0|#a00 26.0 72.0"
	if strings.Join(got, "|") != want {
		t.Errorf("bars: got %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestNiceRange(t *testing.T) {
	tests := []struct {
		values         []float64
		lo, hi, stepOf float64
	}{
		{nil, 0, 1, 0.5},
		{[]float64{0, 0}, 0, 1, 0.5},
		{[]float64{3}, 0, 3, 1},
		{[]float64{97}, 0, 100, 50},
		{[]float64{4100}, 0, 6000, 2000},
		{[]float64{-0.3, 0.12}, -0.4, 0.2, 0.2},
		{[]float64{-150, -2}, -150, 0, 50},
	}
	for _, tt := range tests {
		lo, hi, step := niceRange(tt.values)
		if math.Abs(lo-tt.lo) > 1e-9 || math.Abs(hi-tt.hi) > 1e-9 || math.Abs(step-tt.stepOf) > 1e-9 {
			t.Errorf("niceRange(%v): got %g..%g step %g, want %g..%g step %g", tt.values, lo, hi, step, tt.lo, tt.hi, tt.stepOf)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.5, "0.5"}, {0.005, "0.005"}, {12, "12"}, {12.25, "12.2"}, {999, "999"},
		{1500, "1.5k"}, {20000, "20k"}, {4100000, "4.1M"}, {-150, "-150"}, {math.NaN(), "?"},
	} {
		if got := formatValue(tt.v); got != tt.want {
			t.Errorf("formatValue(%g): got %q, want %q", tt.v, got, tt.want)
		}
	}
	for _, tt := range []struct {
		d    time.Duration
		tick time.Duration
	}{
		{15 * time.Minute, 5 * time.Minute}, {time.Minute, 10 * time.Second}, {10 * time.Second, 2 * time.Second}, {time.Hour, 10 * time.Minute},
	} {
		if got := timeTick(tt.d); got != tt.tick {
			t.Errorf("timeTick(%s): got %s, want %s", tt.d, got, tt.tick)
		}
	}
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{{0, "now"}, {5 * time.Minute, "−5 min"}, {30 * time.Second, "−30 s"}, {2 * time.Hour, "−2 h"}} {
		if got := ago(tt.d); got != tt.want {
			t.Errorf("ago(%s): got %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := formatCount(1234567); got != "1,234,567" {
		t.Errorf("formatCount: got %q", got)
	}
}
