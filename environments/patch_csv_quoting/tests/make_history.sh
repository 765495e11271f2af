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

INGRID="Ingrid Halvorsen <ingrid@plaincsv.dev>"
TOMAS="Tomas Rehak <t.rehak@fastmail.example>"

git add .gitignore plaincsv/dialect.py plaincsv/reader.py tests/test_dialect.py tests/test_reader.py
sed -e 's/^version = "0.3.1"/version = "0.1.0"/' pyproject.toml | stage pyproject.toml
stage plaincsv/__init__.py <<'PY'
"""plaincsv: read and write delimited text with nothing but the standard library."""

from .dialect import EXCEL, QUOTE_ALL, QUOTE_MINIMAL, TSV, UNIX, Dialect, DialectError
from .reader import ParseError, iter_rows, load, loads

__all__ = [
    "Dialect", "DialectError", "EXCEL", "UNIX", "TSV", "QUOTE_MINIMAL", "QUOTE_ALL",
    "ParseError", "iter_rows", "load", "loads",
]

__version__ = "0.1.0"
PY
commit "$INGRID" 2023-03-04T10:12:31+01:00 "Add Dialect and a quote-aware reader"

git add plaincsv/writer.py tests/test_writer.py
sed -e 's/^version = "0.3.1"/version = "0.2.0"/' pyproject.toml | stage pyproject.toml
sed -e 's/^__version__ = "0.3.1"/__version__ = "0.2.0"/' plaincsv/__init__.py | stage plaincsv/__init__.py
commit "$TOMAS" 2023-03-11T16:47:02+01:00 "Add writer: format_field, format_row, dumps and dump" \
    "Fields are quoted only when needed (QUOTE_MINIMAL) unless the dialect asks for QUOTE_ALL;
a lone empty field is written as \"\" so that it does not turn into a blank line."

git add -A
commit "$INGRID" 2023-04-02T09:05:40+02:00 "Add README, release 0.3.1"

test -z "$(git status --porcelain --untracked-files=all)"
