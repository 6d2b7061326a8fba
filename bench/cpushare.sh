#!/usr/bin/env bash
# cpushare.sh splits a CPU profile of a benchmark by package prefix: subflow's own packages,
# the Temporal server, the Temporal SDK, SQLite, gRPC/protobuf, the Go runtime and the rest.
#
#	go test -run '^$' -bench HotPath/batch -benchtime 1x -cpuprofile /tmp/cpu.out ./bench/
#	bash bench/cpushare.sh /tmp/cpu.out
#
# "flat" is the CPU spent in a group's own functions (`go tool pprof -top`, every function,
# summed by prefix); "under" is the share of samples with a frame of the group anywhere on the
# stack (`-focus`), i.e. the group's code and everything it called.
set -euo pipefail
profile=${1:?usage: cpushare.sh cpu.out}

groups=(
	"subflow=^github\.com/subflow-dev/subflow/"
	"temporal-server=^go\.temporal\.io/server/"
	"temporal-sdk=^go\.temporal\.io/sdk"
	"sqlite=^modernc\.org/"
	"grpc-protobuf=^(google\.golang\.org/|github\.com/gogo/)"
	"go-sql=^(database/sql|github\.com/jmoiron/sqlx)"
	"runtime=^(runtime|internal/|sync|syscall)"
)

echo "flat share by package prefix:"
go tool pprof -top -nodecount=1000000 -nodefraction=0 "$profile" 2>/dev/null | awk -v specs="${groups[*]}" '
	BEGIN { n = split(specs, s, " "); for (i = 1; i <= n; i++) { split(s[i], kv, "="); name[i] = kv[1]; re[i] = kv[2] } }
	$1 ~ /^[0-9.]+(ms|s|us|ns|min|h)$/ && $2 ~ /%$/ {
		pct = $2; sub(/%/, "", pct); fn = $6
		for (i = 1; i <= n; i++) if (fn ~ re[i]) { share[name[i]] += pct; next }
		share["other"] += pct
	}
	END {
		for (i = 1; i <= n; i++) printf "  %-16s %6.1f%%\n", name[i], share[name[i]]
		printf "  %-16s %6.1f%%\n", "other", share["other"]
	}'

echo "samples with the group on the stack:"
for g in "${groups[@]:0:3}"; do
	printf "  %-16s %s\n" "${g%%=*}" "$(go tool pprof -top -focus "${g#*=}" "$profile" 2>/dev/null |
		sed -n 's/.*Showing nodes accounting for .*, \([0-9.]*%\) of .* total.*/\1/p')"
done
