#!/usr/bin/env bash
# Set up, then run the test suite (real Postgres, Redis, Celery workers, vLLM and Chromium).
# Three pytest workers (pytest-xdist) on this 2-core machine: much of the suite waits on its own
# processes (leases, restarts, engine starts), so more workers than cores fill the gaps (the full suite:
# 870 s of pytest on 2 workers, 700 s on 3, 2026-12-06); every test needing a real engine runs on one of
# them (tests/marks.py). CHATSITE_TEST_WORKERS=0 runs in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
WORKERS=${CHATSITE_TEST_WORKERS:-3}
XDIST=(); [ "$WORKERS" != 0 ] && XDIST=(-n "$WORKERS" --dist loadgroup)
set +e
.venv/bin/python -m pytest "${XDIST[@]}" "$@"
rc=$?
[ $rc -eq 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit $rc
