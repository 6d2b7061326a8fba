// Package plot writes line and bar charts as SVG with the standard library alone: the
// pictures docs/benchmarks.md shows are drawn from the benchmarks' figures without a
// plotting dependency in the bench module.
//
// A chart is data in, text out: what was not measured (a series with no point, a NaN value)
// is drawn as such, "not measured" in the legend or under the bar, never as a zero.
package plot

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Point is one point of a Series. A NaN or infinite Y is a point not measured: it is left out
// and breaks the line.
type Point struct{ X, Y float64 }

// Series is one line of a LineChart. A Series with no point to draw is still listed in the
// legend, as "<Name> (not measured)".
type Series struct {
	Name   string
	Points []Point
	// Color is an SVG colour; "" takes the palette's colour for the series' index.
	Color string
	// Dashed draws the line dashed: a reference beside a measured line.
	Dashed bool
}

// Tick is a labelled position on an axis; an empty Label is Number(Value).
type Tick struct {
	Value float64
	Label string
}

// LineChart is a chart of Series over one x axis, with a point marker at each point.
type LineChart struct {
	Title, XLabel, YLabel string
	// LogX draws x on a log10 scale (batch sizes from 1,000 to 100,000); a point at x ≤ 0 is
	// then left out.
	LogX bool
	// XTicks are the ticks of the x axis, which spans them and every point: a tick with no
	// point over it shows a size not measured. Nil: ticks chosen from the points.
	XTicks []Tick
	Series []Series
	// Notes are lines of text under the chart.
	Notes []string
}

// BarSeries is one bar in each group of a BarChart: Values[i] is its bar in Groups[i]. A
// missing or NaN value is drawn as "not measured" in place of its bar.
type BarSeries struct {
	Name   string
	Values []float64
	Color  string
}

// BarChart is a chart of grouped bars over a linear y axis from zero, each bar labelled with
// its value.
type BarChart struct {
	Title, YLabel string
	Groups        []string
	Series        []BarSeries
	// Unit follows each bar's value label (" ms").
	Unit  string
	Notes []string
}

// The canvas: the plot area is left of the legend.
const (
	width       = 820
	plotLeft    = 70
	plotRight   = 530
	plotTop     = 46
	plotBottom  = 330
	legendLeft  = 550
	lineHeight  = 18
	notesTop    = plotBottom + 62
	baseHeight  = notesTop + 8
	notMeasured = "not measured"
)

// palette is the colours of series that name none, by index (colour-blind safe, Okabe–Ito).
var palette = []string{"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"}

func colorOf(c string, i int) string {
	if c != "" {
		return c
	}
	return palette[i%len(palette)]
}

// finite reports whether v can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// svg accumulates the document; the first write error is kept and returned by close.
type svg struct {
	w   *bufio.Writer
	err error
}

func (s *svg) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

// text writes a <text> element whose content is t, escaped.
func (s *svg) text(x, y float64, anchor, attrs, t string) {
	s.printf(`<text x="%s" y="%s" text-anchor="%s"%s>%s</text>`+"\n", num(x), num(y), anchor, attrs, esc(t))
}

func (s *svg) open(height int, title string) {
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	s.printf(`<title>%s</title>`+"\n", esc(title))
	s.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	s.text(width/2, 24, "middle", ` font-size="15" font-weight="bold"`, title)
}

