// Package figures holds the figures files of bench/results, which BenchmarkBatch10k and
// BenchmarkInteractiveLatency append to when SUBFLOW_BENCH_RECORD is 1, and draws the
// pictures docs/benchmarks.md shows from them (Render).
//
// A figures file is tab-separated text: lines starting with # are comments, the first other
// line is the header (the columns in order), and each line after it is one measurement.
// Dates are ISO 8601 in UTC and compare as text, so the latest of two is the greater.
// A value not measured is "-".
package figures

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// The figures files, in bench/results.
const (
	CostFile    = "cost-curve.tsv"
	LatencyFile = "interactive-latency.tsv"
)

// CostRow is one size of one run of BenchmarkBatch10k: a batch of Tasks scripted runs and the
// engine's ceiling at that size, on Server ("embedded", "cluster", …).
type CostRow struct {
	Date, Server string
	Tasks        int
	// RunsPerSec is the batch's, CeilingRunsPerSec the engine's ceiling at the same size:
	// a bare workflow running as many one-activity children.
	RunsPerSec, CeilingRunsPerSec float64
	// WorkerMB and StarterMB are the peak RSS (VmHWM) of the worker and starter processes.
	WorkerMB, StarterMB float64
	// Note says where the row comes from.
	Note string
}

// LatencyRow is one case of one run of BenchmarkInteractiveLatency: Case is "idle",
// "loaded", "steady" or "fair-only" (runs before 2026-12-07 have no "steady").
type LatencyRow struct {
	Date, Server, Case string
	P50ms, P99ms       float64
	Note               string
}

var (
	costHeader    = []string{"date", "server", "tasks", "runs/s", "ceiling runs/s", "worker peak RSS MB", "starter peak RSS MB", "note"}
	latencyHeader = []string{"date", "server", "case", "p50 ms", "p99 ms", "note"}
)

// ReadCost reads the rows of the cost-curve figures file at path.
func ReadCost(path string) ([]CostRow, error) {
	var rows []CostRow
	err := readTable(path, costHeader, func(f fields) {
		rows = append(rows, CostRow{Date: f.text(0), Server: f.text(1), Tasks: f.int(2),
			RunsPerSec: f.float(3), CeilingRunsPerSec: f.float(4), WorkerMB: f.float(5), StarterMB: f.float(6), Note: f.text(7)})
	})
	return rows, err
}

// AppendCost appends rows to the cost-curve figures file at path, creating it with its header
// if it does not exist.
func AppendCost(path string, rows ...CostRow) error {
	lines := make([][]string, len(rows))
	for i, r := range rows {
		lines[i] = []string{r.Date, r.Server, strconv.Itoa(r.Tasks), formatFloat(r.RunsPerSec), formatFloat(r.CeilingRunsPerSec),
			formatFloat(r.WorkerMB), formatFloat(r.StarterMB), r.Note}
	}
	return appendTable(path, costHeader, lines)
}

// ReadLatency reads the rows of the interactive-latency figures file at path.
func ReadLatency(path string) ([]LatencyRow, error) {
	var rows []LatencyRow
	err := readTable(path, latencyHeader, func(f fields) {
		rows = append(rows, LatencyRow{Date: f.text(0), Server: f.text(1), Case: f.text(2),
			P50ms: f.float(3), P99ms: f.float(4), Note: f.text(5)})
	})
	return rows, err
}

// AppendLatency appends rows to the interactive-latency figures file at path, creating it with
// its header if it does not exist.
func AppendLatency(path string, rows ...LatencyRow) error {
	lines := make([][]string, len(rows))
	for i, r := range rows {
		lines[i] = []string{r.Date, r.Server, r.Case, formatFloat(r.P50ms), formatFloat(r.P99ms), r.Note}
	}
	return appendTable(path, latencyHeader, lines)
}

// notMeasured is the cell of a value not measured.
const notMeasured = "-"

// formatFloat writes a figure with two decimals, which is more than any of them carries.
func formatFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return notMeasured
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// fields is one line of a table; the first cell that does not parse sets err.
type fields struct {
	cells  []string
	header []string
	err    *error
}

func (f fields) text(i int) string { return f.cells[i] }

func (f fields) float(i int) float64 {
	if f.cells[i] == notMeasured {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f.cells[i], 64)
	if err != nil && *f.err == nil {
		*f.err = fmt.Errorf("column %q: %q is not a number", f.header[i], f.cells[i])
	}
	return v
}

func (f fields) int(i int) int {
	v, err := strconv.Atoi(f.cells[i])
	if err != nil && *f.err == nil {
		*f.err = fmt.Errorf("column %q: %q is not a whole number", f.header[i], f.cells[i])
	}
	return v
}

// readTable calls row for each line of the table at path after its header, which must be
// header.
func readTable(path string, header []string, row func(fields)) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read figures: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	seenHeader := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cells := strings.Split(line, "\t")
		if !seenHeader {
			if strings.Join(cells, "\t") != strings.Join(header, "\t") {
				return fmt.Errorf("read figures %s:%d: header %q, want %q", path, n, cells, header)
			}
			seenHeader = true
			continue
		}
		if len(cells) != len(header) {
			return fmt.Errorf("read figures %s:%d: %d columns, want %d (%s)", path, n, len(cells), len(header), strings.Join(header, ", "))
		}
		var cellErr error
		row(fields{cells: cells, header: header, err: &cellErr})
		if cellErr != nil {
			return fmt.Errorf("read figures %s:%d: %w", path, n, cellErr)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read figures %s: %w", path, err)
	}
	if !seenHeader {
		return fmt.Errorf("read figures %s: no header line (%s)", path, strings.Join(header, ", "))
	}
	return nil
}

// appendTable appends lines to the table at path, writing header first if the file is new.
// A cell may not hold a tab or a line break: that would shift every column after it.
func appendTable(path string, header []string, lines [][]string) error {
	var b strings.Builder
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		b.WriteString(strings.Join(header, "\t") + "\n")
	}
	for _, cells := range lines {
		for i, c := range cells {
			if strings.ContainsAny(c, "\t\r\n") {
				return fmt.Errorf("append figures to %s: column %q: %q holds a tab or line break", path, header[i], c)
			}
		}
		b.WriteString(strings.Join(cells, "\t") + "\n")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append figures: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("append figures to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append figures to %s: %w", path, err)
	}
	return nil
}
