package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// node is any element of a parsed SVG document.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []node     `xml:",any"`
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// all returns n and every element under it named local, in document order.
func (n node) all(local string) []node {
	var out []node
	if n.XMLName.Local == local {
		out = append(out, n)
	}
	for _, c := range n.Nodes {
		out = append(out, c.all(local)...)
	}
	return out
}

// texts returns the content of every <text> element of n.
func (n node) texts() []string {
	var out []string
	for _, t := range n.all("text") {
		out = append(out, t.Text)
	}
	return out
}

// series returns the <g class="series"> groups of n by their data-name.
func (n node) series() map[string]node {
	out := map[string]node{}
	for _, g := range n.all("g") {
		if g.attr("class") == "series" {
			out[g.attr("data-name")] = g
		}
	}
	return out
}

// parse writes a chart with write and parses it as XML, failing the test if either fails.
func parse(t *testing.T, write func(*bytes.Buffer) error) node {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	var root node
	if err := xml.Unmarshal(buf.Bytes(), &root); err != nil {
		t.Fatalf("the SVG does not parse as XML: %v\n%s", err, buf.String())
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root element %v, want svg in the SVG namespace", root.XMLName)
	}
	return root
}

func TestLineChartDrawsEverySeriesPointAndLabel(t *testing.T) {
	c := LineChart{
		Title: "Cost curve <embedded & cluster>", XLabel: "tasks in the batch", YLabel: "runs/s", LogX: true,
		XTicks: []Tick{{1000, "1,000"}, {10_000, "10,000"}, {50_000, "50,000"}, {100_000, "100,000"}},
		Series: []Series{
			{Name: "batch, embedded", Points: []Point{{10_000, 26.2}, {1000, 32.7}}},
			{Name: "ceiling, embedded", Dashed: true, Points: []Point{{100_000, 37}, {1000, 48.8}, {50_000, math.NaN()}, {10_000, 39.3}}},
			{Name: "batch, cluster"},
		},
		Notes: []string{"Not measured yet: 50,000 tasks"},
	}
	root := parse(t, func(b *bytes.Buffer) error { return c.WriteSVG(b) })

	series := root.series()
	if len(series) != 3 {
		t.Fatalf("%d series groups, want 3: %v", len(series), series)
	}
	for name, want := range map[string][]string{
		"batch, embedded":   {"1000/32.7", "10000/26.2"},
		"ceiling, embedded": {"1000/48.8", "10000/39.3", "100000/37"},
		"batch, cluster":    nil,
	} {
		var got []string
		for _, c := range series[name].all("circle") {
			got = append(got, c.attr("data-x")+"/"+c.attr("data-y"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("series %q draws points %v, want %v", name, got, want)
		}
	}
	// The points are joined in x order, and the NaN point at 50,000 breaks the ceiling's line:
	// 1,000 to 10,000 is a line, 100,000 a point alone.
	lines := series["ceiling, embedded"].all("polyline")
	if len(lines) != 1 || len(strings.Fields(lines[0].attr("points"))) != 2 {
		t.Errorf("ceiling: polylines %+v, want one of two points", lines)
	} else if lines[0].attr("stroke-dasharray") == "" {
		t.Error("the dashed series is drawn solid")
	}
	if lines := series["batch, embedded"].all("polyline"); len(lines) != 1 || lines[0].attr("stroke-dasharray") != "" {
		t.Errorf("batch: polylines %+v, want one solid line", lines)
	}

	texts := root.texts()
	for _, want := range []string{
		"Cost curve <embedded & cluster>", "tasks in the batch", "runs/s",
		"1,000", "10,000", "50,000", "100,000",
		"batch, embedded", "ceiling, embedded", "batch, cluster (not measured)",
		"Not measured yet: 50,000 tasks",
	} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in %q", want, texts)
		}
	}
	// The x ticks are in order along the axis and log-spaced: a decade is as wide from 1,000
	// as from 10,000.
	xs := map[string]float64{}
	for _, g := range root.all("g") {
		if g.attr("class") != "x-axis" {
			continue
		}
		for _, tx := range g.all("text") {
			xs[tx.Text] = atof(t, tx.attr("x"))
		}
	}
	if !(xs["1,000"] < xs["10,000"] && xs["10,000"] < xs["50,000"] && xs["50,000"] < xs["100,000"]) {
		t.Errorf("x ticks out of order: %v", xs)
	}
	if d1, d2 := xs["10,000"]-xs["1,000"], xs["100,000"]-xs["10,000"]; math.Abs(d1-d2) > 0.5 {
		t.Errorf("log x: a decade is %v wide from 1,000 and %v from 10,000", d1, d2)
	}
}

