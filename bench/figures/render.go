package figures

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/subflow-dev/subflow/bench/plot"
)

// The pictures Render writes, in docs/img.
const (
	CostRunsPicture = "cost-curve.svg"
	CostRSSPicture  = "cost-curve-rss.svg"
	LatencyPicture  = "interactive-latency.svg"
)

// CurveSizes are the batch sizes the cost curve is drawn at: BenchmarkBatch10k's reference and
// default sizes and the two its doc names; a size with no row shows as not measured.
var CurveSizes = []int{1_000, 10_000, 50_000, 100_000}

// curveServers are the servers the cost curve always shows, measured or not.
var curveServers = []string{"embedded", "cluster"}

// serverColors keeps a server's colour the same in both cost pictures: curveServers' first,
// then the others' in the order they appear (Okabe–Ito, colour-blind safe).
var serverColors = []string{"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9"}

// Render reads the figures files in resultsDir and writes the pictures into imgDir.
func Render(resultsDir, imgDir string) error {
	cost, err := ReadCost(filepath.Join(resultsDir, CostFile))
	if err != nil {
		return err
	}
	latency, err := ReadLatency(filepath.Join(resultsDir, LatencyFile))
	if err != nil {
		return err
	}
	pictures, err := Pictures(cost, latency)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(pictures)) {
		if err := os.WriteFile(filepath.Join(imgDir, name), pictures[name], 0o644); err != nil {
			return fmt.Errorf("render figures: %w", err)
		}
	}
	return nil
}

// Pictures returns the SVG documents drawn from cost and latency by their file names in
// docs/img.
func Pictures(cost []CostRow, latency []LatencyRow) (map[string][]byte, error) {
	runs, rss := CostCharts(cost)
	out := map[string][]byte{}
	for name, write := range map[string]func(io.Writer) error{
		CostRunsPicture: runs.WriteSVG,
		CostRSSPicture:  rss.WriteSVG,
		LatencyPicture:  LatencyChart(latency).WriteSVG,
	} {
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			return nil, fmt.Errorf("draw %s: %w", name, err)
		}
		out[name] = buf.Bytes()
	}
	return out, nil
}

// latestCost returns, for each server and size, the latest row: a later row of the same date
// wins, as a re-run appended after the first.
func latestCost(rows []CostRow) map[string]map[int]CostRow {
	latest := map[string]map[int]CostRow{}
	for _, r := range rows {
		if latest[r.Server] == nil {
			latest[r.Server] = map[int]CostRow{}
		}
		if old, ok := latest[r.Server][r.Tasks]; !ok || r.Date >= old.Date {
			latest[r.Server][r.Tasks] = r
		}
	}
	return latest
}

// servers returns curveServers and then every other server of rows, in the order they first
// appear.
func servers(rows []CostRow) []string {
	out := slices.Clone(curveServers)
	for _, r := range rows {
		if !slices.Contains(out, r.Server) {
			out = append(out, r.Server)
		}
	}
	return out
}

