// Command worker is the subflow Temporal worker (contract R-80): it serves StartSubagent, the
// batch and their activities on a task queue until SIGINT or SIGTERM, then drains — running
// drives are suspended, unfinished, for another worker to resume; sdk children are disposed.
// Its subcommands are `worker replay` (the replay gate of docs/deployment.md), `worker version`
// and `worker child-runtime` (the sdk child runtime, the default sdk child command).
//
// `worker -h` prints every flag, generated from the one place that declares them
// (worker/app.Main); docs/cli.md documents each.
package main

import (
	"os"

	"github.com/subflow-dev/subflow/worker/app"
)

func main() {
	os.Exit(app.Main(os.Args, os.Stdout, os.Stderr))
}
