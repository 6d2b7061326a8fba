#!/usr/bin/env bash
# cpupertask.sh measures where a batch's CPU goes: one `starter batch` of N scripted spawn
# tasks (2 KiB answers) on `starter dev --no-worker`, run by the worker program, each in its
# own process as users run them, and prints runs/s and the CPU per task of the server, the
# worker and the starter (utime + stime, from /proc/<pid>/stat before and after the batch, and
# from the starter's own rusage), with the starter's peak RSS:
#
#	bash bench/cpupertask.sh                 # 2,000 tasks at concurrency 50
#	bash bench/cpupertask.sh 5000 50
#	SUBFLOW_BENCH_BIN=/tmp/old bash bench/cpupertask.sh
#
# The binaries are built from this tree unless SUBFLOW_BENCH_BIN names a directory holding a
# `starter` and a `worker` already (to compare two builds: run each, alternated, on a quiet
# machine). Linux only (/proc); it needs python3 and GNU time at /usr/bin/time (Debian's
# package time). Everything it makes goes in a temporary directory, removed when it exits,
# with the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-2000}
concurrency=${2:-50}
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
log() { echo "cpupertask: $*" >&2; }

bin=${SUBFLOW_BENCH_BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/bin
	log "building the starter and the worker"
	go build -o "$bin/starter" ./starter
	go build -o "$bin/worker" ./worker
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/starter" dev --no-worker --port "$port" --ui-port 0 >"$tmp/dev.log" 2>&1 &
pids+=($!)
server=$!
export TEMPORAL_ADDRESS=127.0.0.1:$port TEMPORAL_NAMESPACE=default
for _ in $(seq 300); do grep -q Serving "$tmp/dev.log" && break; sleep 0.1; done
grep -q Serving "$tmp/dev.log" || { log "starter dev did not start:"; cat "$tmp/dev.log" >&2; exit 1; }

mkdir -p "$tmp/sessions" "$tmp/work"
"$bin/worker" --task-queue cpu --gc-every 0 --session-root "$tmp/sessions" >"$tmp/worker.log" 2>&1 &
pids+=($!)
worker=$!

python3 - "$tmp" "$n" <<'EOF'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
json.dump({"responses": [{"text": "a" * 2048}]}, open(f"{tmp}/script.json", "w"))
with open(f"{tmp}/tasks.jsonl", "w") as f:
    for _ in range(n):
        f.write(json.dumps({"task": "go", "cwd": f"{tmp}/work", "modelProvider": "scripted", "model": f"{tmp}/script.json"}) + "\n")
EOF
sleep 3 # the worker's pollers are up

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
s0=$(ticks $server) w0=$(ticks $worker) t0=$(date +%s.%N)
/usr/bin/time -f '%U %S %M' -o "$tmp/time" "$bin/starter" batch --task-queue cpu --concurrency "$concurrency" \
	--out "$tmp/results.jsonl" "$tmp/tasks.jsonl" >"$tmp/batch.log" 2>&1 ||
	{ log "starter batch failed:"; cat "$tmp/batch.log" >&2; exit 1; }
t1=$(date +%s.%N) s1=$(ticks $server) w1=$(ticks $worker)
read -r su ss rss <"$tmp/time"
results=$(wc -l <"$tmp/results.jsonl")
[ "$results" -eq "$n" ] || { log "$results results for $n tasks"; exit 1; }

awk -v n="$n" -v t0="$t0" -v t1="$t1" -v s=$((s1 - s0)) -v w=$((w1 - w0)) -v hz="$(getconf CLK_TCK)" \
	-v su="$su" -v ss="$ss" -v rss="$rss" 'BEGIN {
	t = t1 - t0; server = s * 1000 / hz / n; worker = w * 1000 / hz / n; starter = (su + ss) * 1000 / n
	printf "tasks %d  wall %.1f s  runs/s %.1f\n", n, t, n / t
	printf "CPU per task: server %.1f ms  worker %.1f ms  starter %.2f ms  total %.1f ms\n", server, worker, starter, server + worker + starter
	printf "starter peak RSS %d MB\n", rss / 1024
}'
