"""A worker as it was before engines died with their workers: starts a real vLLM engine
the plain way (no PR_SET_PDEATHSIG), records it as a worker does, and waits. Killed with
SIGKILL it leaves a live orphan engine, what a crashed worker left behind.

    python -m tests.workers.orphan_engine RECORD_PATH MODEL_DIR
"""
import asyncio
import sys

from inference.engine_config import TINY_ENGINE_ARGS
from inference.engine_lifetime import EngineRecord
from inference.specs import EngineSpec

READY = "orphan engine ready"


async def main(record_path: str, model: str) -> None:
    from vllm.v1.engine.async_llm import AsyncLLM

    spec = EngineSpec.build(pool="orphan", model=model, context_length=1024, engine_args=TINY_ENGINE_ARGS)
    engine = AsyncLLM.from_engine_args(spec.engine_args())
    EngineRecord(record_path).write()
    print(READY, flush=True)
    await asyncio.sleep(3600)
    engine.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
