#!/usr/bin/env bash
# Build a minimal Debian image from Debian's archive with debootstrap and import it into the Docker engine.
#
# Use this on hosts that cannot pull from a container registry (the base image's default, debian:bookworm-slim,
# comes from Docker Hub). The result is a plain minbase Debian, the same content class as the slim image, tagged
# deepgym/debian-bootstrap:<suite>; `deepgym images build` picks it up automatically when the default base is
# missing, and with bake you pass it yourself: docker buildx bake --set '*.args.DEBIAN_IMAGE=...' or
# DEBIAN_IMAGE=deepgym/debian-bootstrap:bookworm docker buildx bake.
#
# The archive URI comes from the machine's own apt configuration (or $DEBIAN_MIRROR). Needs root and debootstrap.
# Usage: images/bootstrap-debian.sh [suite]      (default suite: bookworm)
set -euo pipefail
suite=${1:-bookworm}
tag="deepgym/debian-bootstrap:$suite"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "bootstrap-debian: $tag already exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "bootstrap-debian: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bootstrap-debian: debootstrap needs root" >&2; exit 1; }

mirror=${DEBIAN_MIRROR:-}
[ -n "$mirror" ] || mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "bootstrap-debian: no Debian archive URI found in /etc/apt; set DEBIAN_MIRROR" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
echo "bootstrap-debian: debootstrap --variant=minbase $suite from $mirror (about a minute)"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; echo "bootstrap-debian: debootstrap failed; full log: $root.log" >&2; exit 1; }
rm -f "$root.log"
# Trim what a container image does not need, as the slim images do.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
echo "bootstrap-debian: importing as $tag"
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
  --message "debootstrap minbase $suite" - "$tag" >/dev/null
docker image inspect "$tag" --format 'bootstrap-debian: {{.RepoTags}} {{.Size}} bytes'
