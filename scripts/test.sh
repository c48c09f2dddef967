#!/usr/bin/env bash
# Set up, then run the test suite (real Postgres, Redis, Celery workers, vLLM and Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
set +e
.venv/bin/python -m pytest "$@"
rc=$?
[ $rc -eq 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit $rc
