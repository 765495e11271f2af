#!/bin/sh
# Give the baked repository a small, deterministic git history ending exactly at the buggy tree.
set -eu
cd "$(dirname "$0")/repo"
export GIT_AUTHOR_NAME="Ada Example" GIT_AUTHOR_EMAIL="ada@example.invalid"
export GIT_COMMITTER_NAME="Ada Example" GIT_COMMITTER_EMAIL="ada@example.invalid"
git -c init.defaultBranch=main init -q
GIT_AUTHOR_DATE="2024-01-02T10:00:00Z" GIT_COMMITTER_DATE="2024-01-02T10:00:00Z" \
  sh -c 'git add pyproject.toml textkit/__init__.py && git commit -qm "Start textkit"'
GIT_AUTHOR_DATE="2024-01-03T10:00:00Z" GIT_COMMITTER_DATE="2024-01-03T10:00:00Z" \
  sh -c 'git add -A && git commit -qm "Add slugify"'
test -z "$(git status --porcelain)"
