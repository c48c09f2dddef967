#!/usr/bin/env bash
# Set up, then run the whole product: web (daphne), one worker per demo pool, beat, each under
# supervisord (scripts/supervise.sh): a process that dies is started again, the others keep serving.
# Unless REDIS_URL is given, the stack runs a Redis of its own (127.0.0.1:CHATSITE_OWN_REDIS_PORT,
# default 6380; append-only file in var/redis), started first and stopped with the rest: run streams
# then survive a restart and /healthz says "redis_persistent": true.
# CHATSITE_SKIP_SETUP=1 skips scripts/setup.sh (the tests of this script, on a database they made).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${REDIS_URL:-}" ]; then
  export CHATSITE_OWN_REDIS_PORT=${CHATSITE_OWN_REDIS_PORT:-6380}
  if redis-cli -h 127.0.0.1 -p "$CHATSITE_OWN_REDIS_PORT" ping >/dev/null 2>&1; then
    echo "port $CHATSITE_OWN_REDIS_PORT is taken (a Redis answers there): stop it, choose another with" \
         "CHATSITE_OWN_REDIS_PORT, or point REDIS_URL at a Redis with persistence" >&2
    exit 1
  fi
  export REDIS_URL=redis://127.0.0.1:$CHATSITE_OWN_REDIS_PORT/0
  export CELERY_BROKER_URL=$REDIS_URL
  REDIS_SAID="its own Redis on 127.0.0.1:$CHATSITE_OWN_REDIS_PORT (AOF in ${CHATSITE_OWN_REDIS_DIR:-var/redis})"
else
  REDIS_SAID="the Redis at REDIS_URL"
fi
[ "${CHATSITE_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
# One worker per demo pool that serves: `small` (INT8) serves only once its quality gate
# passed on this machine (setup runs it); a pool that does not serve gets no worker, and
# its engine no cores.
WORKERS=()
for pool in $(.venv/bin/python manage.py list_pools --enabled-names); do
  case "$pool" in flagship|small) WORKERS+=("$pool");; esac
done
if [ ${#WORKERS[@]} -eq 0 ]; then
  echo "no demo pool is enabled (see: .venv/bin/python manage.py list_pools)" >&2
  exit 1
fi
# Two CPU engines on one machine: give each its own cores so their OpenMP
# threads do not thrash each other (ignored on a GPU host); one engine gets them all.
CORES=$(nproc)
if [ ${#WORKERS[@]} -eq 2 ] && [ "$CORES" -ge 2 ]; then
  export FLAGSHIP_CPUS=${FLAGSHIP_CPUS:-0-$((CORES / 2 - 1))} SMALL_CPUS=${SMALL_CPUS:-$((CORES / 2))-$((CORES - 1))}
elif [ ${#WORKERS[@]} -eq 2 ]; then
  export FLAGSHIP_CPUS=${FLAGSHIP_CPUS:-0} SMALL_CPUS=${SMALL_CPUS:-0}
else
  export FLAGSHIP_CPUS=${FLAGSHIP_CPUS:-0-$((CORES - 1))} SMALL_CPUS=${SMALL_CPUS:-0-$((CORES - 1))}
fi
export CHATSITE_HOST=${CHATSITE_HOST:-127.0.0.1} CHATSITE_PORT=${CHATSITE_PORT:-8000}
if [ ${#WORKERS[@]} -eq 2 ]; then
  SERVING="two vLLM engines serve SmolLM2-135M-Instruct (flagship: float32, small: INT8 W8A8)"
else
  SERVING="one vLLM engine serves SmolLM2-135M-Instruct (${WORKERS[0]}); the other demo pool is disabled
  (a variant serves only once its quality gate passed here: the report is in the admin, under Model pools)"
fi
cat <<MSG

  chatsite is starting: $SERVING;
  engines take ~50 s on 2 cores, each worker logs "engine ready"...
  Open  http://$CHATSITE_HOST:$CHATSITE_PORT/   and sign in as  demo / demo-password
  Admin http://$CHATSITE_HOST:$CHATSITE_PORT/admin/   API docs http://$CHATSITE_HOST:$CHATSITE_PORT/api/docs/
  Runs are streamed through $REDIS_SAID.
  Every process is supervised: one that exits is started again, the others keep serving
  (logs: ${CHATSITE_RUN_LOG_DIR:-var/log/run}/NAME.log; .venv/bin/supervisorctl -c ${CHATSITE_RUN_DIR:-var/run}/supervisord.conf status).
  Stop with Ctrl-C.

MSG
exec scripts/supervise.sh web beat "${WORKERS[@]}"
