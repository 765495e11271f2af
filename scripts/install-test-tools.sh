#!/usr/bin/env bash
# The host programs the test suite drives besides Docker: Chromium, which renders `deepgym report`'s pages
# (tests/report). Debian's own package; idempotent. Run as root, like scripts/install-docker-engine.sh.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v chromium >/dev/null; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends chromium
fi
