#!/usr/bin/env bash
# The main job, end to end: install deepgym (in a venv), build every missing image through docker buildx bake
# (bootstrapping Debian from its archive when no registry is reachable), then score a right and a wrong answer
# for coin_change and two_sum and print the verdicts.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh
"$VENV/bin/deepgym" images build
exec "$VENV/bin/deepgym" demo "$@"
