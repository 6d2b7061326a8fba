#!/usr/bin/env bash
# cli-devserver.sh runs a benchmark of this package against the stock Temporal CLI dev server
# (`temporal server start-dev`, SQLite in memory, its own defaults) instead of the embedded
# server of devserver/, so a figure can be told apart from our own server tuning:
#
#	bash bench/cli-devserver.sh                       # BenchmarkHotPath, default sizes
#	bash bench/cli-devserver.sh -bench HotPath/batch  # other `go test` flags
#
# It installs the CLI (github.com/temporalio/cli v1.5.1) into a temporary GOBIN — not into
# go.mod — unless TEMPORAL_CLI names a temporal binary already; starts the server headless on
# free ports of 127.0.0.1 with subflow's search attributes; runs `go test` in ./bench/ with
# SUBFLOW_BENCH_TEMPORAL_ADDRESS set; and stops the server (and removes the temporary GOBIN)
# when it exits, however it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

CLI_VERSION=v1.5.1
tmp=$(mktemp -d)
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
log() { echo "cli-devserver: $*" >&2; }

temporal=${TEMPORAL_CLI:-}
if [ -z "$temporal" ]; then
	log "installing the Temporal CLI $CLI_VERSION into $tmp/bin"
	GOBIN=$tmp/bin go install "github.com/temporalio/cli/cmd/temporal@$CLI_VERSION"
	temporal=$tmp/bin/temporal
fi

# A port the kernel gives out now; the server binds it a moment later.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_server starts the server and waits until it is healthy. The CLI also picks the ports of
# its history, matching and worker services just before binding them, and exits when another
# process took one meanwhile (a busy machine), so a failed start is tried again.
start_server() {
	port=$(free_port)
	# The search attributes of workflows.SearchAttributes (devserver registers the same;
	# TestSearchAttributesDocumented checks this list).
	"$temporal" server start-dev --headless --ip 127.0.0.1 --port "$port" \
		--http-port "$(free_port)" --metrics-port "$(free_port)" --log-level error \
		--search-attribute SubagentProvider=Keyword --search-attribute SubagentModel=Keyword \
		--search-attribute SubagentParent=Keyword --search-attribute SubagentChild=Keyword \
		--search-attribute SubagentStopReason=Keyword --search-attribute SubagentBatch=Keyword \
		--search-attribute SubagentDepth=Int --search-attribute SubagentLabel=Text \
		--search-attribute SubagentInputTokens=Int --search-attribute SubagentOutputTokens=Int \
		--search-attribute SubagentRetryOf=Keyword \
		>"$tmp/server.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 1 120); do
		"$temporal" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1 && return 0
		if ! kill -0 "$server_pid" 2>/dev/null; then
			wait "$server_pid" 2>/dev/null || true
			server_pid=
			return 1
		fi
		sleep 0.5
	done
	kill "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=
	return 1
}

started=
for attempt in 1 2 3; do
	if start_server; then
		started=1
		break
	fi
	log "start $attempt failed: $(grep -m 1 -i error "$tmp/server.log" || true)"
done
[ -n "$started" ] || { cat "$tmp/server.log" >&2; log "the server did not come up"; exit 1; }
log "temporal server start-dev ($("$temporal" --version | head -n 1)) on 127.0.0.1:$port"

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
	args=(-bench HotPath)
fi
SUBFLOW_BENCH_SERVER=cli-devserver SUBFLOW_BENCH_TEMPORAL_ADDRESS=127.0.0.1:$port \
	go test -run '^$' -benchtime 1x -timeout 30m "${args[@]}" ./bench/
