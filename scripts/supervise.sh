#!/usr/bin/env bash
# Run some of the Procfile's processes under supervisord, in the foreground (what `make run` ends with):
#   scripts/supervise.sh web beat flagship small
# A process that exits is started again and the others keep serving (honcho stopped them all).
# With CHATSITE_OWN_REDIS_PORT set, a Redis of the stack's own runs first on that port (AOF in
# CHATSITE_OWN_REDIS_DIR, default var/redis) and stops last. Each process's output goes to
# var/log/run/NAME.log and is shown here after its name; supervisord's own lines say when a process
# exits and is started again. Ctrl-C or SIGTERM stops them all (workers drain first).
# From another terminal: .venv/bin/supervisorctl -c var/run/supervisord.conf status|restart NAME
# CHATSITE_RUN_DIR (var/run) and CHATSITE_RUN_LOG_DIR (var/log/run) choose where its files go.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=$(realpath -m "${CHATSITE_RUN_DIR:-var/run}")
LOG_DIR=$(realpath -m "${CHATSITE_RUN_LOG_DIR:-var/log/run}")
CONF=$RUN_DIR/supervisord.conf
mkdir -p "$RUN_DIR" "$LOG_DIR"
NAMES=("$@")
REDIS_ARGS=()
if [ -n "${CHATSITE_OWN_REDIS_PORT:-}" ]; then
  REDIS_DIR=$(realpath -m "${CHATSITE_OWN_REDIS_DIR:-var/redis}")
  mkdir -p "$REDIS_DIR"
  REDIS_ARGS=(--redis-port "$CHATSITE_OWN_REDIS_PORT" --redis-dir "$REDIS_DIR")
  NAMES=(redis "${NAMES[@]}")
fi
.venv/bin/python scripts/supervisord_conf.py --run-dir "$RUN_DIR" --log-dir "$LOG_DIR" "${REDIS_ARGS[@]}" "$@" > "$CONF"

# Each log shown after its process's name, by a tail that ends with this script (--pid) and
# ignores Ctrl-C, so that the workers' drain is still shown while they stop.
for name in "${NAMES[@]}"; do
  touch "$LOG_DIR/$name.log"
  label=$(printf '%-9s|' "$name")
  (trap '' INT TERM; exec tail -n 0 -F --pid=$$ "$LOG_DIR/$name.log" 2>/dev/null) \
    | (trap '' INT TERM; exec sed -u "s/^/$label /") &
done

.venv/bin/supervisord -c "$CONF" &
SUPERVISOR=$!
trap 'kill -TERM "$SUPERVISOR" 2>/dev/null || true' INT TERM
# `wait` returns early when a signal arrives; supervisord's shutdown is bounded by its programs'
# stopwaitsecs, then their process groups are killed.
while kill -0 "$SUPERVISOR" 2>/dev/null; do wait "$SUPERVISOR" || true; done
