package figures

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/subflow-dev/subflow/bench/plot"
)

func TestAppendedRowsReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), CostFile)
	first := CostRow{Date: "2026-12-05T03:00:00Z", Server: "embedded", Tasks: 1000, RunsPerSec: 32.7, CeilingRunsPerSec: math.NaN(),
		WorkerMB: 82.126, StarterMB: 172, Note: "load 1.20"}
	second := CostRow{Date: "2026-12-05T03:00:00Z", Server: "embedded", Tasks: 10_000, RunsPerSec: 26.2, CeilingRunsPerSec: 39.3,
		WorkerMB: 87, StarterMB: 171}
	if err := AppendCost(path, first); err != nil {
		t.Fatal(err)
	}
	if err := AppendCost(path, second); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadCost(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("read %d rows, want 2: %+v", len(rows), rows)
	}
	// Two decimals are kept; a ceiling not measured stays not measured.
	got := rows[0]
	if !math.IsNaN(got.CeilingRunsPerSec) || got.WorkerMB != 82.13 || got.Note != "load 1.20" || got.Tasks != 1000 {
		t.Errorf("first row read back as %+v", got)
	}
	if rows[1].RunsPerSec != 26.2 || rows[1].Tasks != 10_000 {
		t.Errorf("second row read back as %+v", rows[1])
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "date\t"); n != 1 {
		t.Errorf("the header is written %d times:\n%s", n, data)
	}

	lpath := filepath.Join(t.TempDir(), LatencyFile)
	if err := AppendLatency(lpath, LatencyRow{Date: "2026-12-05", Server: "embedded", Case: "idle", P50ms: 9.95, P99ms: 15.5}); err != nil {
		t.Fatal(err)
	}
	lrows, err := ReadLatency(lpath)
	if err != nil || len(lrows) != 1 || lrows[0].Case != "idle" || lrows[0].P99ms != 15.5 {
		t.Errorf("ReadLatency = %+v, %v", lrows, err)
	}
}

func TestAppendRejectsACellThatWouldShiftTheColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), CostFile)
	err := AppendCost(path, CostRow{Date: "d", Server: "embedded", Tasks: 1, Note: "two\tcells"})
	if err == nil || !strings.Contains(err.Error(), `"note"`) {
		t.Fatalf("AppendCost with a tab in the note = %v, want an error naming the column", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the rejected row created the file")
	}
}

func TestReadNamesTheBadLine(t *testing.T) {
	header := "date\tserver\ttasks\truns/s\tceiling runs/s\tworker peak RSS MB\tstarter peak RSS MB\tnote\n"
	for name, c := range map[string]struct{ text, want string }{
		"bad number":   {"# c\n" + header + "d\tembedded\t1000\tfast\t1\t1\t1\tn\n", `:3: column "runs/s": "fast" is not a number`},
		"bad size":     {header + "d\tembedded\t1e3\t1\t1\t1\t1\tn\n", `:2: column "tasks": "1e3" is not a whole number`},
		"few columns":  {header + "d\tembedded\t1000\t1\n", ":2: 4 columns, want 8"},
		"wrong header": {"date\tserver\n", ":1: header"},
		"no header":    {"# only a comment\n", "no header line"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CostFile)
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadCost(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadCost = %v, want an error naming %s and %q", err, path, c.want)
			}
		})
	}
	if _, err := ReadCost(filepath.Join(t.TempDir(), "missing.tsv")); err == nil {
		t.Error("ReadCost of a missing file: no error")
	}
}

// points returns the points of the series named name.
func points(t *testing.T, c plot.LineChart, name string) []plot.Point {
	t.Helper()
	for _, s := range c.Series {
		if s.Name == name {
			return s.Points
		}
	}
	t.Fatalf("no series %q in %q", name, c.Title)
	return nil
}

