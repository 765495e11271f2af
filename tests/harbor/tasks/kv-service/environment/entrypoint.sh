#!/bin/sh
# Start the service in the background, then run what the container was asked to run. The log is named after
# the user: deepgym runs this entrypoint once as the agent and once as the verifier.
python3 /opt/kv/kv.py > "/tmp/kv-$(id -u).log" 2>&1 &
exec "$@"
