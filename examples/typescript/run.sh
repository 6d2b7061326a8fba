#!/usr/bin/env bash
# Runs the TypeScript example's tests against a real subflow: builds the starter, serves
# `starter dev` (the embedded Temporal server and a worker) on free ports, runs
# `npm ci && npm test` against it, and stops it. CI calls this (.ci/run); it needs Go, Node
# (>= 20.3) and npm.
set -euo pipefail
cd "$(dirname "$0")"

work=$(mktemp -d)
dev=
cleanup() {
  if [ -n "$dev" ]; then
    kill -TERM "$dev" 2>/dev/null || true
    wait "$dev" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd ../.. && go build -o "$work/starter" ./starter)
SUBFLOW_SESSION_ROOT="$work/sessions" "$work/starter" dev --port 0 --ui-port 0 >"$work/dev.log" 2>&1 &
dev=$!
for _ in $(seq 600); do
  grep -q 'Serving until interrupted' "$work/dev.log" && break
  if ! kill -0 "$dev" 2>/dev/null; then
    cat "$work/dev.log"
    echo "run.sh: starter dev exited" >&2
    exit 1
  fi
  sleep 0.2
done
address=$(sed -n 's/^ *export TEMPORAL_ADDRESS=//p' "$work/dev.log")
if [ -z "$address" ]; then
  cat "$work/dev.log"
  echo "run.sh: starter dev did not start in 2 minutes" >&2
  exit 1
fi
echo "run.sh: starter dev serves $address"

npm ci --no-audit --no-fund
if ! TEMPORAL_ADDRESS=$address npm test; then
  echo "--- starter dev's log:" >&2
  tail -n 50 "$work/dev.log" >&2
  exit 1
fi
