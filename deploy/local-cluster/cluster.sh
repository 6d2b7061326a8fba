#!/usr/bin/env bash
# cluster.sh runs the deployed shape of docker-compose.yml natively, without a container
# engine: PostgreSQL from Debian's packages, Temporal's services as separate processes of the
# server built from the pinned go.temporal.io/server module (this folder's go.mod), its Web UI,
# and two subflow workers sharing their sessions in PostgreSQL. docs/deployment.md says how to
# use it and where it differs from compose.
#
#	eval "$(deploy/local-cluster/up)"    # start what is not running; prints the export line
#	deploy/local-cluster/down [--purge]  # stop everything it started (--purge: and its data)
#	deploy/local-cluster/cluster.sh start|stop|kill|pid NAME...   one process, for fault tests
#	deploy/local-cluster/cluster.sh signal SIG NAME...           e.g. STOP and CONT
#	deploy/local-cluster/cluster.sh names | env | status
#
# NAME is one of postgres, history-1, history-2, matching, frontend, internal-worker, ui,
# worker-1, worker-2. Everything but the export line goes to stderr.
#
# Settings (environment): SUBFLOW_CLUSTER_DIR (state: data, logs, pid files, binaries; default
# ${TMPDIR:-/tmp}/subflow-local-cluster), SUBFLOW_CLUSTER_PG_PORT (PostgreSQL, default 5433);
# compose's .env gives the rest unless set: TEMPORAL_PORT (the frontend; the other services
# listen on the ports after it, their membership ports 300 below), TEMPORAL_UI_PORT,
# SUBFLOW_METRICS_PORT (worker-1; worker-2 the next port), POSTGRES_USER, POSTGRES_PASSWORD.
#
# The workers join the Worker Deployment SUBFLOW_DEPLOYMENT_NAME (default subflow) with the
# build id of the worker binary (SUBFLOW_BUILD_ID, else its module version or VCS revision,
# else sha-<the first 12 hex digits of its SHA-256>), and up makes that version current.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

log() { echo "local-cluster: $*" >&2; }
die() { log "$*"; exit 1; }
# die_log is die for a failure that NAME's log explains: its last lines go to stderr too, so a
# CI log shows the cause without the cluster's files.
die_log() {
	local name=$1
	shift
	log "$*"
	if [ -f "$logs/$name.log" ]; then
		log "last lines of $logs/$name.log:"
		tail -n 25 "$logs/$name.log" | cut -c1-600 >&2
	fi
	exit 1
}

dir=${SUBFLOW_CLUSTER_DIR:-${TMPDIR:-/tmp}/subflow-local-cluster}

# The settings the cluster was brought up with (so later commands reach the same ports),
# then compose's .env, for each variable the environment does not set.
settings=(TEMPORAL_PORT TEMPORAL_UI_PORT SUBFLOW_METRICS_PORT SUBFLOW_CLUSTER_PG_PORT POSTGRES_USER POSTGRES_PASSWORD SUBFLOW_DEPLOYMENT_NAME)
for file in "$dir/settings.env" "$repo/.env"; do
	[ -f "$file" ] || continue
	while IFS='=' read -r key value; do
		case "$key" in '' | '#'*) continue ;; esac
		if [ -z "${!key+set}" ]; then export "$key=$value"; fi
	done <"$file"
done
pg_port=${SUBFLOW_CLUSTER_PG_PORT:-5433}
port=$TEMPORAL_PORT
bin=$dir/bin
run=$dir/run
logs=$dir/log
pgdata=$dir/postgres
address=127.0.0.1:$port
deployment=${SUBFLOW_DEPLOYMENT_NAME:-subflow}
store="postgres://$POSTGRES_USER:$POSTGRES_PASSWORD@127.0.0.1:$pg_port/subflow?sslmode=disable"

names=(postgres history-1 history-2 matching frontend internal-worker ui worker-1 worker-2)

# as_pg runs a PostgreSQL command as the owner of the data directory: the postgres user when
# we are root (PostgreSQL refuses to run as root), else ourselves.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || die "no PostgreSQL server: apt-get install postgresql"
	echo "$d"
}

