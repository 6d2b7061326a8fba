// Command subflow-agent is the child runtime of the SDK subprocess provider: an agent runtime
// serving JSON-RPC 2.0 on stdin/stdout (see package internal/sdkproc/server).
//
//	subflow-agent [--config PRESETS.json] [--session-root DIR]
package main

import (
	"os"

	"github.com/subflow-dev/subflow/internal/sdkproc/server"
)

func main() { os.Exit(server.Main()) }
