#!/usr/bin/env bash
# Set up, then run the whole product: web (daphne), one worker per demo pool, beat.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Two CPU engines on one machine: give each its own cores so their OpenMP
# threads do not thrash each other (ignored on a GPU host).
CORES=$(nproc)
if [ "$CORES" -ge 2 ]; then
  export FLAGSHIP_CPUS=${FLAGSHIP_CPUS:-0-$((CORES / 2 - 1))} SMALL_CPUS=${SMALL_CPUS:-$((CORES / 2))-$((CORES - 1))}
else
  export FLAGSHIP_CPUS=${FLAGSHIP_CPUS:-0} SMALL_CPUS=${SMALL_CPUS:-0}
fi
export CHATSITE_HOST=${CHATSITE_HOST:-127.0.0.1} CHATSITE_PORT=${CHATSITE_PORT:-8000}
cat <<MSG

  chatsite is starting: two vLLM engines serve SmolLM2-135M-Instruct (flagship: float32, small: INT8 W8A8);
  they take ~50 s on 2 cores, each worker logs "engine ready"...
  Open  http://$CHATSITE_HOST:$CHATSITE_PORT/   and sign in as  demo / demo-password
  Admin http://$CHATSITE_HOST:$CHATSITE_PORT/admin/   API docs http://$CHATSITE_HOST:$CHATSITE_PORT/api/docs/
  Stop with Ctrl-C.

MSG
exec .venv/bin/honcho -f Procfile start