# needs installs what up runs, from Debian's packages when we are root.
needs() {
	local missing=()
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
	command -v nc >/dev/null || missing+=(netcat-openbsd)
	[ ${#missing[@]} = 0 ] && return
	[ "$(id -u)" = 0 ] || die "missing Debian packages: ${missing[*]} (sudo apt-get install ${missing[*]})"
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2
	# Debian's package starts a cluster of its own on 5432; ours has its own data and port.
}

# build builds the binaries into $bin: the Temporal server, its SQL tool, the UI server and
# operator/ (the part of the temporal CLI that setup-temporal.sh runs, as `temporal`) from
# this folder's module, out of the worker's dependency graph; the subflow worker and starter
# from the repository's. go build relinks only what changed.
build() {
	mkdir -p "$bin"
	log "building the Temporal server, SQL tool and Web UI server (deploy/local-cluster/go.mod)"
	# GOWORK=off: this folder is a module of its own, outside the repository's go.work.
	(cd "$here" && export GOWORK=off &&
		go build -o "$bin/temporal-server" go.temporal.io/server/cmd/server &&
		go build -o "$bin/temporal-sql-tool" go.temporal.io/server/cmd/tools/sql &&
		go build -o "$bin/temporal-ui-server" github.com/temporalio/ui-server/v2/cmd/server &&
		go build -o "$bin/temporal" ./operator)
	log "building the subflow worker and starter"
	(cd "$repo" && go build -o "$bin/subflow-worker" ./worker && go build -o "$bin/starter" ./starter)
}

pidfile() { echo "$run/$1.pid"; }

# build_id prints the Worker Deployment build id of the worker binary (see the top).
build_id() {
	local id=${SUBFLOW_BUILD_ID:-}
	[ -n "$id" ] || id=$("$bin/subflow-worker" version | sed -n 's/^  build id  //p')
	case "$id" in '' | none*) id=sha-$(sha256sum "$bin/subflow-worker" | cut -c1-12) ;; esac
	echo "$id"
}

# make_current makes the build of worker-1 the deployment's current version, once its workers
# poll (the version exists a moment after their first poll).
make_current() {
	local id i out
	id=$(cat "$run/worker-1.build")
	for i in $(seq 60); do
		if out=$(TEMPORAL_ADDRESS=$address TEMPORAL_NAMESPACE=default "$bin/starter" deployment set-current "$deployment" "$id" 2>&1); then
			log "$out"
			return 0
		fi
		sleep 1
	done
	die "could not make $deployment:$id current: $out"
}

# pid prints the pid of NAME when it runs.
pid() {
	local f p
	if [ "$1" = postgres ]; then
		f=$pgdata/postmaster.pid
		[ -f "$f" ] || return 1
		p=$(head -n 1 "$f")
	else
		f=$(pidfile "$1")
		[ -f "$f" ] || return 1
		p=$(cat "$f")
	fi
	alive "$p" || return 1
	echo "$p"
}

# alive reports whether process P runs: a killed process stays a zombie until its parent (an
# init that may be slow to reap) collects it, and a zombie does not count.
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

running() { pid "$1" >/dev/null; }

# launch starts a long-running process in its own session (so down and the fault tests signal
# it alone), its output in $logs/NAME.log, its pid in $run/NAME.pid.
launch() {
	local name=$1
	shift
	mkdir -p "$run" "$logs"
	setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
	echo $! >"$(pidfile "$name")"
}

wait_port() {
	local what=$1 hostport=$2 i
	for i in $(seq 600); do
		if nc -z -w 1 "${hostport%:*}" "${hostport#*:}" 2>/dev/null; then return 0; fi
		if [ -n "${3:-}" ] && ! running "$3"; then die_log "$3" "$what exited: see $logs/$3.log"; fi
		sleep 0.2
	done
	die_log "${3:-$what}" "$what did not listen on $hostport: see $logs/${3:-$what}.log"
}

# Ports of each Temporal service (gRPC, membership): the frontend on TEMPORAL_PORT and the
# others after it, as in Temporal's own defaults (7233 frontend, 7234 history, 7235 matching,
# 7239 worker, membership 300 below); the second history host takes 7236.
service_env() {
	local grpc membership
	case "$1" in
	frontend) grpc=$port ;;
	history-1) grpc=$((port + 1)) ;;
	matching) grpc=$((port + 2)) ;;
	history-2) grpc=$((port + 3)) ;;
	internal-worker) grpc=$((port + 6)) ;;
	esac
	membership=$((grpc - 300))
	# The variables of the server image's embedded config template, as compose sets them.
	echo DB=postgres12 POSTGRES_SEEDS=127.0.0.1 DB_PORT="$pg_port" \
		POSTGRES_USER="$POSTGRES_USER" POSTGRES_PWD="$POSTGRES_PASSWORD" \
		BIND_ON_IP=127.0.0.1 NUM_HISTORY_SHARDS=4 \
		DYNAMIC_CONFIG_FILE_PATH="$repo/deploy/temporal/dynamicconfig/development-sql.yaml" \
		FRONTEND_GRPC_PORT="$port" FRONTEND_MEMBERSHIP_PORT=$((port - 300)) FRONTEND_HTTP_PORT=$((port + 10))
	case "$1" in
	frontend) ;;
	history-*) echo HISTORY_GRPC_PORT=$grpc HISTORY_MEMBERSHIP_PORT=$membership ;;
	matching) echo MATCHING_GRPC_PORT=$grpc MATCHING_MEMBERSHIP_PORT=$membership ;;
	internal-worker) echo WORKER_GRPC_PORT=$grpc WORKER_MEMBERSHIP_PORT=$membership ;;
	esac
}

