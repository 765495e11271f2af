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

RAFAEL="Rafael Quintana <rafael@quintana.dev>"
MEI="Mei Takahashi <mei.takahashi@example.com>"

git add .gitignore throttle/clock.py throttle/bucket.py tests/test_clock.py tests/test_bucket.py
sed -e 's/^version = "0.6.2"/version = "0.4.0"/' pyproject.toml | stage pyproject.toml
stage throttle/__init__.py <<'PY'
"""throttle: token-bucket rate limiting with an injectable clock."""

from .bucket import TokenBucket
from .clock import Clock, ManualClock, MonotonicClock

__all__ = ["TokenBucket", "Clock", "ManualClock", "MonotonicClock"]

__version__ = "0.4.0"
PY
commit "$RAFAEL" 2024-02-05T18:22:51-03:00 "TokenBucket with whole tokens and an injectable clock"

git add throttle/keyed.py tests/test_keyed.py
sed -e 's/^version = "0.6.2"/version = "0.6.0"/' pyproject.toml | stage pyproject.toml
sed -e 's/^__version__ = "0.6.2"/__version__ = "0.6.0"/' throttle/__init__.py | stage throttle/__init__.py
commit "$MEI" 2024-02-19T10:03:37+09:00 "Add KeyedRateLimiter: one bucket per client with bounded memory" \
    "When max_keys is reached, buckets that are full again are dropped first (forgetting them changes
nothing), then the least recently used ones. hit() returns a Decision with the remaining tokens and
a retry_after suitable for a Retry-After header."

git add -A
commit "$RAFAEL" 2024-03-01T09:15:00-03:00 "README: usage with a ManualClock; release 0.6.2"

test -z "$(git status --porcelain --untracked-files=all)"
