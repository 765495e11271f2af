#!/bin/sh
# Give the baked repository (./repo next to this script) a small, deterministic git history that ends
# exactly at the tree in ./repo. Run once at image build; commit ids depend only on the content below.
set -eu
cd "$(dirname "$0")/repo"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null TZ=UTC

# stage PATH: put stdin into the index as PATH, leaving the work tree alone (for earlier file versions).
stage() { git update-index --add --cacheinfo "100644,$(git hash-object -w --stdin),$1"; }
# commit "NAME <EMAIL>" DATE MESSAGE [BODY]
commit() {
    name=${1% <*}; email=${1##*<}; email=${email%>}
    GIT_AUTHOR_NAME=$name GIT_AUTHOR_EMAIL=$email GIT_COMMITTER_NAME=$name GIT_COMMITTER_EMAIL=$email \
    GIT_AUTHOR_DATE=$2 GIT_COMMITTER_DATE=$2 git commit -q --no-verify -m "$3" ${4:+-m "$4"}
}

git init -q -b main

OKSANA="Oksana Petrenko <oksana.petrenko@example.org>"
DAVID="David Achterberg <dachterberg@users.noreply.github.com>"

git add .gitignore semverlite/errors.py semverlite/version.py tests/test_version.py
sed -e 's/^version = "1.4.0"/version = "1.0.0"/' pyproject.toml | stage pyproject.toml
stage semverlite/__init__.py <<'PY'
"""semverlite: Semantic Versioning 2.0.0 without dependencies."""

from .errors import InvalidVersion
from .version import Version, compare, parse

__all__ = ["Version", "parse", "compare", "InvalidVersion"]

__version__ = "1.0.0"
PY
commit "$OKSANA" 2022-08-14T21:03:17+03:00 "Version: parse, format, bump and order semantic versions"

git add semverlite/ranges.py tests/test_ranges.py
sed -e 's/^version = "1.4.0"/version = "1.3.0"/' pyproject.toml | stage pyproject.toml
sed -e 's/^__version__ = "1.4.0"/__version__ = "1.3.0"/' semverlite/__init__.py | stage semverlite/__init__.py
commit "$DAVID" 2022-09-02T11:26:45+02:00 "Add npm-style ranges: satisfies, max_satisfying, sort_versions" \
    "Upper bounds are the lowest pre-release of the next version (^1.2.3 is >=1.2.3 <2.0.0-0), so that
pre-releases of the next major never match. Pre-releases only match a comparator set that names a
pre-release of the same major.minor.patch, unless include_prerelease=True."

git add -A
commit "$OKSANA" 2023-01-20T08:40:09+02:00 "Document ranges in the README, release 1.4.0"

test -z "$(git status --porcelain --untracked-files=all)"
