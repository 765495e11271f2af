# Each variant's starting folder becomes a git repository with one commit (the bug is in it).
set -e
for repo in /opt/deepgym/start/*/; do
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" -c user.name=deepgym -c user.email=deepgym@localhost commit -q -m "Add textstats"
done
