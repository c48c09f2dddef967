"""Branch turns and the prefix cache: how often does a turn that builds on an older reply
(a regenerate or an edit of a turn before the last, a turn after the first path chosen
again) reach a worker whose cache holds that reply's whole prefix? Routing by the kept token
ids (this checkout) against routing by the chat's pin alone (`--pin-root`: a checkout from
before it).

    .venv/bin/python -m bench.prefix_routing --pin-root DIR [--conversations 12] [--workers 3] [--slots 2]

`--workers` fake-engine workers of the pool, `--slots` threads each, so that under the load of the
conversations a chat's pinned worker is often full and its turn spills to another worker
(the chat then re-pins there). Each conversation sends `TURNS` turns, then `BRANCHES` turns
that build on a random older reply of that first path. A turn reached a holder when the
fake engine's prefix cache served every full 16-token block of the reply it builds on
(its `cached_tokens`; the fake engine caches what each worker computed, as vLLM does).
"""
import argparse
import asyncio
import random
from pathlib import Path

from bench import common, sse_client
from bench.arm_platform import Client
from bench.platform_stack import Stack

TURNS = 4
BRANCHES = 6
REPLY_TOKENS = 24
BLOCK = 16  # the fake engine's cache block (inference.fake_details.BLOCK_TOKENS)
# regenerate / edit: of the turn after an older reply (both build on that reply); back: the
# first path chosen again (down its newest turn) and a turn after it, as after trying an alternative
OPS = ("regenerate", "edit", "back")


def question(conv: int, n: str) -> str:
    return f"Conversation {conv}, question {n}: " + " ".join(common._FILLER[:12])


async def _post(client: Client, path: str, body: dict) -> dict:
    """POST a turn (a 409, the chat's last run not yet finalized, is tried again) and follow
    its events to the end; the answer's run and messages."""
    for _ in range(200):
        status, answer = await client._post(path, {"max_tokens": REPLY_TOKENS, "ignore_eos": True, **body})
        if status == 202:
            break
        if status != 409:
            raise RuntimeError(f"POST {path}: {status} {answer}")
        await asyncio.sleep(0.05)
    async with client.http.get(client.url + answer["run"]["events_url"], headers=client.auth) as resp:
        async for ev in sse_client.events(resp):
            if ev.event in ("done", "error"):
                break
    return answer


async def _select(client: Client, chat: int, message: int) -> int:
    """Choose `message`'s version (a 409 while the last run is being finalized is tried again):
    the chosen path's new end."""
    for _ in range(200):
        status, answer = await client._post(f"/api/chats/{chat}/messages/{message}/select", {})
        if status == 200:
            return answer["leaf"]
        if status != 409:
            raise RuntimeError(f"select {message}: {status} {answer}")
        await asyncio.sleep(0.05)
    raise RuntimeError(f"select {message}: still 409")


async def conversation(client: Client, conv: int, turns: list, branches: list) -> None:
    """TURNS turns, then BRANCHES turns each building on a random older reply of that path:
    (run id, the reply it builds on) into `turns` and `branches`."""
    rng = random.Random(conv)
    chat = (await client.new_chats(1))[0]
    path, built_on = [], None  # (question id, reply id) of the first path
    for t in range(TURNS):
        answer = await _post(client, f"/api/chats/{chat}/messages/", {"content": question(conv, str(t))})
        turns.append((answer["run"]["id"], built_on))
        built_on = answer["assistant_message"]["id"]
        path.append((answer["user_message"]["id"], built_on))
    for b in range(BRANCHES):
        op, i = rng.choice(OPS), rng.randrange(0, TURNS - 1)  # builds on the reply of turn i, not the last
        reply = path[i][1]
        if op == "back":
            reply = await _select(client, chat, path[-1][1])
            answer = await _post(client, f"/api/chats/{chat}/messages/", {"content": question(conv, f"{b}n")})
        elif op == "regenerate":
            answer = await _post(client, f"/api/chats/{chat}/messages/{path[i + 1][1]}/regenerate", {})
        else:
            answer = await _post(client, f"/api/chats/{chat}/messages/{path[i + 1][0]}/edit",
                                 {"content": question(conv, f"{b}e")})
        branches.append((answer["run"]["id"], reply))


def served_whole(stack: Stack, pairs: list) -> tuple[int, int]:
    """Of (run, reply it builds on) pairs with a reply, how many runs had every full block
    of that reply's kept ids served by their worker's prefix cache; and how many pairs."""
    pairs = [(run, reply) for run, reply in pairs if reply is not None]
    with stack.sql() as conn:
        rows = dict(conn.execute(
            "select r.id, ((r.details->>'cached_tokens')::int, r.prompt_tokens, length(t.token_ids) / 4) "
            "from runs_generationrun r, chats_messagetokens t, unnest(%s::bigint[], %s::bigint[]) p(run, reply) "
            "where r.id = p.run and t.message_id = p.reply",
            ([p[0] for p in pairs], [p[1] for p in pairs])).fetchall())
    whole = 0
    for cached, prompt, kept in rows.values():
        whole += int(cached or 0) >= min(int(kept), int(prompt) - 1) // BLOCK * BLOCK
    return whole, len(pairs)


def run_arm(name: str, root: Path, conversations: int, workers: int, slots: int) -> dict:
    stack = Stack(db_name=f"bench_prefix_{name}", root=root)
    try:
        key = stack.seed()
        _, url = stack.start_web()
        for w in range(workers):
            stack.start_worker(f"{name}-{w}", CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS=0.01,
                               CHATSITE_WORKER_SLOTS=slots)

        async def go():
            turns, branches = [], []
            async with sse_client.session(limit=0) as http:
                client = Client(url, key, http)
                await asyncio.gather(*(conversation(client, c, turns, branches) for c in range(conversations)))
            return turns, branches

        turns, branches = asyncio.run(go())
        (t_whole, t_all), (b_whole, b_all) = served_whole(stack, turns), served_whole(stack, branches)
    finally:
        stack.stop()
    print(f"[prefix_routing] {name}: next turns served whole {t_whole}/{t_all}, branch turns {b_whole}/{b_all}",
          flush=True)
    return {"next_turns": [t_whole, t_all], "branch_turns": [b_whole, b_all]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pin-root", type=Path, required=True, help="a checkout that routes by the chat's pin only")
    ap.add_argument("--conversations", type=int, default=12)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--arms", default="prefix,pin")
    a = ap.parse_args()
    roots = {"prefix": common.ROOT, "pin": a.pin_root}
    data = {arm: run_arm(arm, roots[arm], a.conversations, a.workers, a.slots) for arm in a.arms.split(",")}
    data["args"] = {"conversations": a.conversations, "workers": a.workers, "slots": a.slots, "turns": TURNS,
                    "branches": BRANCHES}
    common.write_json("prefix_routing.json", data)


if __name__ == "__main__":
    main()
