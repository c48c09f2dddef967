#!/usr/bin/env bash
# Start PostgreSQL and Redis if they are not answering (this kind of machine
# has both installed; elsewhere, point DATABASE_URL / REDIS_URL at yours).
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if [ -z "${DATABASE_URL:-}" ] && ! pg_up; then
  echo "==> starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if [ -z "${REDIS_URL:-}" ] && ! redis_up; then
  echo "==> starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
for _ in $(seq 1 50); do
  { [ -n "${DATABASE_URL:-}" ] || pg_up; } && { [ -n "${REDIS_URL:-}" ] || redis_up; } && exit 0
  sleep 0.2
done
echo "PostgreSQL or Redis did not come up" >&2
exit 1
