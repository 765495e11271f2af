#!/usr/bin/env bash
# Install and start a Docker Engine that can run `docker buildx bake` with named contexts, on Debian 12.
#
# Debian 12's own docker.io ships a BuildKit too old for bake's `target:` contexts, so this takes Engine 26.1,
# containerd, buildx 0.13 and compose 2.26 from Debian 13 (trixie) in the same archive and installs them over
# Debian 12's docker.io. Debian 12's runc and tini stay: Debian 13's need a newer glibc. The archive URI is
# read from the machine's own apt configuration; no package host is named here.
#
# Idempotent: an engine that already answers is left alone. Usage: scripts/install-docker-engine.sh
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

engine_ok() {
  command -v dockerd >/dev/null && dockerd --version | grep -qE ' (2[6-9]|[3-9][0-9])\.' \
    && docker buildx version >/dev/null 2>&1 && docker compose version >/dev/null 2>&1
}

archive_uri() {
  local uri
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$uri" ] || { echo "install-docker-engine: no Debian archive URI in /etc/apt; configure apt first" >&2; exit 1; }
  echo "$uri"
}

if ! engine_ok; then
  echo "install-docker-engine: installing Docker Engine 26 + buildx + compose from Debian 13 packages"
  apt-get update -q
  apt-get install -y -q docker.io debootstrap iptables
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(archive_uri) trixie main" > "$work/sources.list"
  apt_opts=(-oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null -oDir::State::Lists="$work/lists")
  apt-get "${apt_opts[@]}" update -q
  (cd "$work" && apt-get "${apt_opts[@]}" download docker.io docker-cli containerd docker-buildx docker-compose)
  dpkg -i "$work"/docker.io_*.deb "$work"/docker-cli_*.deb "$work"/containerd_*.deb \
    "$work"/docker-buildx_*.deb "$work"/docker-compose_*.deb
fi
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap

if ! docker info >/dev/null 2>&1; then
  echo "install-docker-engine: starting dockerd (log: /var/log/dockerd.log)"
  (setsid dockerd -p /var/run/dockerd-deepgym.pid >/var/log/dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info >/dev/null 2>&1 || { echo "install-docker-engine: dockerd did not answer; see /var/log/dockerd.log" >&2; exit 1; }
docker info --format 'engine {{.ServerVersion}}, cgroup v{{.CgroupVersion}}'
docker buildx version
docker compose version