service_port() { service_env "$1" | tr ' ' '\n' | sed -n 's/^\(HISTORY\|MATCHING\|WORKER\)_GRPC_PORT=//p;' | head -n 1; }

start_postgres() {
	local pgb
	pgb=$(pg_bin)
	if [ ! -f "$pgdata/PG_VERSION" ]; then
		log "creating a PostgreSQL cluster in $pgdata (port $pg_port)"
		mkdir -p "$pgdata"
		chmod 700 "$pgdata"
		[ "$(id -u)" = 0 ] && chown postgres: "$pgdata"
		local pw=$dir/.pgpass-init
		printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
		[ "$(id -u)" = 0 ] && chown postgres: "$pw"
		# POSTGRES_USER is the superuser, as in the postgres image compose runs.
		as_pg "$pgb/initdb" -D "$pgdata" -U "$POSTGRES_USER" --pwfile="$pw" \
			--auth-local=trust --auth-host=scram-sha-256 >"$logs/postgres-init.log" 2>&1 ||
			die_log postgres-init "initdb failed: see $logs/postgres-init.log"
		rm -f "$pw"
	fi
	[ "$(id -u)" = 0 ] && touch "$logs/postgres.log" && chown postgres: "$logs/postgres.log"
	log "starting PostgreSQL on 127.0.0.1:$pg_port"
	# Five Temporal processes hold up to 22 connections each, the workers a pool each.
	as_pg "$pgb/pg_ctl" -D "$pgdata" -l "$logs/postgres.log" -w -t 120 \
		-o "-p $pg_port -c listen_addresses=127.0.0.1 -k $pgdata -c max_connections=300" start >&2
}

