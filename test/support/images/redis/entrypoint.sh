#!/bin/sh
# As the official image: `redis-server` without a config file listens on every interface with
# protected mode off (a container's port is only reachable where it is published), logs to stdout.
set -eu
if [ "${1:-}" = redis-server ]; then
  shift
  exec redis-server --protected-mode no --bind '* -::*' --dir /data "$@"
fi
exec "$@"
