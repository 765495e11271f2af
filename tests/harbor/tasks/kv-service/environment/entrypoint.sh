#!/bin/sh
# Start the service in the background, then run what the container was asked to run.
python3 /opt/kv/kv.py > /tmp/kv.log 2>&1 &
exec "$@"
