#!/usr/bin/env bash
# Set up, then run the whole product: web (daphne), one worker per demo pool, beat.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
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
  Stop with Ctrl-C.

MSG
exec .venv/bin/honcho -f Procfile start web beat "${WORKERS[@]}"
