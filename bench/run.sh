#!/usr/bin/env bash
# Reproduce every benchmark of issue 7 (compare, platform_only, multiturn); prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m bench.run_all "$@"
