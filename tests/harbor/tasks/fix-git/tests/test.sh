#!/bin/bash
# reward.json instead of reward.txt: Harbor reads either.
mkdir -p /logs/verifier
cd /app/repo
ok=0
if [ "$(sh greet.sh deepgym)" = "hello, deepgym" ] && [ "$(git rev-list --count HEAD)" -ge 4 ] \
   && git log --format=%s | grep -q '^Revert "refactor greeting"'; then
  ok=1
fi
printf '{"reward": %s}\n' "$ok" > /logs/verifier/reward.json
