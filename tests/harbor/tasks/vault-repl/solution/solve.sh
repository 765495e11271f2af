#!/bin/bash
# script(1) gives the vault the terminal it insists on; the answers go in through it.
printf 'open sesame\ny\n' | script -qec "python3 /app/vault.py" /dev/null | tr -d '\r' \
  | sed -n 's/.*code: \([0-9a-f]*\).*/\1/p' > /app/code.txt
