package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/bench/figures"
)

// recordEnv set to 1 makes BenchmarkBatch10k and BenchmarkInteractiveLatency append their
// figures to the figures files of bench/results and redraw the pictures of
// docs/benchmarks.md in docs/img. Off by default: a casual run leaves the tree as it was.
const recordEnv = "SUBFLOW_BENCH_RECORD"

// serverEnv names the server of SUBFLOW_BENCH_TEMPORAL_ADDRESS in the figures files
// (bench/cluster.sh sets "cluster"); without it such a server is "external".
const serverEnv = "SUBFLOW_BENCH_SERVER"

// The figures files and the pictures, from bench/, where go test runs the benchmarks.
var (
	resultsDir  = "results"
	picturesDir = filepath.Join("..", "docs", "img")
)

// recordStamp is what every row of one recorded run says of it: when it ended, the server it
// measured, and the machine's load average then (on a shared machine, the figure's context).
type recordStamp struct{ date, server, note string }

func newRecordStamp(bench string) recordStamp {
	server := "embedded"
	if os.Getenv(dbFileEnv) != "" {
		// Its own series: the store on a file is half as fast as in memory.
		server = "embedded-file"
	}
	if os.Getenv(externalServerEnv) != "" {
		server = "external"
		if s := os.Getenv(serverEnv); s != "" {
			server = s
		}
	}
	note := bench
	if load, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(load))) >= 3 {
		note += ", load average " + strings.Join(strings.Fields(string(load))[:3], " ") + " at the end"
	}
	return recordStamp{date: time.Now().UTC().Format(time.RFC3339), server: server, note: note}
}

// record, when recordEnv is 1, calls add with the run's stamp to append its rows to
// bench/results, then redraws the pictures from the files.
func record(b *testing.B, bench string, add func(s recordStamp) error) {
	if os.Getenv(recordEnv) != "1" {
		return
	}
	require.NoError(b, add(newRecordStamp(bench)))
	require.NoError(b, figures.Render(resultsDir, picturesDir))
	b.Logf("%s: figures appended to bench/results, pictures redrawn in docs/img", bench)
}
