#!/bin/bash
mkdir -p /logs/verifier
want=$(python3 -c "import hashlib; print(hashlib.sha256(b'vault-open sesame').hexdigest()[:12])")
if [ "$(tr -d '[:space:]' < /app/code.txt 2>/dev/null)" = "$want" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
