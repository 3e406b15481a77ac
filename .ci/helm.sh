#!/usr/bin/env bash
# Tools of the deploy tier's chart and monitoring tests: the pinned Helm (scripts/fetch-helm.sh,
# into .tools/bin) and Debian's prometheus package (prometheus + promtool). Idempotent; fails loudly
# when a tool cannot be installed, never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { echo "ci/helm: promtool missing and no apt-get" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "ci/helm: promtool missing and not root to apt-get it" >&2; exit 1; }
  timeout 300 apt-get update -qq
  # unzip for fetch-helm.sh; prometheus for promtool (the package's service is not started here).
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends prometheus unzip
fi
command -v unzip >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends unzip
promtool --version | head -1
scripts/fetch-helm.sh
