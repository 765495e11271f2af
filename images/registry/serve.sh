#!/bin/sh
# Serve a registry on :5000 with its storage in the container (gone with it). With REGISTRY_USER and
# REGISTRY_PASSWORD set, every request needs them (htpasswd, bcrypt as the registry requires).
set -eu
mkdir -p /tmp/registry
config=/tmp/registry/config.yml
cat > "$config" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: /tmp/registry/data}
  delete: {enabled: true}
http: {addr: ":5000"}
YAML
if [ -n "${REGISTRY_USER:-}" ]; then
  htpasswd -Bbc /tmp/registry/htpasswd "$REGISTRY_USER" "${REGISTRY_PASSWORD:?REGISTRY_PASSWORD is required with REGISTRY_USER}"
  printf 'auth:\n  htpasswd: {realm: deepgym-test, path: /tmp/registry/htpasswd}\n' >> "$config"
fi
exec docker-registry serve "$config"
