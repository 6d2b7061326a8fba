#!/bin/sh
# Creates Temporal's two databases and brings their schemas to the image's version, and
# creates the (empty) database of the subflow session store, whose tables the worker makes.
# Safe to run again on an existing volume: create may report an existing database, the
# schema steps only apply what is missing.
set -eu
: "${POSTGRES_SEEDS:=postgresql}" "${DB_PORT:=5432}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
SUBFLOW_DB=${SUBFLOW_DB:-subflow}

echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$DB_PORT"
until nc -z -w 2 "$POSTGRES_SEEDS" "$DB_PORT"; do sleep 1; done

sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }
schema=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}

for db in temporal temporal_visibility "$SUBFLOW_DB"; do
  sql --db "$db" create || echo "database $db exists"
done
sql --db temporal setup-schema -v 0.0
sql --db temporal update-schema -d "$schema/temporal/versioned"
sql --db temporal_visibility setup-schema -v 0.0
sql --db temporal_visibility update-schema -d "$schema/visibility/versioned"
echo "PostgreSQL is set up"
