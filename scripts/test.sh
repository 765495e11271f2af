#!/usr/bin/env bash
# The test command: prepare the venv (with verl 0.9.1 and TRL 1.16.0 on CPU, and the providers' SDKs), build every
# missing or stale image through docker buildx bake, then run the whole test suite against the real engine (and the
# providers' stand-ins) in lanes by marker (scripts/lanes.py: unit, docker, integrations, desktop, ray, exclusive),
# printing the 20 slowest tests. Arguments go to one pytest run instead
# (`scripts/test.sh tests/verdict/test_verdict.py -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh --verl --trl --daytona --daytona-sdk --e2b --modal --ssh --datasets
"$VENV/bin/deepgym" images build
if [ $# -gt 0 ]; then
  exec "$VENV/bin/python" -m pytest "$@"
fi
exec "$VENV/bin/python" scripts/lanes.py
