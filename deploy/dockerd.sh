#!/usr/bin/env bash
# Start or stop a Docker engine (Debian's docker.io) that routes nothing off this machine and
# leaves the host's firewall as it found it:
#   deploy/dockerd.sh start    # dockerd --bridge=none --iptables=false --ip-masq=false --ip-forward=false
#   deploy/dockerd.sh stop     # stops the engine this script started, then checks the firewall again
#   deploy/dockerd.sh check    # the firewall now against what `start` recorded (exit 1 if it differs)
# Why the flags from the very first start: Docker's default iptables handling set the FORWARD
# policy to DROP and turned bridge netfilter on, and other tests on the machine (namespaced
# hosts talking to Postgres) broke until both were put back. With these flags containers run on
# host networking only (compose: deploy/compose.hostnet.yaml). `start` records the firewall
# (iptables-save, ip6tables-save and the forwarding sysctls) before the engine starts, checks it
# once the engine answers and again at `stop`, and puts back whatever changed.
set -euo pipefail

STATE=${CHATSITE_DOCKERD_STATE:-/run/chatsite-dockerd}
LOG=${CHATSITE_DOCKERD_LOG:-/var/log/chatsite-dockerd.log}
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables)

firewall() {  # everything the engine could change, in a stable text form
  for name in "${SYSCTLS[@]}"; do echo "$name = $(sysctl -n "$name" 2>/dev/null || echo absent)"; done
  if command -v iptables-save >/dev/null; then
    iptables-save 2>/dev/null | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//'
    ip6tables-save 2>/dev/null | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//'
  fi
}

restore() {  # put back what `start` recorded, then say whether it matches
  local name value
  for name in "${SYSCTLS[@]}"; do
    value=$(sed -n "s/^$name = //p" "$STATE/firewall.before")
    [ "$value" = absent ] || [ "$(sysctl -n "$name" 2>/dev/null)" = "$value" ] || sysctl -qw "$name=$value"
  done
  if command -v iptables-restore >/dev/null; then
    iptables-restore < "$STATE/iptables.before"
    ip6tables-restore < "$STATE/ip6tables.before"
  fi
}

check() {
  [ -f "$STATE/firewall.before" ] || { echo "no firewall recorded (deploy/dockerd.sh start records it)" >&2; return 1; }
  if firewall | diff -u "$STATE/firewall.before" - >"$STATE/firewall.diff"; then
    echo "==> the host's firewall is as it was before the engine started"
    return 0
  fi
  echo "==> the firewall changed; putting it back:" >&2
  cat "$STATE/firewall.diff" >&2
  restore
  firewall | diff -u "$STATE/firewall.before" - >&2 || { echo "could not put it back" >&2; return 1; }
  echo "==> put back" >&2
}

running() { [ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; }

start() {
  command -v dockerd >/dev/null || { echo "no dockerd: apt-get install docker.io" >&2; exit 1; }
  mkdir -p "$STATE"
  if running; then echo "==> the engine is running (pid $(cat "$STATE/pid"))"; return 0; fi
  if docker info >/dev/null 2>&1; then
    echo "another Docker engine answers on this host: not starting a second one" >&2
    exit 1
  fi
  firewall > "$STATE/firewall.before"
  if command -v iptables-save >/dev/null; then
    iptables-save > "$STATE/iptables.before"
    ip6tables-save > "$STATE/ip6tables.before"
  fi
  echo "==> starting dockerd (no bridge, no iptables rules, no masquerading, no forwarding); log: $LOG"
  nohup dockerd --bridge=none --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
    --pidfile "$STATE/dockerd.pid" >>"$LOG" 2>&1 &
  echo $! > "$STATE/pid"
  for _ in $(seq 1 120); do
    if docker info >/dev/null 2>&1; then check; return; fi
    running || { tail -20 "$LOG" >&2; echo "dockerd exited" >&2; exit 1; }
    sleep 0.5
  done
  echo "dockerd did not answer within 60 s" >&2
  tail -20 "$LOG" >&2
  exit 1
}

stop() {
  if running; then
    local pid
    pid=$(cat "$STATE/pid")
    echo "==> stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then echo "dockerd did not stop within 30 s" >&2; exit 1; fi
    rm -f "$STATE/pid"
  fi
  check
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  check) check ;;
  *) echo "usage: $0 start|stop|check" >&2; exit 2 ;;
esac