// CostCharts draws the cost curve from rows, the latest row of each server and size: runs/s
// of the batch beside the engine's ceiling, and the peak RSS of the worker and the starter,
// against the batch's size on a log scale.
func CostCharts(rows []CostRow) (runs, rss plot.LineChart) {
	latest := latestCost(rows)
	var ticks []plot.Tick
	sizes := slices.Clone(CurveSizes)
	for _, r := range rows {
		if !slices.Contains(sizes, r.Tasks) {
			sizes = append(sizes, r.Tasks)
		}
	}
	slices.Sort(sizes)
	for _, n := range sizes {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: plot.Number(float64(n))})
	}
	runs = plot.LineChart{Title: "Cost curve: runs/s against the batch's size (BenchmarkBatch10k)",
		XLabel: "tasks in the batch (log scale)", YLabel: "runs/s", LogX: true, XTicks: ticks}
	rss = plot.LineChart{Title: "Cost curve: peak RSS against the batch's size (BenchmarkBatch10k)",
		XLabel: "tasks in the batch (log scale)", YLabel: "peak RSS (MB)", LogX: true, XTicks: ticks}
	all := servers(rows)
	series := func(server, name string, dashed bool, value func(CostRow) float64) plot.Series {
		color := serverColors[slices.Index(all, server)%len(serverColors)]
		s := plot.Series{Name: name + ", " + server, Color: color, Dashed: dashed}
		for _, n := range slices.Sorted(maps.Keys(latest[server])) {
			s.Points = append(s.Points, plot.Point{X: float64(n), Y: value(latest[server][n])})
		}
		return s
	}
	var dates, unmeasuredServers []string
	for _, server := range all {
		runs.Series = append(runs.Series,
			series(server, "subflow Batch", false, func(r CostRow) float64 { return r.RunsPerSec }),
			series(server, "engine ceiling", true, func(r CostRow) float64 { return r.CeilingRunsPerSec }))
		rss.Series = append(rss.Series,
			series(server, "worker", false, func(r CostRow) float64 { return r.WorkerMB }),
			series(server, "starter", true, func(r CostRow) float64 { return r.StarterMB }))
		if len(latest[server]) == 0 {
			unmeasuredServers = append(unmeasuredServers, server)
			continue
		}
		var ds []string
		for _, n := range slices.Sorted(maps.Keys(latest[server])) {
			if d := latest[server][n].Date; !slices.Contains(ds, d) {
				ds = append(ds, d)
			}
		}
		dates = append(dates, server+" "+strings.Join(ds, ", "))
	}
	var unmeasuredSizes []string
	for _, n := range sizes {
		measured := false
		for _, bySize := range latest {
			_, ok := bySize[n]
			measured = measured || ok
		}
		if !measured {
			unmeasuredSizes = append(unmeasuredSizes, plot.Number(float64(n)))
		}
	}
	var notes []string
	if len(dates) > 0 {
		notes = append(notes, "Each point is the latest run at that size: "+strings.Join(dates, "; ")+".")
	}
	if len(unmeasuredSizes) > 0 {
		notes = append(notes, "Not measured yet: "+strings.Join(unmeasuredSizes, " and ")+" tasks.")
	}
	if len(unmeasuredServers) > 0 {
		notes = append(notes, "Not measured yet: the "+strings.Join(unmeasuredServers, " and the ")+" server.")
	}
	notes = append(notes, "Figures: bench/results/"+CostFile+".")
	runs.Notes, rss.Notes = notes, notes
	return runs, rss
}

// latencyCases are the cases of BenchmarkInteractiveLatency in the order drawn, and what the
// picture's notes say of each.
var latencyCases = []struct{ name, note string }{
	{"idle", "idle: the queue idle"},
	{"loaded", "loaded: under two batches as they saturate the worker (their first children starting), the run at its default priority (2)"},
	{"steady", "steady: the same batches once each has finished its first children and starts one as one ends"},
	{"fair-only", "fair-only: the steady load, the run at the batches' priority with a fairness key of its own"},
}

// LatencyChart draws the latest run of rows (the latest date; of that date, the latest server
// to appear): p50 and p99 of each case as bars.
func LatencyChart(rows []LatencyRow) plot.BarChart {
	c := plot.BarChart{Title: "Interactive latency under batches (BenchmarkInteractiveLatency)",
		YLabel: "start to outcome (ms)", Unit: " ms"}
	var date, server string
	for _, r := range rows {
		if r.Date >= date {
			date, server = r.Date, r.Server
		}
	}
	p50 := plot.BarSeries{Name: "p50", Color: "#0072b2"}
	p99 := plot.BarSeries{Name: "p99", Color: "#d55e00"}
	value := func(name string) (float64, float64) {
		v50, v99 := math.NaN(), math.NaN()
		for _, r := range rows {
			if r.Date == date && r.Server == server && r.Case == name {
				v50, v99 = r.P50ms, r.P99ms
			}
		}
		return v50, v99
	}
	names := []string{}
	for _, k := range latencyCases {
		names = append(names, k.name)
		c.Notes = append(c.Notes, k.note+".")
	}
	for _, r := range rows {
		if r.Date == date && r.Server == server && !slices.Contains(names, r.Case) {
			names = append(names, r.Case)
		}
	}
	for _, name := range names {
		v50, v99 := value(name)
		c.Groups = append(c.Groups, name)
		p50.Values, p99.Values = append(p50.Values, v50), append(p99.Values, v99)
	}
	c.Series = []plot.BarSeries{p50, p99}
	if date == "" {
		c.Notes = append(c.Notes, "Not measured yet.")
	} else {
		c.Notes = append(c.Notes, fmt.Sprintf("The run of %s on the %s server; figures: bench/results/%s.", date, server, LatencyFile))
	}
	return c
}
