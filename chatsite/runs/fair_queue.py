"""Fair ordering between tenants within one (pool, tier).

A Celery message on a pool queue is a wake-up: the worker that takes it serves the
*fair next* run of its (pool, tier), not the run the message names. Dispatch records
every run it sends to a pool queue here first: the run in its tenant's sorted set
(score: the run id, so a tenant's oldest run goes first, a run handed back included)
and the tenant in the (pool, tier) rotation, a sorted set scored by virtual time (the
turn of the tenant's next run). One Lua script pops the tenant whose turn comes first,
takes its oldest run and moves the tenant one turn on (equal weights: round robin
between the tenants with work). A tenant with new work starts at the turn last
served, so it comes next, and never banks turns while it is idle.

What keeps every run served exactly once:
- every run recorded here has a message of its own (dispatch sends one per push), so
  there are never fewer wake-ups than recorded runs; a wake-up that finds nothing is
  harmless (the worker then tries the run the message names, which the claim skips
  when it is done or held);
- pushing is idempotent (ZADD NX): the sweep re-dispatching a run never records it twice;
- popping removes the run, and the claim (chatsite.runs.services.claim) decides
  whether it is served: a popped run that is finished or held is skipped and the
  worker pops the next one. A cancelled run is removed (`remove`), or skipped when popped.

A worker may ask the pop to pass over tenants (those holding their cap of its runs,
workers.fair_pick); when only those have runs waiting the pop answers WAIT, and the
asking thread blocks on the (pool, tier)'s bell, which every run recorded rings once.
"""
from dataclasses import dataclass

from django.conf import settings

from chatsite import redis_keys
from chatsite.redis_client import get_redis

BELL_MAX = 64  # rings kept while no reserve thread listens (each wakes one, which then finds what there is)

# KEYS[1] = the tenant's runs, KEYS[2] = the rotation, KEYS[3] = the clock, KEYS[4] = the bell;
# ARGV = run id, tenant id; and, to send the run's wake-up in the same step, KEYS[5] = its queue's
# list and ARGV[3] = the message (chatsite.runs.dispatch.message).
_PUSH = """
local added = redis.call('zadd', KEYS[1], 'NX', ARGV[1], ARGV[1])
if not redis.call('zscore', KEYS[2], ARGV[2]) then
  redis.call('zadd', KEYS[2], tonumber(redis.call('get', KEYS[3]) or '0'), ARGV[2])
end
if added == 1 then
  redis.call('lpush', KEYS[4], ARGV[2])
  redis.call('ltrim', KEYS[4], 0, BELL_MAX - 1)
end
if KEYS[5] then redis.call('lpush', KEYS[5], ARGV[3]) end
return added
""".replace("BELL_MAX", str(BELL_MAX))

# KEYS[1] = the rotation, KEYS[2] = the clock; ARGV[1] = the tenants' runs key prefix, ARGV[2..] =
# tenants to pass over (at their cap on the asking worker). A tenant whose set is empty (its runs
# were removed) leaves the rotation. Answers {tenant, run}, 'wait' when only passed-over tenants
# have runs waiting, or false when none waits.
_POP = """
local skip, passed, i = {}, false, 0
for k = 2, #ARGV do skip[ARGV[k]] = true end
while true do
  local head = redis.call('zrange', KEYS[1], i, i, 'WITHSCORES')
  if #head == 0 then
    if passed then return 'wait' end
    return false
  end
  local tenant, turn = head[1], tonumber(head[2])
  local runs = ARGV[1] .. tenant
  if redis.call('zcard', runs) == 0 then
    redis.call('zrem', KEYS[1], tenant)
  elseif skip[tenant] then
    passed, i = true, i + 1
  else
    local run = redis.call('zpopmin', runs)
    redis.call('set', KEYS[2], head[2])
    if redis.call('zcard', runs) > 0 then
      redis.call('zadd', KEYS[1], turn + 1, tenant)
    else
      redis.call('zrem', KEYS[1], tenant)
    end
    return {tenant, run[1]}
  end
end
"""

