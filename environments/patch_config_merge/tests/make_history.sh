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

HANNAH="Hannah Okafor <hannah.okafor@example.net>"
LUKAS="Lukas Brandt <lukas@brandt-it.example>"

git add .gitignore layercfg/config.py tests/test_config.py
sed -e 's/^version = "2.1.0"/version = "1.0.0"/' pyproject.toml | stage pyproject.toml
stage layercfg/__init__.py <<'PY'
"""layercfg: layered configuration from defaults, JSON files and environment variables."""

from .config import Config, ConfigError, MissingKeyError

__all__ = ["Config", "ConfigError", "MissingKeyError"]

__version__ = "1.0.0"
PY
commit "$HANNAH" 2021-11-08T14:31:05+01:00 "Config: read-only settings with dotted-path access and layering"

git add layercfg/loader.py tests/test_loader.py tests/data
sed -e 's/^version = "2.1.0"/version = "2.0.0"/' pyproject.toml | stage pyproject.toml
sed -e 's/^__version__ = "2.1.0"/__version__ = "2.0.0"/' layercfg/__init__.py | stage layercfg/__init__.py
commit "$LUKAS" 2022-03-17T09:48:22+01:00 "Add loader: JSON files and PREFIX__SECTION__KEY environment variables" \
    "load() stacks defaults, JSON files and the environment with Config.from_layers. Environment values
are parsed as JSON when they are valid JSON, so APP__DB__PORT=5433 gives an int."

git add -A
commit "$HANNAH" 2022-06-02T16:12:47+02:00 "Add a README, release 2.1.0"

test -z "$(git status --porcelain --untracked-files=all)"
