"""An interactive vault: it talks to a terminal only, asks a passphrase, then a confirmation."""

import hashlib
import sys

if not sys.stdin.isatty():
    sys.exit("vault: run me in a terminal")
if input("passphrase> ").strip() != "open sesame":
    sys.exit("vault: wrong passphrase")
if input("really open? [y/N]> ").strip().lower() != "y":
    sys.exit("vault: not opened")
print("code:", hashlib.sha256(b"vault-open sesame").hexdigest()[:12])