start_one() {
	local name=$1
	if running "$name"; then return; fi
	case "$name" in
	postgres) start_postgres ;;
	frontend | history-* | matching | internal-worker)
		local service=${name%-[0-9]}
		[ "$name" = internal-worker ] && service=worker
		log "starting Temporal $name"
		# shellcheck disable=SC2046 # service_env prints NAME=VALUE words without spaces
		launch "$name" env $(service_env "$name") "$bin/temporal-server" start --service "$service"
		;;
	ui)
		# The UI image's own config template (config/docker.yaml of ui-server), bound to loopback.
		local ui=$dir/ui/config
		mkdir -p "$ui"
		sed 's/\r$//' "$(cd "$here" && GOWORK=off go list -m -f '{{.Dir}}' github.com/temporalio/ui-server/v2)/config/docker.yaml" >"$ui/docker.yaml"
		printf '\nhost: 127.0.0.1\n' >>"$ui/docker.yaml"
		log "starting the Web UI on http://127.0.0.1:$TEMPORAL_UI_PORT"
		launch ui env TEMPORAL_ADDRESS="$address" TEMPORAL_DEFAULT_NAMESPACE=default \
			TEMPORAL_UI_PORT="$TEMPORAL_UI_PORT" TEMPORAL_CSRF_COOKIE_INSECURE=true \
			"$bin/temporal-ui-server" --root "$dir/ui" --config config --env docker start
		;;
	worker-1 | worker-2)
		local metrics=$SUBFLOW_METRICS_PORT
		[ "$name" = worker-2 ] && metrics=$((metrics + 1))
		local id
		id=$(build_id)
		log "starting subflow $name, build $deployment:$id (metrics on 127.0.0.1:$metrics)"
		mkdir -p "$run"
		echo "127.0.0.1:$metrics" >"$run/$name.metrics"
		echo "$id" >"$run/$name.build"
		launch "$name" env TEMPORAL_ADDRESS="$address" TEMPORAL_NAMESPACE=default \
			SUBFLOW_SESSION_STORE="$store" SUBFLOW_DEPLOYMENT_NAME="$deployment" SUBFLOW_BUILD_ID="$id" \
			"$bin/subflow-worker" --metrics-addr "127.0.0.1:$metrics"
		;;
	*) die "unknown name $name: one of ${names[*]}" ;;
	esac
}

# wait_metadata waits until the temporal database holds the cluster metadata record that
# the first Temporal service (NAME) writes at start.
wait_metadata() {
	local i
	for i in $(seq 600); do
		if [ "$(as_pg "$(pg_bin)/psql" -h "$pgdata" -p "$pg_port" -U "$POSTGRES_USER" -d temporal -tAc \
			'SELECT count(*) FROM cluster_metadata_info' 2>/dev/null)" = 1 ]; then return 0; fi
		running "$1" || die_log "$1" "Temporal $1 exited before writing the cluster metadata: see $logs/$1.log"
		sleep 0.2
	done
	die_log "$1" "Temporal $1 wrote no cluster metadata in 120 s: see $logs/$1.log"
}

# revive starts again each NAME that exited since it started, saying why it exited, as
# compose's restart policy does.
revive() {
	local n
	for n in "$@"; do
		running "$n" && continue
		log "$n exited; starting it again. Last lines of $logs/$n.log:"
		tail -n 15 "$logs/$n.log" | cut -c1-600 >&2
		start_one "$n"
		wait_ready "$n"
	done
}

# wait_ready waits until NAME serves.
wait_ready() {
	case "$1" in
	postgres) ;;
	frontend) wait_port "the frontend" "$address" frontend ;;
	history-* | matching | internal-worker) wait_port "$1" "127.0.0.1:$(service_port "$1")" "$1" ;;
	ui) wait_port "the Web UI" "127.0.0.1:$TEMPORAL_UI_PORT" ui ;;
	worker-*) sleep 0.5 && running "$1" || die_log "$1" "$1 exited: see $logs/$1.log" ;;
	esac
}

# stop_one signals NAME (default TERM) and, unless it is KILL, waits for it to exit, killing
# it after its grace period (the workers get compose's 30 s stop_grace_period).
stop_one() {
	local name=$1 sig=${2:-TERM} p i grace=100
	if [ "$name" = postgres ]; then
		if [ "$sig" = TERM ]; then
			running postgres && as_pg "$(pg_bin)/pg_ctl" -D "$pgdata" -m fast -w stop >&2
			return 0
		fi
	fi
	p=$(pid "$name") || return 0
	kill -s "$sig" "$p" 2>/dev/null || true
	case "$sig" in
	TERM | INT) ;;
	KILL)
		for i in $(seq 100); do alive "$p" || break; sleep 0.1; done
		return 0
		;;
	*) return 0 ;;
	esac
	case "$name" in worker-*) grace=300 ;; esac
	for i in $(seq "$grace"); do
		alive "$p" || break
		sleep 0.1
	done
	if alive "$p"; then
		log "$name did not stop on $sig: killing it"
		kill -KILL "$p" 2>/dev/null || true
	fi
	[ "$name" = postgres ] || rm -f "$(pidfile "$name")"
}

print_env() {
	echo "export TEMPORAL_ADDRESS=$address TEMPORAL_NAMESPACE=default SUBFLOW_SESSION_STORE='$store' SUBFLOW_DEPLOYMENT_NAME=$deployment"
}

