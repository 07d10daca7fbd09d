package statuspage

import (
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Geometry of a chart, in SVG user units (pixels at 100%).
const (
	chartW      = 600
	chartH      = 200
	chartPadL   = 58 // y tick labels
	chartPadR   = 14
	chartPadB   = 30 // x tick labels
	chartLegend = 20 // the legend's row at the top
	chartBand   = 16 // the band of a timeline, under the legend
)

// chart is one inline SVG chart: lines, stacked bars, a band of states and
// marks over time; every text is HTML-escaped.
type chart struct {
	ID      string // unique in the page: the svg's id is "chart-" + ID
	Title   string
	Summary string // the figures in text: the svg's desc and the figure's caption
	YUnit   string // what the y axis counts, e.g. "IDs per second"
	YFormat func(float64) string
	// YAtLeast: the y axis reaches at least this far.
	YAtLeast float64
	Start    time.Time
	End      time.Time
	Lines    []chartLine
	Bars     []chartBars // stacked in this order
	Band     []bandSpan  // drawn in a strip above the plot
	BandKey  []legendItem
	Marks    []chartMark // vertical ticks in the band strip
	Gaps     []span      // shaded: not sampled
	Empty    string      // written across the plot when there is no data
}

type chartLine struct {
	Name, Color string
	Dash        bool
	Runs        [][]point
}

type chartBars struct {
	Name, Color string
	Bars        []bar
}

type bandSpan struct {
	From, To     time.Time
	Color, Label string
}

type legendItem struct{ Name, Color string }

type chartMark struct {
	At           time.Time
	Color, Label string
}

// frame maps time and values to SVG coordinates.
type frame struct {
	start, end     time.Time
	lo, hi         float64
	left, right    float64
	top, bottom    float64
	hasBand        bool
	bandTop, bandB float64
}

func (f frame) x(t time.Time) float64 {
	span := f.end.Sub(f.start)
	if span <= 0 {
		return f.left
	}
	r := float64(t.Sub(f.start)) / float64(span)
	return clamp(f.left+r*(f.right-f.left), f.left, f.right)
}

func (f frame) y(v float64) float64 {
	if f.hi <= f.lo {
		return f.bottom
	}
	return clamp(f.bottom-(v-f.lo)/(f.hi-f.lo)*(f.bottom-f.top), f.top, f.bottom)
}

func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func (c chart) svg() template.HTML {
	f := frame{start: c.Start, end: c.End, left: chartPadL, right: chartW - chartPadR, top: chartLegend + 6, bottom: chartH - chartPadB}
	if c.Band != nil || c.Marks != nil || c.BandKey != nil {
		f.hasBand = true
		f.bandTop = chartLegend + 4
		f.bandB = f.bandTop + chartBand
		f.top = f.bandB + 8
	}
	var values []float64
	for _, l := range c.Lines {
		for _, run := range l.Runs {
			for _, p := range run {
				if finite(p.v) {
					values = append(values, p.v)
				}
			}
		}
	}
	// Bars ending at the same instant stack.
	stacks := map[int64]float64{}
	for _, bs := range c.Bars {
		for _, b := range bs.Bars {
			if finite(b.v) {
				stacks[b.to.UnixNano()] += b.v
				values = append(values, stacks[b.to.UnixNano()])
			}
		}
	}
	if c.YAtLeast > 0 {
		values = append(values, c.YAtLeast)
	}
	var step float64
	f.lo, f.hi, step = niceRange(values)
	format := c.YFormat
	if format == nil {
		format = formatValue
	}

	id := "chart-" + c.ID
	esc := template.HTMLEscapeString
	var b strings.Builder
	w := func(ss ...string) {
		for _, s := range ss {
			b.WriteString(s)
		}
	}
	w(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="`, esc(id), `" role="img" viewBox="0 0 `,
		strconv.Itoa(chartW), " ", strconv.Itoa(chartH), `" width="`, strconv.Itoa(chartW), `" height="`, strconv.Itoa(chartH),
		`" aria-labelledby="`, esc(id), `-title `, esc(id), `-desc" font-family="system-ui, sans-serif" font-size="11">`, "\n")
	w(`<title id="`, esc(id), `-title">`, esc(c.Title), "</title>\n")
	w(`<desc id="`, esc(id), `-desc">`, esc(c.Summary), "</desc>\n")
	w(`<clipPath id="`, esc(id), `-clip"><rect x="`, coord(f.left), `" y="`, coord(f.top), `" width="`, coord(f.right-f.left),
		`" height="`, coord(f.bottom-f.top), `"/></clipPath>`, "\n")

	// Legend: the lines and bars, then the band's states.
	var legend []legendItem
	for _, l := range c.Lines {
		legend = append(legend, legendItem{l.Name, l.Color})
	}
	for _, bs := range c.Bars {
		legend = append(legend, legendItem{bs.Name, bs.Color})
	}
	legend = append(legend, c.BandKey...)
	w(`<g class="legend">`)
	lx := f.left
	for _, it := range legend {
		w(`<rect x="`, coord(lx), `" y="5" width="10" height="10" fill="`, esc(it.Color), `"/>`)
		w(`<text x="`, coord(lx+14), `" y="14" fill="#333">`, esc(it.Name), `</text>`)
		lx += 14 + 6.5*float64(len([]rune(it.Name))) + 14
	}
	w("</g>\n")

	// Y grid and labels, and the unit along the axis.
	w(`<g class="y-axis">`)
	if step > 0 {
		for i := 0; ; i++ {
			v := f.lo + float64(i)*step
			if v > f.hi+step/1e6 {
				break
			}
			v = math.Round(v/step) * step
			y := coord(f.y(v))
			stroke := "#e4e4e4"
			if v == 0 {
				stroke = "#999"
			}
			w(`<line x1="`, coord(f.left), `" y1="`, y, `" x2="`, coord(f.right), `" y2="`, y, `" stroke="`, stroke, `"/>`)
			w(`<text x="`, coord(f.left-5), `" y="`, coord(f.y(v)+4), `" text-anchor="end" fill="#555">`, esc(format(v)), `</text>`)
		}
	}
	mid := coord((f.top + f.bottom) / 2)
	w(`<text class="unit" x="12" y="`, mid, `" transform="rotate(-90 12 `, mid, `)" text-anchor="middle" fill="#333">`, esc(c.YUnit), `</text>`)
	w("</g>\n")

	// Gaps: shaded stretches with no samples.
	if len(c.Gaps) > 0 {
		w(`<g class="gaps">`)
		for _, g := range c.Gaps {
			x0, x1 := f.x(g.from), f.x(g.to)
			if x1-x0 < 0.5 {
				continue
			}
			top := f.top
			if f.hasBand {
				top = f.bandTop
			}
			w(`<rect class="gap" x="`, coord(x0), `" y="`, coord(top), `" width="`, coord(x1-x0), `" height="`, coord(f.bottom-top),
				`" fill="#f1f1f1" stroke="#ddd" stroke-dasharray="2 2"><title>not sampled</title></rect>`)
		}
		w("</g>\n")
	}

	// X axis: ticks back from the end of the window.
	w(`<g class="x-axis">`)
	w(`<line x1="`, coord(f.left), `" y1="`, coord(f.bottom), `" x2="`, coord(f.right), `" y2="`, coord(f.bottom), `" stroke="#999"/>`)
	tick := timeTick(c.End.Sub(c.Start))
	for d := time.Duration(0); d <= c.End.Sub(c.Start); d += tick {
		x := coord(f.x(c.End.Add(-d)))
		w(`<line x1="`, x, `" y1="`, coord(f.bottom), `" x2="`, x, `" y2="`, coord(f.bottom+4), `" stroke="#999"/>`)
		anchor := "middle"
		if d == 0 {
			anchor = "end"
		}
		w(`<text x="`, x, `" y="`, coord(f.bottom+16), `" text-anchor="`, anchor, `" fill="#555">`, esc(ago(d)), `</text>`)
		if tick <= 0 {
			break
		}
	}
	w("</g>\n")

	// The band of states and its marks.
	if f.hasBand {
		w(`<g class="band">`)
		for _, s := range c.Band {
			x0, x1 := f.x(s.From), f.x(s.To)
			if x1 <= x0 {
				continue
			}
			w(`<rect x="`, coord(x0), `" y="`, coord(f.bandTop), `" width="`, coord(x1-x0), `" height="`, coord(chartBand),
				`" fill="`, esc(s.Color), `"><title>`, esc(s.Label), `</title></rect>`)
		}
		for _, m := range c.Marks {
			x := coord(f.x(m.At))
			w(`<line class="mark" x1="`, x, `" y1="`, coord(f.bandTop-2), `" x2="`, x, `" y2="`, coord(f.bandB+2),
				`" stroke="`, esc(m.Color), `" stroke-width="1.5"><title>`, esc(m.Label), `</title></line>`)
		}
		w("</g>\n")
	}

	// Bars, stacked from the axis up.
	if len(c.Bars) > 0 {
		w(`<g class="bars" clip-path="url(#`, esc(id), `-clip)">`)
		base := map[int64]float64{}
		for _, bs := range c.Bars {
			for _, bb := range bs.Bars {
				if !finite(bb.v) || bb.v <= 0 {
					continue
				}
				x0, x1 := f.x(bb.from), f.x(bb.to)
				width := math.Max(x1-x0-1, 1)
				k := bb.to.UnixNano()
				y0, y1 := f.y(base[k]), f.y(base[k]+bb.v)
				base[k] += bb.v
				w(`<rect class="bar" x="`, coord(x0+0.5), `" y="`, coord(y1), `" width="`, coord(width), `" height="`, coord(math.Max(y0-y1, 1)),
					`" fill="`, esc(bs.Color), `"/>`)
			}
		}
		w("</g>\n")
	}

	// Lines: a polyline per continuous run, a dot for a run of one.
	drawn := 0
	for _, l := range c.Lines {
		for _, run := range l.Runs {
			var pts []string
			for _, p := range run {
				if finite(p.v) {
					pts = append(pts, coord(f.x(p.at))+","+coord(f.y(p.v)))
				}
			}
			switch len(pts) {
			case 0:
				continue
			case 1:
				x, y, _ := strings.Cut(pts[0], ",")
				w(`<circle class="series" data-series="`, esc(l.Name), `" cx="`, x, `" cy="`, y, `" r="2" fill="`, esc(l.Color), `" clip-path="url(#`, esc(id), `-clip)"/>`)
			default:
				dash := ""
				if l.Dash {
					dash = ` stroke-dasharray="5 3"`
				}
				w(`<polyline class="series" data-series="`, esc(l.Name), `" points="`, strings.Join(pts, " "), `" fill="none" stroke="`, esc(l.Color),
					`" stroke-width="2" stroke-linejoin="round"`, dash, ` clip-path="url(#`, esc(id), `-clip)"/>`)
			}
			drawn++
			w("\n")
		}
	}
	for _, bs := range c.Bars {
		drawn += len(bs.Bars)
	}
	drawn += len(c.Band)
	if drawn == 0 && c.Empty != "" {
		w(`<text class="empty" x="`, coord((f.left+f.right)/2), `" y="`, coord((f.top+f.bottom)/2), `" text-anchor="middle" fill="#777">`, esc(c.Empty), `</text>`)
	}
	w("</svg>")
	// Built above from numbers and escaped text only.
	return template.HTML(b.String())
}

// niceRange returns a y range over values and 0 in about four steps of 1,
// 2 or 5 times a power of ten.
func niceRange(values []float64) (lo, hi, step float64) {
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi-lo <= 0 {
		hi = lo + 1
	}
	step = niceStep((hi - lo) / 4)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step) * step
	return lo, hi, step
}

// niceStep returns the smallest 1, 2 or 5 times a power of ten >= x.
func niceStep(x float64) float64 {
	if !finite(x) || x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// timeTick returns the spacing of at most six x ticks over window.
func timeTick(window time.Duration) time.Duration {
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour} {
		if window/d <= 6 {
			return d
		}
	}
	return window
}

// ago labels a tick d before the end of the window.
func ago(d time.Duration) string {
	switch {
	case d == 0:
		return "now"
	case d%time.Hour == 0:
		return "−" + strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	case d%time.Minute == 0:
		return "−" + strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	default:
		return "−" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	}
}

// formatValue writes v in three significant digits, k or M suffixed.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case !finite(v):
		return "?"
	case a >= 1e9:
		return trimFloat(v/1e9) + "G"
	case a >= 1e6:
		return trimFloat(v/1e6) + "M"
	case a >= 1e3:
		return trimFloat(v/1e3) + "k"
	default:
		return trimFloat(v)
	}
}

// trimFloat writes v with about three significant digits.
func trimFloat(v float64) string {
	a := math.Abs(v)
	if a < 1 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	prec := 2
	if a >= 100 {
		prec = 0
	} else if a >= 10 {
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