func (s *svg) close() error {
	s.printf("</svg>\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

// notes writes the chart's notes under the x axis's label.
func (s *svg) notes(notes []string) {
	for i, n := range notes {
		s.text(plotLeft, float64(notesTop+i*lineHeight), "start", ` fill="#444444"`, n)
	}
}

// yAxis draws the y axis's grid, ticks and label for ticks over [lo, hi], and returns the
// function that maps a value to its y coordinate.
func (s *svg) yAxis(label string, lo, hi float64, ticks []float64) func(float64) float64 {
	y := func(v float64) float64 { return plotBottom - (v-lo)/(hi-lo)*(plotBottom-plotTop) }
	s.printf(`<g class="y-axis">` + "\n")
	for _, t := range ticks {
		s.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e0e0e0"/>`+"\n", plotLeft, num(y(t)), plotRight, num(y(t)))
		s.text(plotLeft-6, y(t)+4, "end", "", Number(t))
	}
	s.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000000"/>`+"\n", plotLeft, plotTop, plotLeft, plotBottom)
	s.text(18, (plotTop+plotBottom)/2, "middle", fmt.Sprintf(` transform="rotate(-90 18 %d)"`, (plotTop+plotBottom)/2), label)
	s.printf("</g>\n")
	return y
}

// WriteSVG writes the chart as an SVG document to w.
func (c LineChart) WriteSVG(w io.Writer) error {
	xOf := func(p Point) (float64, bool) {
		if !finite(p.X) || !finite(p.Y) || (c.LogX && p.X <= 0) {
			return 0, false
		}
		if c.LogX {
			return math.Log10(p.X), true
		}
		return p.X, true
	}
	// The ranges: x spans the ticks and the points, y runs from zero (or below) to the top.
	var xs, ys []float64
	for _, t := range c.XTicks {
		if x, ok := xOf(Point{t.Value, 0}); ok {
			xs = append(xs, x)
		}
	}
	for _, sr := range c.Series {
		for _, p := range sr.Points {
			if x, ok := xOf(p); ok {
				xs, ys = append(xs, x), append(ys, p.Y)
			}
		}
	}
	xlo, xhi := span(xs)
	ylo, yhi := span(append(ys, 0))
	yticks := niceTicks(ylo, yhi)
	ylo, yhi = min(ylo, yticks[0]), max(yhi, yticks[len(yticks)-1])
	xticks := c.XTicks
	if xticks == nil {
		xticks = autoXTicks(xlo, xhi, c.LogX)
	}
	// A margin of a twentieth each side keeps the end markers off the axes.
	pad := (xhi - xlo) / 20
	xlo, xhi = xlo-pad, xhi+pad
	px := func(x float64) float64 { return plotLeft + (x-xlo)/(xhi-xlo)*(plotRight-plotLeft) }

	s := &svg{w: bufio.NewWriter(w)}
	s.open(baseHeight+len(c.Notes)*lineHeight, c.Title)
	py := s.yAxis(c.YLabel, ylo, yhi, yticks)
	s.printf(`<g class="x-axis">` + "\n")
	s.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000000"/>`+"\n", plotLeft, plotBottom, plotRight, plotBottom)
	for _, t := range xticks {
		x, ok := xOf(Point{t.Value, 0})
		if !ok {
			continue
		}
		s.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#000000"/>`+"\n", num(px(x)), plotBottom, num(px(x)), plotBottom+5)
		label := t.Label
		if label == "" {
			label = Number(t.Value)
		}
		s.text(px(x), plotBottom+19, "middle", "", label)
	}
	s.text((plotLeft+plotRight)/2, plotBottom+40, "middle", "", c.XLabel)
	s.printf("</g>\n")

	for i, sr := range c.Series {
		color := colorOf(sr.Color, i)
		dash := ""
		if sr.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		pts := slices.Clone(sr.Points)
		slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
		s.printf(`<g class="series" data-name="%s">`+"\n", esc(sr.Name))
		// A point not measured breaks the line: each run of drawable points is a polyline.
		var run []string
		flush := func() {
			if len(run) > 1 {
				s.printf(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(run, " "))
			}
			run = run[:0]
		}
		for _, p := range pts {
			x, ok := xOf(p)
			if !ok {
				flush()
				continue
			}
			run = append(run, num(px(x))+","+num(py(p.Y)))
		}
		flush()
		for _, p := range pts {
			x, ok := xOf(p)
			if !ok {
				continue
			}
			s.printf(`<circle cx="%s" cy="%s" r="4" fill="%s" data-x="%s" data-y="%s"><title>%s</title></circle>`+"\n",
				num(px(x)), num(py(p.Y)), color, num(p.X), num(p.Y), esc(fmt.Sprintf("%s: %s at %s", sr.Name, formatValue(p.Y), Number(p.X))))
		}
		s.printf("</g>\n")
	}

	s.printf(`<g class="legend">` + "\n")
	for i, sr := range c.Series {
		y := float64(plotTop + 6 + i*lineHeight)
		color := colorOf(sr.Color, i)
		dash := ""
		if sr.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		name := sr.Name
		if !slices.ContainsFunc(sr.Points, func(p Point) bool { _, ok := xOf(p); return ok }) {
			name += " (" + notMeasured + ")"
			color = "#999999"
		}
		s.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n", legendLeft, num(y), legendLeft+28, num(y), color, dash)
		s.printf(`<circle cx="%d" cy="%s" r="4" fill="%s"/>`+"\n", legendLeft+14, num(y), color)
		s.text(legendLeft+36, y+4, "start", "", name)
	}
	s.printf("</g>\n")
	s.notes(c.Notes)
	return s.close()
}

// WriteSVG writes the chart as an SVG document to w.
func (c BarChart) WriteSVG(w io.Writer) error {
	var ys []float64
	for _, sr := range c.Series {
		for _, v := range sr.Values {
			if finite(v) {
				ys = append(ys, v)
			}
		}
	}
	ylo, yhi := span(append(ys, 0))
	yticks := niceTicks(ylo, yhi)
	ylo, yhi = min(ylo, yticks[0]), max(yhi, yticks[len(yticks)-1])

	s := &svg{w: bufio.NewWriter(w)}
	s.open(baseHeight+len(c.Notes)*lineHeight, c.Title)
	py := s.yAxis(c.YLabel, ylo, yhi, yticks)
	s.printf(`<g class="x-axis">` + "\n")
	s.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#000000"/>`+"\n", plotLeft, num(py(0)), plotRight, num(py(0)))
	groupWidth := float64(plotRight-plotLeft) / float64(max(1, len(c.Groups)))
	barWidth := groupWidth * 0.8 / float64(max(1, len(c.Series)))
	for g, name := range c.Groups {
		s.text(plotLeft+groupWidth*(float64(g)+0.5), plotBottom+19, "middle", "", name)
	}
	s.printf("</g>\n")
	for i, sr := range c.Series {
		color := colorOf(sr.Color, i)
		s.printf(`<g class="series" data-name="%s">`+"\n", esc(sr.Name))
		for g := range c.Groups {
			x := plotLeft + groupWidth*(float64(g)+0.1) + barWidth*float64(i)
			v := math.NaN()
			if g < len(sr.Values) {
				v = sr.Values[g]
			}
			if !finite(v) {
				s.text(x+barWidth/2, py(0)-4, "middle", ` font-size="10" fill="#999999"`, notMeasured)
				continue
			}
			top, bottom := py(max(v, 0)), py(min(v, 0))
			label := formatValue(v) + c.Unit
			s.printf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s" data-value="%s"><title>%s</title></rect>`+"\n",
				num(x), num(top), num(barWidth), num(bottom-top), color, num(v), esc(c.Groups[g]+", "+sr.Name+": "+label))
			s.text(x+barWidth/2, top-4, "middle", "", label)
		}
		s.printf("</g>\n")
	}
	s.printf(`<g class="legend">` + "\n")
	for i, sr := range c.Series {
		y := float64(plotTop + 6 + i*lineHeight)
		s.printf(`<rect x="%d" y="%s" width="14" height="12" fill="%s"/>`+"\n", legendLeft, num(y-6), colorOf(sr.Color, i))
		s.text(legendLeft+22, y+4, "start", "", sr.Name)
	}
	s.printf("</g>\n")
	s.notes(c.Notes)
	return s.close()
}

// span returns the smallest and largest of vs, and [0, 1] for none or a single value's
// neighbourhood, so that a range never has zero width.
func span(vs []float64) (lo, hi float64) {
	if len(vs) == 0 {
		return 0, 1
	}
	lo, hi = slices.Min(vs), slices.Max(vs)
	if hi == lo {
		d := math.Max(math.Abs(lo)/2, 1)
		lo, hi = lo-d, hi+d
	}
	return lo, hi
}

// niceTicks returns about five ticks at a step of 1, 2, 2.5 or 5 times a power of ten, from a
// multiple at or below lo to one at or above hi.
func niceTicks(lo, hi float64) []float64 {
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := math.Floor(lo/step) * step; ; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
		if v >= hi-step/1e6 {
			return ticks
		}
	}
}

// autoXTicks returns ticks for an x range of the points: powers of ten on a log scale (lo
// and hi are then log10 values), niceTicks otherwise.
func autoXTicks(lo, hi float64, log bool) []Tick {
	var ticks []Tick
	if log {
		for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
			v := math.Pow(10, e)
			ticks = append(ticks, Tick{v, Number(v)})
		}
		return ticks
	}
	for _, v := range niceTicks(lo, hi) {
		ticks = append(ticks, Tick{v, Number(v)})
	}
	return ticks
}

// num formats a coordinate: two decimals at most, so that the file reads and diffs well.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// Number formats v as the charts label their axes: thousands grouped (1,000), no trailing
// zeros.
func Number(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if math.Abs(v) < 1000 {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// formatValue formats a measured value to three significant digits, or as a whole number
// from 100 up.
func formatValue(v float64) string {
	if math.Abs(v) >= 100 {
		return Number(math.Round(v))
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
