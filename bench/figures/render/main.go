// Command render redraws the pictures of docs/benchmarks.md (docs/img/cost-curve.svg,
// docs/img/cost-curve-rss.svg, docs/img/interactive-latency.svg) from the figures files in
// bench/results. Run it from the repository's root:
//
//	go run ./bench/figures/render
//
// The benchmarks redraw them themselves when they record (SUBFLOW_BENCH_RECORD=1); this is
// for a figures file edited by hand.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/subflow-dev/subflow/bench/figures"
)

func main() {
	results := flag.String("results", "bench/results", "the folder of the figures files")
	img := flag.String("img", "docs/img", "the folder the pictures are written to")
	flag.Parse()
	if err := figures.Render(*results, *img); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
