#!/usr/bin/env bash
# A second Docker engine on this machine, for the tests of remote engines (DOCKER_HOST=tcp://..., docker_host=).
#
#   scripts/second-engine.sh start DIR   start it with everything of its own under DIR (data root, exec root,
#                                        pidfile, socket, log, containerd); prints its tcp://127.0.0.1:PORT
#   scripts/second-engine.sh stop DIR    stop it and remove DIR
#
# It never touches the first engine: a bridge of its own (dockerd started with --bridge=none would delete the
# first engine's docker0, which dockerd removes by name) and no iptables rules (deepgym's containers use
# network "none" only), a cgroup parent of its own, its own containerd (dockerd starts one under its exec
# root when no system containerd socket exists; else namespaces of its own in the system's), and an empty
# daemon.json instead of /etc/docker/daemon.json. It listens on a unix socket in DIR and on a free tcp port of
# 127.0.0.1 without TLS: any local user who can connect is root on it, so use it only on a test machine. Run as
# root, with Docker Engine installed (scripts/install-docker-engine.sh).
set -euo pipefail
command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# The cgroup its containers go under: named after DIR, so two such engines never share one. Its bridge too
# (at most 15 characters), on a link-local /24 that no real network uses.
cgroup="docker-engine2-$(basename "$dir")"
bridge="dg2-$(printf '%s' "$dir" | sha256sum | cut -c1-8)"

case "$command" in
start)
  if [ -S /run/containerd/containerd.sock ]; then
    # dockerd would share the system's containerd; keep it off the first engine's namespace at least.
    containerd_options=(--containerd /run/containerd/containerd.sock --containerd-namespace "$cgroup"
                        --containerd-plugins-namespace "$cgroup-plugins")
  else
    containerd_options=()
  fi
  mkdir -p "$dir/data" "$dir/exec"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "169.254.$((0x$(printf '%s' "$bridge" | sha256sum | cut -c1-2) % 200 + 20)).1/24" dev "$bridge"
    ip link set "$bridge" up
  fi
  echo '{}' > "$dir/daemon.json"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  setsid dockerd --config-file "$dir/daemon.json" --data-root "$dir/data" --exec-root "$dir/exec" \
    --pidfile "$dir/dockerd.pid" --host "unix://$dir/docker.sock" --host "tcp://127.0.0.1:$port" --tls=false \
    --bridge="$bridge" --iptables=false --ip6tables=false --ip-masq=false --cgroup-parent "/$cgroup" \
    "${containerd_options[@]}" </dev/null >"$dir/dockerd.log" 2>&1 &
  for _ in $(seq 120); do
    if docker --host "tcp://127.0.0.1:$port" info >/dev/null 2>&1; then
      echo "tcp://127.0.0.1:$port"
      exit 0
    fi
    sleep 0.5
  done
  echo "second-engine: dockerd did not answer within 60 s; its log ($dir/dockerd.log) ends:" >&2
  tail -20 "$dir/dockerd.log" >&2
  exit 1
  ;;
stop)
  # dockerd stops the containerd it started; one that outlives a killed dockerd is stopped by its pidfile.
  for pidfile in "$dir/dockerd.pid" "$dir/exec/containerd/containerd.pid"; do
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    fi
  done
  # Whatever a killed engine left mounted under DIR (overlay layers, its exec root's mounts), deepest first.
  awk -v dir="$dir" 'index($2, dir) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r mount; do
    umount -l "$mount" || true
  done
  rm -rf "$dir"
  ip link del "$bridge" 2>/dev/null || true
  # The (empty) cgroup folders the engine made: one per controller on cgroup v1, one on v2.
  for folder in /sys/fs/cgroup/"$cgroup" /sys/fs/cgroup/*/"$cgroup"; do
    [ -d "$folder" ] && rmdir "$folder" 2>/dev/null || true
  done
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
