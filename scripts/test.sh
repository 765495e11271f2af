#!/usr/bin/env bash
# The test command: prepare the venv (with verl 0.9.1 and TRL 1.16.0 on CPU, and the providers' SDKs), build every
# missing or stale image through docker buildx bake, then run the whole test suite against the real engine (and the
# providers' stand-ins). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh --verl --trl --daytona --daytona-sdk --e2b --modal --ssh --datasets
"$VENV/bin/deepgym" images build
exec "$VENV/bin/python" -m pytest "$@"
