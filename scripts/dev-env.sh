#!/usr/bin/env bash
# Create (or reuse) deepgym's virtualenv and install deepgym into it, editable. Sourced by demo.sh and test.sh.
#
#   source scripts/dev-env.sh            deepgym and its test tools
#   source scripts/dev-env.sh --verl     also the `verl` extra on CPU (torch 2.13.0 CPU build, ~2 GB, ~3 minutes once)
#   source scripts/dev-env.sh --trl      also the `trl` extra (TRL 1.16.0) on the same CPU torch
#   source scripts/dev-env.sh --NAME     any other extra of pyproject.toml by its name (the flags combine)
#
# The venv lives outside the checkout (default ~/.cache/deepgym/venv, or $DEEPGYM_VENV) so that a fresh checkout
# reuses it; a stamp of the requirements decides whether pip has anything to do. Exports VENV.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${DEEPGYM_VENV:-$HOME/.cache/deepgym/venv}
export VENV

extras=()
for flag in "$@"; do
  case "$flag" in
    --*) extras+=("${flag#--}") ;;
    *) echo "dev-env: unknown argument $flag (extras are given as --NAME)" >&2; return 2 2>/dev/null || exit 2 ;;
  esac
done

# pyproject.toml is the one list of requirements: the runtime ones plus the `test` extra, then the `verl` and
# other extras asked for. hatchling and editables build the editable install below without build isolation.
requirements() {
  python3 -c 'import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print(" ".join(project["dependencies"] * (sys.argv[2] == "test") + project["optional-dependencies"][sys.argv[2]]))' \
    "$here/pyproject.toml" "$1"
}
base_requirements="$(requirements test) hatchling editables"
# verl's and TRL's own extras pull CUDA builds: CPU torch goes first, then deepgym's extras.
extra_requirements=""
for extra in "${extras[@]}"; do
  extra_requirements="$extra_requirements $(requirements "$extra")" || {
    echo "dev-env: pyproject.toml has no extra named $extra" >&2; return 2 2>/dev/null || exit 2; }
done
extra_requirements="${extra_requirements# }"

if [ ! -x "$VENV/bin/python" ]; then
  echo "dev-env: creating $VENV"
  python3 -m venv "$VENV" || { echo "dev-env: python3 -m venv failed; on Debian: apt-get install python3-venv" >&2; exit 1; }
  "$VENV/bin/pip" install -q --upgrade pip
fi

stamp="$VENV/.deepgym-requirements"
wanted="$base_requirements"
[ -n "$extra_requirements" ] && wanted="$wanted torch==2.13.0 $extra_requirements"
if [ ! -f "$stamp" ] || ! grep -qxF "$wanted" "$stamp"; then
  echo "dev-env: installing requirements into $VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $base_requirements
  if [ -n "$extra_requirements" ]; then
    "$VENV/bin/pip" install -q torch==2.13.0
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q $extra_requirements
  fi
  echo "$wanted" > "$stamp"
fi
# Always re-point the editable install at this checkout (a new checkout may live elsewhere): a second or two.
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e "$here"
