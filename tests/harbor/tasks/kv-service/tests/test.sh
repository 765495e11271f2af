#!/bin/bash
mkdir -p /logs/verifier
got=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8765/keys/answer', timeout=5).read().decode())" 2>/dev/null)
if [ "$got" = "42" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
