#!/usr/bin/env bash
# postgres.sh makes a PostgreSQL server from Debian's packages listen on 127.0.0.1:5432 with a
# database for the Postgres session store's tests, and prints the line that enables them:
#
#	eval "$(.ci/postgres.sh)"   # sets SUBFLOW_TEST_POSTGRES
#
# It runs as root (CI does), installs the postgresql package if missing, creates and starts a
# cluster on port 5432 with Debian's pg_* cluster tools (the server runs as the postgres user),
# and creates the role and database if absent. Running it again changes nothing. Everything but
# the export line goes to stderr.
set -euo pipefail

PORT=5432
DB=subflow_test
ROLE=subflow
PASSWORD=subflow

log() { echo "postgres.sh: $*" >&2; }

if ! command -v pg_lsclusters >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	log "installing Debian's postgresql package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y postgresql >&2
fi

# The cluster on our port, else a new one of the newest installed version.
read -r version cluster status < <(pg_lsclusters -h | awk -v port="$PORT" '$3 == port {print $1, $2, $4; exit}') || true
if [ -z "${version:-}" ]; then
	version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
	cluster=main
	if pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {found=1} END {exit !found}'; then
		cluster=subflow
	fi
	log "creating cluster $version/$cluster on port $PORT"
	pg_createcluster "$version" "$cluster" --port "$PORT" >&2
	status=down
fi
if [ "$status" != online ]; then
	log "starting cluster $version/$cluster"
	pg_ctlcluster "$version" "$cluster" start >&2
fi

psql_admin() { runuser -u postgres -- psql --no-psqlrc -v ON_ERROR_STOP=1 -p "$PORT" -qtA "$@"; }
for _ in $(seq 50); do
	if runuser -u postgres -- pg_isready -q -p "$PORT"; then break; fi
	sleep 0.2
done
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != 1 ]; then
	log "creating role $ROLE"
	psql_admin -c "CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD'"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]; then
	log "creating database $DB"
	psql_admin -c "CREATE DATABASE $DB OWNER $ROLE"
fi

echo "export SUBFLOW_TEST_POSTGRES=postgres://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DB?sslmode=disable"
