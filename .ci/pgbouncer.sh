#!/usr/bin/env bash
# Debian's PgBouncer for the e2e test that runs Roost through a transaction-mode pooler
# (test/e2e/pgbouncer.test.ts). Idempotent; fails loudly when it cannot be installed, since that
# test fails (never skips) under ROOST_TEST_REQUIRE_SERVICES=1.
set -euo pipefail

if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
  echo "ci/pgbouncer: $(/usr/sbin/pgbouncer --version 2>/dev/null | head -1 || pgbouncer --version | head -1)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
  echo "ci/pgbouncer: pgbouncer is missing and cannot be installed here (needs apt-get as root)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
timeout 300 apt-get update -qq
# Only the binary is used: the test starts its own pgbouncer on a free loopback port with its own
# configuration. (Where no policy-rc.d forbids it, the package also starts its idle default service
# on 127.0.0.1:6432, with no databases; nothing uses it.)
timeout 300 apt-get install -y -qq --no-install-recommends pgbouncer
/usr/sbin/pgbouncer --version | head -1
