#!/bin/sh
# The entrypoint of chatsite-base-postgres (deploy/base_images.sh): Debian's PostgreSQL 15 started
# the way the official image starts, so compose runs either image unchanged. On an empty PGDATA it
# makes a cluster whose superuser is POSTGRES_USER (password POSTGRES_PASSWORD, scram-sha-256 over
# TCP from anywhere, trust on the local socket) and a database POSTGRES_DB owned by it; then
# `postgres ARGS` serves PGDATA as user postgres. Any other command runs as given.
set -eu

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
shift
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
as_postgres=""  # the server and initdb refuse to run as root

mkdir -p "$PGDATA" /var/run/postgresql
if [ "$(id -u)" = 0 ]; then
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "POSTGRES_PASSWORD is not set: refusing to make a cluster reachable over TCP without one" >&2
    exit 1
  fi
  password_file=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$password_file"
  chown postgres "$password_file" 2>/dev/null || true
  $as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$password_file" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.auto.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" \
      | $as_postgres postgres --single -D "$PGDATA" -c listen_addresses= postgres >/dev/null
  fi
  echo "made a cluster in $PGDATA with database $POSTGRES_DB"
fi
exec $as_postgres postgres -D "$PGDATA" "$@"
