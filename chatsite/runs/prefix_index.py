"""Which worker's prefix cache holds the longest start of a run's prompt, by the token ids.

A worker that ends a run whose reply's ids were kept (workers.token_memory) holds that
sequence's KV blocks in its engine's prefix cache, until the engine needs them for others.
It says so here (`hold`): a digest of the ids up to the end of a block (the engine's block
size: a partial block is never cached) names that whole prefix, and Redis maps it, per pool,
to the worker that last took it. To bound the writes, only every `INDEX_EVERY`-th block end is
named, with the last full block and the end of the reply's record the run started from (the
prefix a sibling branch shares). The reply's own digests, longest first, are kept beside it,
so that the router asks for a run that builds on it (a next turn, a regenerate or an edit
after it, a continue of it) with one script (`lookup`): its chat's pin and who holds each of
those prefixes, in one round trip, with no ids read and nothing hashed in the web.

Both expire after `TTL_SECONDS`; a digest that names a prefix an engine has since evicted
costs a cache miss, as a stale chat pin does.
"""
import hashlib

from chatsite import redis_keys
from chatsite.redis_client import get_redis
from chatsite.runs.store.tokens import pack

INDEX_EVERY = 16  # block ends between named prefixes: 34 keys for 8k tokens at 16-token blocks, not 512
TTL_SECONDS = 3600  # as the chat pin's (routing.AFFINITY_TTL_SECONDS)
DIGEST_BYTES = 8  # a collision sends a turn to a worker without its prefix: a cache miss, nothing worse
_ID_BYTES = 4  # a packed id: little-endian uint32 (chatsite.runs.store.tokens.pack)


def chain(token_ids: list[int], *, block: int, also: tuple[int, ...] = ()) -> list[tuple[int, str]]:
    """(blocks, digest of the ids of those first blocks) at every INDEX_EVERY-th block end,
    the last full block's end and each of `also` (block counts), shortest first. Each
    digest names the whole prefix: ids that differ anywhere before a block end change the
    digest there and at every later end; the same ids in the same block size give the same."""
    full = len(token_ids) // block
    ends = sorted({n for n in (*range(INDEX_EVERY, full + 1, INDEX_EVERY), full, *also) if 0 < n <= full})
    data = memoryview(pack(token_ids[:full * block]))
    digest = hashlib.blake2b(f"{block}:".encode(), digest_size=DIGEST_BYTES)
    out, done = [], 0
    for n in ends:  # one running hash: each end's digest covers every id before it
        digest.update(data[done * block * _ID_BYTES:n * block * _ID_BYTES])
        out.append((n, digest.hexdigest()))
        done = n
    return out


def hold(pipe, *, pool: str, worker: str, token_ids: list[int], block: int, reply_id: int,
         built_on: int = 0) -> None:
    """Add to `pipe` (the caller's round trip) that `worker` of `pool` holds `token_ids`
    (the kept ids of reply `reply_id`, whose first `built_on` ids were the record of the
    reply its run built on) in blocks of `block` ids, and the reply's digests for the
    runs that will build on it."""
    links = chain(token_ids, block=block, also=(built_on // block,))
    if links:  # one command, not one SET a digest: 34 SETs cost the worker 3 M instructions (prefix_cost)
        pipe.eval(_HOLD, 1, redis_keys.reply_prefixes(reply_id), TTL_SECONDS, worker,
                  redis_keys.prefix_holder(pool, ""), " ".join(d for _, d in reversed(links)))


# KEYS: the reply's digests; ARGV: the TTL, the worker, the pool's holder key prefix, the digests.
_HOLD = """
redis.call('SET', KEYS[1], ARGV[4], 'EX', ARGV[1])
for digest in string.gmatch(ARGV[4], '%S+') do redis.call('SET', ARGV[3] .. digest, ARGV[2], 'EX', ARGV[1]) end
"""


# KEYS: the chat's pin, the reply's digests; ARGV: the pool's holder key prefix.
# Returns the pin, then the holder of each digest (false: none), longest prefix first.
_LOOKUP = """
local out = {redis.call('GET', KEYS[1])}
local digests = redis.call('GET', KEYS[2])
if digests then
  local keys = {}
  for digest in string.gmatch(digests, '%S+') do keys[#keys + 1] = ARGV[1] .. digest end
  if #keys > 0 then
    for _, holder in ipairs(redis.call('MGET', unpack(keys))) do out[#out + 1] = holder end
  end
end
return out
"""
_script = None


def lookup(*, chat_id: int, reply_id: int, pool: str) -> tuple[str | None, list[str]]:
    """The chat's pinned worker (None: none) and, longest prefix first, the workers of
    `pool` that last took each indexed prefix of reply `reply_id`'s kept ids (none: the
    reply kept none, or they expired). One round trip."""
    global _script
    if _script is None:
        _script = get_redis().register_script(_LOOKUP)
    pin, *holders = _script(keys=[redis_keys.chat_affinity(chat_id), redis_keys.reply_prefixes(reply_id)],
                            args=[redis_keys.prefix_holder(pool, "")])
    return pin, [h for h in holders if h]