func TestLineChartWithoutDataIsAnEmptyChart(t *testing.T) {
	for name, c := range map[string]LineChart{
		"nothing":          {},
		"empty series":     {LogX: true, Series: []Series{{Name: "a"}, {Name: "b", Points: []Point{{0, 1}, {-5, 2}}}}},
		"not finite":       {Series: []Series{{Name: "a", Points: []Point{{math.Inf(1), 1}, {1, math.NaN()}}}}},
		"one point":        {Series: []Series{{Name: "a", Points: []Point{{5, 5}}}}},
		"ticks, no points": {LogX: true, XTicks: []Tick{{1000, "1k"}, {-1, "bad"}}},
	} {
		t.Run(name, func(t *testing.T) {
			root := parse(t, func(b *bytes.Buffer) error { return c.WriteSVG(b) })
			for _, s := range c.Series {
				if s.Name == "a" && name != "one point" {
					if !slices.Contains(root.texts(), "a (not measured)") {
						t.Errorf("a series with nothing to draw is not marked: %q", root.texts())
					}
				}
			}
			for _, n := range root.all("circle") {
				for _, a := range []string{"cx", "cy"} {
					if v := n.attr(a); strings.Contains(v, "NaN") || strings.Contains(v, "Inf") {
						t.Errorf("circle %s=%s", a, v)
					}
				}
			}
		})
	}
}

func TestBarChartDrawsEveryValueAndMarksMissingOnes(t *testing.T) {
	c := BarChart{
		Title: "Interactive latency", YLabel: "ms", Unit: " ms",
		Groups: []string{"idle", "loaded", "fair-only"},
		Series: []BarSeries{
			{Name: "p50", Values: []float64{9.95, 70.2, 75.7}},
			{Name: "p99", Values: []float64{15.5, math.NaN()}},
		},
	}
	root := parse(t, func(b *bytes.Buffer) error { return c.WriteSVG(b) })
	series := root.series()
	for name, want := range map[string][]string{"p50": {"9.95", "70.2", "75.7"}, "p99": {"15.5"}} {
		var got []string
		for _, r := range series[name].all("rect") {
			got = append(got, r.attr("data-value"))
			if h := atof(t, r.attr("height")); h <= 0 {
				t.Errorf("%s bar %s has height %v", name, r.attr("data-value"), h)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("series %s draws bars %v, want %v", name, got, want)
		}
	}
	// p99's NaN and its missing third value are both "not measured".
	if got := series["p99"].texts(); !slices.Equal(got, []string{"15.5 ms", "not measured", "not measured"}) {
		t.Errorf("p99 labels %q", got)
	}
	// A larger value is a taller bar.
	rects := series["p50"].all("rect")
	if atof(t, rects[0].attr("height")) >= atof(t, rects[1].attr("height")) {
		t.Error("9.95 ms is drawn at least as tall as 70.2 ms")
	}
	for _, want := range []string{"Interactive latency", "idle", "loaded", "fair-only", "p50", "p99", "ms"} {
		if !slices.Contains(root.texts(), want) {
			t.Errorf("no text %q", want)
		}
	}
	parse(t, func(b *bytes.Buffer) error { return BarChart{}.WriteSVG(b) })
}

// failingWriter fails every write.
type failingWriter struct{}

var errWrite = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteSVGReturnsTheWriteError(t *testing.T) {
	if err := (LineChart{Title: "t"}).WriteSVG(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("LineChart.WriteSVG = %v, want the writer's error", err)
	}
	if err := (BarChart{Title: "t"}).WriteSVG(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("BarChart.WriteSVG = %v, want the writer's error", err)
	}
}

func TestNiceTicksCoverTheRange(t *testing.T) {
	for _, r := range [][2]float64{{0, 1}, {0, 48.8}, {0, 470}, {0, 193}, {-3, 7}, {0, 0.03}} {
		ticks := niceTicks(r[0], r[1])
		if len(ticks) < 2 || len(ticks) > 12 || ticks[0] > r[0] || ticks[len(ticks)-1] < r[1] {
			t.Errorf("niceTicks(%v, %v) = %v", r[0], r[1], ticks)
		}
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is no number: %v", s, err)
	}
	return v
}

func TestNumberGroupsThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.5: "0.5", 999: "999", 1000: "1,000", 100_000: "100,000",
		1_234_567.5: "1,234,567.5", -12_345: "-12,345"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
	}
}
