#!/usr/bin/env bash
# clustercpu.sh says where the CPU of a benchmark on deploy/local-cluster goes: each Temporal
# service, PostgreSQL and the benchmark's own process (its worker), per task of a window.
#
#	bash bench/clustercpu.sh sample FILE &       # a line a second: time and CPU ticks by process group
#	bash bench/cluster.sh -bench HotPath/batch   # or any benchmark, on the running cluster
#	kill %1                                      # the sampler runs until stopped
#	bash bench/clustercpu.sh split FILE FROM TO N
#
# split prints the CPU milliseconds per task of each group between FROM and TO (RFC 3339, as
# `temporal workflow list -o json` gives the start and close times of the runs that bound a
# phase) for N tasks, interpolating between samples. The cluster's processes are found with
# deploy/local-cluster/cluster.sh pid (SUBFLOW_CLUSTER_DIR as for it); the benchmark's is the
# process named bench.test, and for another worker SUBFLOW_CPU_WORKER names a pgrep -f pattern.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=deploy/local-cluster/cluster.sh

usage() {
	echo "usage: bash bench/clustercpu.sh sample FILE | split FILE FROM TO N" >&2
	exit 2
}

sample() {
	local out=$1 hp mp fp ip
	hp=" $("$cluster" pid history-1) $("$cluster" pid history-2) "
	mp=" $("$cluster" pid matching) " fp=" $("$cluster" pid frontend) " ip=" $("$cluster" pid internal-worker) "
	while :; do
		local wp now
		wp=" $(pgrep -d' ' -f "${SUBFLOW_CPU_WORKER:-bench.test}" || true) "
		now=$(date +%s.%N)
		for f in /proc/[0-9]*/stat; do
			local line pid rest comm
			read -r line <"$f" 2>/dev/null || continue
			pid=${f#/proc/}
			pid=${pid%/stat}
			# The fields after the command name, which may hold spaces: utime and stime are
			# the 12th and 13th of them.
			rest=${line##*) }
			comm=${line#*(}
			comm=${comm%%)*}
			# shellcheck disable=SC2086
			set -- $rest
			local ticks=$((${12} + ${13})) group=
			if [[ $hp == *" $pid "* ]]; then group=history
			elif [[ $mp == *" $pid "* ]]; then group=matching
			elif [[ $fp == *" $pid "* ]]; then group=frontend
			elif [[ $ip == *" $pid "* ]]; then group=internal-worker
			elif [[ $comm == postgres ]]; then group=postgres
			elif [[ $wp == *" $pid "* ]]; then group=worker
			fi
			# An if, not [ … ] && echo: the loop would end on a false test, and with
			# pipefail the sampler with it.
			if [ -n "$group" ]; then echo "$group $ticks"; fi
		done | awk -v now="$now" '{a[$1] += $2} END {printf "%s", now; for (k in a) printf " %s=%d", k, a[k]; print ""}' >>"$out"
		sleep 1
	done
}

split() {
	local file=$1 from to n=$4
	from=$(date -d "$2" +%s.%N) || usage
	to=$(date -d "$3" +%s.%N) || usage
	awk -v from="$from" -v to="$to" -v n="$n" -v hz="$(getconf CLK_TCK)" '
	{
		t[NR] = $1
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2]; groups[kv[1]] = 1 }
	}
	# at interpolates group g at time x between the samples around it.
	function at(x, g,   i) {
		for (i = 1; i < NR; i++)
			if (t[i] <= x && x <= t[i + 1])
				return v[i, g] + (v[i + 1, g] - v[i, g]) * (x - t[i]) / (t[i + 1] - t[i])
		printf "clustercpu: %s is outside the samples (%s to %s)\n", x, t[1], t[NR] > "/dev/stderr"
		exit 1
	}
	END {
		total = 0
		for (g in groups) {
			ms = (at(to, g) - at(from, g)) * 1000 / hz / n
			total += ms
			printf "%-16s %7.1f ms/task\n", g, ms
		}
		printf "%-16s %7.1f ms/task over %.1f s: %.2f cores busy\n", "total", total, to - from, total * n / 1000 / (to - from)
	}' "$file"
}

case ${1:-} in
sample) [ $# -eq 2 ] || usage; sample "$2" ;;
split) [ $# -eq 5 ] || usage; split "$2" "$3" "$4" "$5" ;;
*) usage ;;
esac
