#!/bin/sh
# First start: initdb with POSTGRES_USER (default postgres) and POSTGRES_PASSWORD (required, as in
# the official image, unless POSTGRES_HOST_AUTH_METHOD=trust), then POSTGRES_DB (default: the user)
# created in single-user mode, so the server starts once and "ready to accept connections" means it.
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is required (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
    --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\"" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
