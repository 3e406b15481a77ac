#!/usr/bin/env bash
# Debian's Chromium for the browser tests (test/browser/**): playwright-core drives it; Playwright's
# own browser download cannot work here. Idempotent: does nothing when it is already installed.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