# KEYS[1] = the tenant's runs, KEYS[2] = the rotation; ARGV = run id, tenant id.
_REMOVE = """
local removed = redis.call('zrem', KEYS[1], ARGV[1])
if redis.call('zcard', KEYS[1]) == 0 then redis.call('zrem', KEYS[2], ARGV[2]) end
return removed
"""

_scripts: dict = {}


def _script(source: str):
    script = _scripts.get(source)
    if script is None:
        script = _scripts[source] = get_redis().register_script(source)
    return script


def enabled() -> bool:
    """CHATSITE_FAIR_QUEUE=0 falls back to FIFO: each message serves the run it names."""
    return settings.CHATSITE["FAIR_QUEUE"]


@dataclass(frozen=True, slots=True)
class Picked:
    tenant_id: int
    run_id: int


def push(*, pool: str, tier: str, tenant_id: int, run_id: int, wake: tuple[str, str] | None = None) -> bool:
    """Record a run as waiting in (pool, tier); False if it already was. `wake`, a
    (list key, message) pair, is the run's wake-up, pushed in the same atomic step;
    without it the caller sends the wake-up after this (never before: a wake-up must
    find the run)."""
    keys = [redis_keys.fair_runs(pool, tier, tenant_id), redis_keys.fair_tenants(pool, tier),
            redis_keys.fair_clock(pool, tier), redis_keys.fair_bell(pool, tier)]
    args = [run_id, tenant_id]
    if wake is not None:
        keys.append(wake[0])
        args.append(wake[1])
    return bool(_script(_PUSH)(keys=keys, args=args))


def wait_for_push(*, pool: str, tier: str, timeout: float) -> bool:
    """Block until a run is recorded in (pool, tier) (or one was while nobody listened),
    at most `timeout` seconds; whether one was."""
    return get_redis().blpop([redis_keys.fair_bell(pool, tier)], timeout=timeout) is not None


WAIT = "wait"  # pop's answer when only tenants passed over have runs waiting


def pop(*, pool: str, tier: str, skip=()) -> Picked | None | str:
    """The fair next run of (pool, tier), removed from the structure, passing over the
    tenants in `skip`; WAIT when only those have runs waiting, None when none waits."""
    keys = [redis_keys.fair_tenants(pool, tier), redis_keys.fair_clock(pool, tier)]
    got = _script(_POP)(keys=keys, args=[redis_keys.fair_runs(pool, tier, ""), *skip])
    if not got:
        return None
    if got == WAIT:
        return WAIT
    return Picked(tenant_id=int(got[0]), run_id=int(got[1]))


def remove(*, pool: str, tier: str, tenant_id: int, run_id: int) -> bool:
    """Forget a waiting run (a cancel); False if it was not recorded."""
    keys = [redis_keys.fair_runs(pool, tier, tenant_id), redis_keys.fair_tenants(pool, tier)]
    return bool(_script(_REMOVE)(keys=keys, args=[run_id, tenant_id]))


def waiting(runs) -> dict[int, bool]:
    """For each run (its pool's name, tier, tenant_id and pk read from it; load the
    pool with the runs), whether it is recorded as waiting, in one round trip."""
    runs = list(runs)
    pipe = get_redis().pipeline(transaction=False)
    for run in runs:
        pipe.zscore(redis_keys.fair_runs(run.pool.name, run.tier, run.tenant_id), run.pk)
    return {run.pk: score is not None for run, score in zip(runs, pipe.execute())}


def tenants_waiting(pool_tiers) -> list[int]:
    """For each (pool, tier), how many tenants have runs waiting, in one round trip."""
    pipe = get_redis().pipeline(transaction=False)
    for pool, tier in pool_tiers:
        pipe.zcard(redis_keys.fair_tenants(pool, tier))
    return pipe.execute()


def depths(*, pool: str, tier: str) -> dict[int, int]:
    """Runs waiting per tenant in (pool, tier) (the rotation's tenants only)."""
    r = get_redis()
    tenants = [int(t) for t in r.zrange(redis_keys.fair_tenants(pool, tier), 0, -1)]
    pipe = r.pipeline(transaction=False)
    for tenant in tenants:
        pipe.zcard(redis_keys.fair_runs(pool, tier, tenant))
    return dict(zip(tenants, pipe.execute()))