up() {
	needs
	mkdir -p "$dir" "$logs" "$run"
	chmod 755 "$dir"
	SUBFLOW_CLUSTER_PG_PORT=$pg_port SUBFLOW_DEPLOYMENT_NAME=$deployment
	for key in "${settings[@]}"; do echo "$key=${!key}"; done >"$dir/settings.env"
	build
	start_one postgres
	if [ ! -f "$dir/.schema-done" ] || ! running frontend; then
		log "setting up the temporal and temporal_visibility schemas (deploy/temporal/setup-postgres.sh)"
		PATH=$bin:$PATH POSTGRES_SEEDS=127.0.0.1 DB_PORT=$pg_port SQL_PASSWORD=$POSTGRES_PASSWORD \
			TEMPORAL_SCHEMA_DIR="$(cd "$here" && GOWORK=off go list -m -f '{{.Dir}}' go.temporal.io/server)/schema/postgresql/v12" \
			sh "$repo/deploy/temporal/setup-postgres.sh" >"$logs/setup-postgres.log" 2>&1 ||
			die_log setup-postgres "schema setup failed: see $logs/setup-postgres.log"
		touch "$dir/.schema-done"
	fi
	local n
	# One service first, until it has written the cluster metadata: on an empty store each
	# service that finds none writes it, and one that loses that race exits
	# (clusterMetadataInitErr).
	start_one history-1
	wait_metadata history-1
	wait_ready history-1
	for n in history-2 matching frontend internal-worker; do start_one "$n"; done
	for n in history-2 matching frontend internal-worker; do wait_ready "$n"; done
	log "registering the namespace and search attributes (deploy/temporal/setup-temporal.sh)"
	# Run again on failure, as compose restarts the setup container on failure: a namespace just created
	# is unknown to the frontend until its namespace cache refreshes (within 10 s).
	local try
	for try in $(seq 10); do
		revive history-1 history-2 matching frontend internal-worker
		if PATH=$bin:$PATH TEMPORAL_ADDRESS=$address TEMPORAL_NAMESPACE=default \
			timeout 300 sh "$repo/deploy/temporal/setup-temporal.sh" >>"$logs/setup-temporal.log" 2>&1; then
			break
		fi
		[ "$try" = 10 ] && die_log setup-temporal "namespace setup failed: see $logs/setup-temporal.log"
		sleep 3
	done
	for n in history-1 history-2 matching frontend internal-worker; do
		running "$n" || die_log "$n" "Temporal $n exited: see $logs/$n.log"
	done
	for n in ui worker-1 worker-2; do start_one "$n"; done
	for n in ui worker-1 worker-2; do wait_ready "$n"; done
	make_current
	log "up: frontend $address, Web UI http://127.0.0.1:$TEMPORAL_UI_PORT, PostgreSQL 127.0.0.1:$pg_port, logs in $logs"
	print_env
}

down() {
	local purge=${1:-}
	local n
	for n in worker-1 worker-2 ui frontend internal-worker matching history-1 history-2 postgres; do
		if running "$n"; then
			log "stopping $n"
			stop_one "$n"
		fi
	done
	if [ "$purge" = --purge ]; then
		log "removing $dir"
		rm -rf "$dir"
	fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) up ;;
down) down "$@" ;;
start)
	for n in "$@"; do start_one "$n"; done
	for n in "$@"; do wait_ready "$n"; done
	;;
stop) for n in "$@"; do stop_one "$n"; done ;;
kill) for n in "$@"; do stop_one "$n" KILL; done ;;
signal)
	sig=$1
	shift
	for n in "$@"; do stop_one "$n" "$sig"; done
	;;
pid) for n in "$@"; do pid "$n" || die "$n is not running"; done ;;
names) printf '%s\n' "${names[@]}" ;;
env) print_env ;;
status)
	for n in "${names[@]}"; do
		if p=$(pid "$n"); then echo "$n running $p"; else echo "$n stopped"; fi
	done
	;;
*)
	echo "usage: cluster.sh up | down [--purge] | start|stop|kill|pid NAME... | signal SIG NAME... | names | env | status" >&2
	exit 2
	;;
esac
