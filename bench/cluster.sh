#!/usr/bin/env bash
# cluster.sh runs a benchmark of this package against the deployed shape of
# deploy/local-cluster (Temporal's services as separate processes on PostgreSQL) and then
# against the embedded server, one right after the other, so that each server's figures are
# ratios to that server's own ceilings and the two can be read side by side:
#
#	bash bench/cluster.sh                       # BenchmarkHotPath, default sizes
#	bash bench/cluster.sh -bench HotPath/batch  # other `go test` flags
#
# It brings the cluster up unless one runs already in SUBFLOW_CLUSTER_DIR (default
# ${TMPDIR:-/tmp}/subflow-local-cluster), and stops the cluster's own two subflow workers while
# it measures: the benchmark runs its own in-process worker on both servers, so only the
# server differs. The workers are started again when it exits; a cluster it brought up is
# stopped (not purged). With SUBFLOW_BENCH_RECORD=1, a benchmark that records its figures in
# bench/results (BenchmarkBatch10k, BenchmarkInteractiveLatency) records the cluster's as server
# "cluster" and the embedded server's as "embedded". SUBFLOW_BENCH_SERVERS=cluster measures the
# cluster alone (a 100,000-task batch takes over an hour on each server), =embedded the
# embedded server alone (no cluster is brought up), and a -timeout among the flags replaces
# the default 60m:
#
#	SUBFLOW_BENCH_SERVERS=cluster SUBFLOW_BENCH_RUNS=100000 bash bench/cluster.sh -bench Batch10k -timeout 240m
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "bench/cluster: $*" >&2; }

# The servers are checked before anything starts, so a misspelt one costs no cluster start.
servers=${SUBFLOW_BENCH_SERVERS:-cluster embedded}
for server in $servers; do
	case $server in
	cluster | embedded) ;;
	*)
		log "SUBFLOW_BENCH_SERVERS: unknown server '$server' (want 'cluster', 'embedded' or 'cluster embedded')"
		exit 2
		;;
	esac
done
cluster=deploy/local-cluster/cluster.sh

# The embedded server alone needs no cluster.
if [[ " $servers " == *" cluster "* ]]; then
	started=
	status=$("$cluster" status 2>/dev/null || true)
	if ! grep -q '^frontend running' <<<"$status"; then
		log "bringing the local cluster up"
		"$cluster" up >/dev/null
		started=1
	fi
	restore() {
		if [ -n "$started" ]; then
			"$cluster" down || true
		else
			"$cluster" start worker-1 worker-2 || true
		fi
	}
	trap restore EXIT
	"$cluster" stop worker-1 worker-2
	address=$("$cluster" env | sed -n 's/^export TEMPORAL_ADDRESS=\([^ ]*\).*/\1/p')
fi

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
	args=(-bench HotPath)
fi
for server in $servers; do
	case $server in
	cluster)
		log "the cluster at $address (load: $(cut -d' ' -f1-3 /proc/loadavg))"
		SUBFLOW_BENCH_SERVER=cluster SUBFLOW_BENCH_TEMPORAL_ADDRESS=$address go test -run '^$' -benchtime 1x -timeout 60m "${args[@]}" ./bench/
		;;
	embedded)
		log "the embedded server (load: $(cut -d' ' -f1-3 /proc/loadavg))"
		go test -run '^$' -benchtime 1x -timeout 60m "${args[@]}" ./bench/
		;;
	esac
done
