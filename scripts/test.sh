#!/usr/bin/env bash
# Set up, then run the test suite (real Postgres, Redis, Celery workers, vLLM and Chromium).
# Two pytest workers (pytest-xdist): much of the suite waits on its own processes (leases, restarts,
# engine starts), so a second worker fills the gaps; every test needing a real engine runs on one of
# them (tests/marks.py). CHATSITE_TEST_WORKERS=0 runs in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
WORKERS=${CHATSITE_TEST_WORKERS:-2}
XDIST=(); [ "$WORKERS" != 0 ] && XDIST=(-n "$WORKERS" --dist loadgroup)
set +e
.venv/bin/python -m pytest "${XDIST[@]}" "$@"
rc=$?
[ $rc -eq 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit $rc
