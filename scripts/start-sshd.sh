#!/usr/bin/env bash
# An OpenSSH server on 127.0.0.1, for the tests of Docker engines reached over ssh:// (DOCKER_HOST=ssh://...).
#
#   scripts/start-sshd.sh start DIR [DOCKER_HOST]   start it with everything of its own under DIR; prints
#                                                   ssh://root@127.0.0.1:PORT. Again on a running DIR: prints
#                                                   the same URL and starts nothing.
#   scripts/start-sshd.sh stop DIR                  stop it and remove DIR
#
# Debian's openssh-server and openssh-client are installed with apt when sshd is missing. Under DIR: a host key,
# a client key pair (id_ed25519) whose public half is the only key sshd accepts, for root, with no password or
# keyboard-interactive login, and known_hosts holding the host key under [127.0.0.1]:PORT, as a user's
# ~/.ssh/known_hosts would after checking it. DOCKER_HOST, when given, is set in the sessions sshd starts, so
# `docker system dial-stdio` (what a docker client runs over ssh) reaches that engine instead of the default
# one. Run as root.
set -euo pipefail
command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR [DOCKER_HOST] | stop DIR" >&2; exit 2; }

running() {
  local pid
  pid=$(cat "$dir/sshd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

case "$command" in
start)
  if running; then
    cat "$dir/url"
    exit 0
  fi
  if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends openssh-server openssh-client >/dev/null 2>&1 || {
      apt-get update -q >/dev/null
      apt-get install -y -q --no-install-recommends openssh-server openssh-client >/dev/null
    }
  fi
  mkdir -p "$dir" /run/sshd
  chmod 700 "$dir"
  [ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -C deepgym-test-host -f "$dir/host_key"
  [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C deepgym-test-client -f "$dir/id_ed25519"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # StrictModes off: DIR may sit under /tmp, whose mode sshd's ownership checks of authorized_keys reject.
  cat > "$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding no
X11Forwarding no
MaxStartups 64
MaxSessions 64
${3:+SetEnv DOCKER_HOST=$3}
EOF
  /usr/sbin/sshd -t -f "$dir/sshd_config"
  /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
  echo "[127.0.0.1]:$port $(cut -d' ' -f1-2 "$dir/host_key.pub")" > "$dir/known_hosts"
  for _ in $(seq 100); do
    if ssh -o BatchMode=yes -o UserKnownHostsFile="$dir/known_hosts" -o GlobalKnownHostsFile=/dev/null \
         -i "$dir/id_ed25519" -F /dev/null -p "$port" root@127.0.0.1 true 2>/dev/null; then
      echo "ssh://root@127.0.0.1:$port" | tee "$dir/url"
      exit 0
    fi
    sleep 0.1
  done
  echo "start-sshd: sshd did not accept the key within 10 s; its log ($dir/sshd.log) ends:" >&2
  tail -20 "$dir/sshd.log" >&2
  exit 1
  ;;
stop)
  if running; then
    pid=$(cat "$dir/sshd.pid")
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start DIR [DOCKER_HOST] | stop DIR" >&2
  exit 2
  ;;
esac
