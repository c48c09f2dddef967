#!/usr/bin/env bash
# Start PostgreSQL and Redis if they are not answering (this kind of machine
# has both installed; elsewhere, point DATABASE_URL / REDIS_URL at yours).
# Redis keeps run streams until their runs end, so it is started with AOF
# (appendfsync everysec: a crash or restart loses at most about a second of
# entries). CHATSITE_REDIS_PORT and CHATSITE_REDIS_DIR choose where.
set -euo pipefail

REDIS_PORT=${CHATSITE_REDIS_PORT:-6379}
REDIS_DIR=${CHATSITE_REDIS_DIR:-/var/lib/redis}
REDIS_LOG=${CHATSITE_REDIS_LOG:-/var/log/redis/ci.log}

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

if [ -z "${DATABASE_URL:-}" ] && ! pg_up; then
  echo "==> starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if [ -z "${REDIS_URL:-}" ] && ! redis_up; then
  echo "==> starting Redis (AOF, appendfsync everysec, in $REDIS_DIR)"
  mkdir -p "$REDIS_DIR" "$(dirname "$REDIS_LOG")"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
    --appendonly yes --appendfsync everysec --save "" \
    --dir "$REDIS_DIR" --logfile "$REDIS_LOG"
fi
for _ in $(seq 1 50); do
  { [ -n "${DATABASE_URL:-}" ] || pg_up; } && { [ -n "${REDIS_URL:-}" ] || redis_up; } && exit 0
  sleep 0.2
done
echo "PostgreSQL or Redis did not come up" >&2
exit 1
