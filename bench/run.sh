#!/usr/bin/env bash
# Reproduce the benchmarks (bench/run_all.py): prints the tables, writes bench/out/.
# Runs from the setup `make run` made: the benchmark's own packages (matplotlib for the
# plots, py-spy for profiles, httpx) come from requirements-dev.txt, installed here once.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import matplotlib, httpx" 2>/dev/null || [ ! -x .venv/bin/py-spy ]; then
  scripts/setup.sh --dev
fi
exec .venv/bin/python -m bench.run_all "$@"