func TestCostChartsDrawTheLatestRunOfEachSize(t *testing.T) {
	rows := []CostRow{
		{Date: "2026-12-03T09:04Z", Server: "embedded", Tasks: 1000, RunsPerSec: 32.7, CeilingRunsPerSec: 48.8, WorkerMB: 82, StarterMB: 172},
		{Date: "2026-12-03T09:04Z", Server: "embedded", Tasks: 10_000, RunsPerSec: 26.2, CeilingRunsPerSec: 39.3, WorkerMB: 87, StarterMB: 171},
		{Date: "2026-12-06T10:00:00Z", Server: "embedded", Tasks: 1000, RunsPerSec: 30, CeilingRunsPerSec: 45, WorkerMB: 80, StarterMB: 170},
		{Date: "2026-12-06T10:00:00Z", Server: "embedded", Tasks: 50_000, RunsPerSec: 20, CeilingRunsPerSec: 30, WorkerMB: 90, StarterMB: 171},
		{Date: "2026-12-01", Server: "embedded", Tasks: 10_000, RunsPerSec: 1, CeilingRunsPerSec: 1, WorkerMB: 1, StarterMB: 1},
	}
	runs, rss := CostCharts(rows)
	want := []plot.Point{{X: 1000, Y: 30}, {X: 10_000, Y: 26.2}, {X: 50_000, Y: 20}}
	if got := points(t, runs, "subflow Batch, embedded"); !slices.Equal(got, want) {
		t.Errorf("batch runs/s %v, want %v", got, want)
	}
	if got := points(t, runs, "engine ceiling, embedded"); len(got) != 3 || got[0].Y != 45 {
		t.Errorf("ceiling %v", got)
	}
	if got := points(t, rss, "starter, embedded"); len(got) != 3 || got[2].Y != 171 {
		t.Errorf("starter RSS %v", got)
	}
	if got := points(t, runs, "subflow Batch, cluster"); len(got) != 0 {
		t.Errorf("cluster drawn from no rows: %v", got)
	}
	notes := strings.Join(runs.Notes, "\n")
	for _, want := range []string{"Not measured yet: 100,000 tasks.", "the cluster server", "2026-12-06T10:00:00Z"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q do not say %q", notes, want)
		}
	}
	if strings.Contains(notes, "50,000") {
		t.Errorf("notes %q call the measured 50,000 not measured", notes)
	}

	// A cluster run draws the cluster's series and is no longer "not measured".
	runs, _ = CostCharts(append(rows, CostRow{Date: "2026-12-07", Server: "cluster", Tasks: 1000, RunsPerSec: 15, CeilingRunsPerSec: 20}))
	if got := points(t, runs, "subflow Batch, cluster"); len(got) != 1 || got[0].Y != 15 {
		t.Errorf("cluster batch %v", got)
	}
	if notes := strings.Join(runs.Notes, "\n"); strings.Contains(notes, "cluster server") {
		t.Errorf("notes %q call the measured cluster not measured", notes)
	}
}

func TestLatencyChartDrawsTheLatestRun(t *testing.T) {
	rows := []LatencyRow{
		{Date: "2026-12-05", Server: "embedded", Case: "idle", P50ms: 9.95, P99ms: 15.5},
		{Date: "2026-12-05", Server: "embedded", Case: "loaded", P50ms: 70.2, P99ms: 469},
		{Date: "2026-12-06T01:00:00Z", Server: "embedded", Case: "idle", P50ms: 10, P99ms: 16},
		{Date: "2026-12-06T01:00:00Z", Server: "embedded", Case: "loaded", P50ms: 20, P99ms: 80},
	}
	c := LatencyChart(rows)
	if !slices.Equal(c.Groups, []string{"idle", "loaded", "steady", "fair-only"}) {
		t.Fatalf("groups %q", c.Groups)
	}
	p50 := c.Series[0].Values
	if p50[0] != 10 || p50[1] != 20 || !math.IsNaN(p50[2]) || !math.IsNaN(p50[3]) {
		t.Errorf("p50 %v, want the 2026-12-06 run's, steady and fair-only not measured", p50)
	}
	if c := LatencyChart(nil); !slices.Contains(c.Notes, "Not measured yet.") {
		t.Errorf("no rows: notes %q", c.Notes)
	}
}

// TestPicturesMatchTheFigures keeps docs/img in step with bench/results: a figures file edited
// by hand and not redrawn fails here.
func TestPicturesMatchTheFigures(t *testing.T) {
	cost, err := ReadCost(filepath.Join("..", "results", CostFile))
	if err != nil {
		t.Fatal(err)
	}
	latency, err := ReadLatency(filepath.Join("..", "results", LatencyFile))
	if err != nil {
		t.Fatal(err)
	}
	pictures, err := Pictures(cost, latency)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pictures {
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", "img", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/img/%s is not drawn from bench/results: run go run ./bench/figures/render from the repository's root", name)
		}
	}
}
