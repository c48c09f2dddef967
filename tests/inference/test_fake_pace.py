"""The fake engine keeps its pace after a stall of its process (a paused worker):
it goes on at its step rate instead of making up every missed step in one burst,
as a real engine does (the fault matrix's paused-worker row counts what the engine
made after a takeover)."""
import asyncio
import time

from inference import fake_backend
from inference.fake_backend import FakeBackend
from inference.prompt import assemble
from inference.types import GenerationRequest

STEP = 0.01


def test_after_a_stall_the_steps_go_on_at_their_pace_not_in_a_burst():
    async def main():
        backend = FakeBackend(step_seconds=STEP)
        await backend.start()
        plan = assemble(backend.tokenizer, [{"role": "user", "content": "Hi"}], max_prompt_tokens=1000)
        arrivals: list[float] = []
        await backend.add(GenerationRequest("r", plan.token_ids, 400, seed=1, ignore_eos=True),
                          lambda chunk: arrivals.append(time.monotonic()))
        while len(arrivals) < 3:
            await asyncio.sleep(0.001)
        time.sleep(1.0)  # the loop stalls for 100 steps' time, as a SIGSTOP would stall it
        woke = time.monotonic()
        await asyncio.sleep(0.05)  # five steps' time after waking
        await backend.abort("r")
        return sum(1 for t in arrivals if t >= woke)

    burst = asyncio.run(main())
    # At most the clock's allowed lag, plus the five paced steps (a burst would be ~100).
    assert burst <= fake_backend.MAX_LAG_SECONDS / STEP + 5 + 2, burst
    assert burst >= 3  # and it does go on
