#!/usr/bin/env bash
# Create (or reuse) deepgym's virtualenv and install deepgym into it, editable. Sourced by demo.sh and test.sh.
#
#   source scripts/dev-env.sh            deepgym and its test tools
#   source scripts/dev-env.sh --verl     also verl 0.9.1 on CPU (torch 2.13.0 CPU build, ~2 GB, ~3 minutes once)
#   source scripts/dev-env.sh --trl      also pyproject's `trl` extra (TRL 1.16.0) on the same CPU torch
#                                        (the flags combine: --verl --trl)
#
# The venv lives outside the checkout (default ~/.cache/deepgym/venv, or $DEEPGYM_VENV) so that a fresh checkout
# reuses it; a stamp of the requirements decides whether pip has anything to do. Exports VENV.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${DEEPGYM_VENV:-$HOME/.cache/deepgym/venv}
export VENV

want_verl=0
want_trl=0
for flag in "$@"; do
  case "$flag" in
    --verl) want_verl=1 ;;
    --trl) want_trl=1 ;;
  esac
done

base_requirements="docker>=7.0 pyyaml>=6.0 pytest>=8.0 hatchling editables"
# verl's extras pull CUDA builds: install CPU torch first, then verl itself and the few modules it imports lazily.
verl_requirements="verl==0.9.1 cachetools uvicorn fastapi TransferQueue pandas pyarrow"

if [ ! -x "$VENV/bin/python" ]; then
  echo "dev-env: creating $VENV"
  python3 -m venv "$VENV" || { echo "dev-env: python3 -m venv failed; on Debian: apt-get install python3-venv" >&2; exit 1; }
  "$VENV/bin/pip" install -q --upgrade pip
fi

stamp="$VENV/.deepgym-requirements"
wanted="$base_requirements"
[ "$want_verl" = 1 ] && wanted="$wanted torch==2.13.0 $verl_requirements"
[ "$want_trl" = 1 ] && wanted="$wanted torch==2.13.0 deepgym[trl]"
if [ ! -f "$stamp" ] || ! grep -qxF "$wanted" "$stamp"; then
  echo "dev-env: installing requirements into $VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $base_requirements
  if [ "$want_verl" = 1 ]; then
    "$VENV/bin/pip" install -q torch==2.13.0
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q $verl_requirements
  fi
  if [ "$want_trl" = 1 ]; then
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q --no-build-isolation -e "$here[trl]"
  fi
  echo "$wanted" > "$stamp"
fi
# Always re-point the editable install at this checkout (a new checkout may live elsewhere): a second or two.
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e "$here"
