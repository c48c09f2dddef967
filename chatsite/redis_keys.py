"""Every Redis key the platform uses is built here, and nowhere else."""


def run_stream(run_id: int) -> str:
    """The token log of one run: token entries, then exactly one done/error entry."""
    return f"run:{run_id}"


def cancelled_runs() -> str:
    """Sorted set of run ids a user asked to stop (score: when); the stream writer's
    fenced append reads it for every run it writes, in the same round trip."""
    return "runs:cancelled"


def cancels_channel(database: int) -> str:
    """Pub/sub channel a stop's run id is published on as it is asked (best effort: a worker
    holding the run aborts it at once instead of at its next append; workers.cancel_watch).
    Named by the Redis database number: unlike keys, channels are shared by every database
    of a server (the test sessions running side by side each have one)."""
    return f"runs:cancels:{database}"


def run_lease(run_id: int) -> str:
    """The token of the one attempt that may write the run's stream (lapses when it
    dies); `ended:<token>` once its terminal entry is written (chatsite.runs.stream.lease)."""
    return f"run:{run_id}:lease"


def run_steering(run_id: int) -> str:
    """Present while a send-now request waits for this run's stop to start its message
    itself (chatsite.runs.services.queued.steering): the run's end leaves the message to it."""
    return f"run:{run_id}:steering"


def worker_heartbeat(worker: str) -> str:
    """A worker's latest engine figures (a hash), expiring when it goes silent."""
    return f"worker:{worker}"


def workers_index() -> str:
    """Sorted set of worker names scored by their last heartbeat time."""
    return "workers"


def pool_workers_index(pool: str) -> str:
    """Sorted set of one pool's workers that take work (not draining), scored by their last heartbeat
    time: one ZCOUNT tells admission whether the pool has a live worker."""
    return f"pool:{pool}:workers"


def chat_affinity(chat_id: int) -> str:
    """The worker that served a chat's last turn (its prefix cache is warm there)."""
    return f"chat:{chat_id}:worker"


def prefix_holder(pool: str, digest: str) -> str:
    """The worker of `pool` whose prefix cache last took the token ids `digest` names
    (chatsite.runs.prefix_index); with `digest=""` the prefix its lookup script appends digests to."""
    return f"prefix:{pool}:{digest}"


def reply_prefixes(message_id: int) -> str:
    """The digests of a reply's kept token ids at its indexed block ends, longest first:
    what the router looks up for a run that builds on that reply."""
    return f"message:{message_id}:prefixes"


def run_redispatch_guard(run_id: int, attempt: int) -> str:
    """Set while the sweep's re-dispatch of an orphaned run is in flight: per attempt, so a
    dispatch that was taken (the next attempt claimed the run) guards nothing any more."""
    return f"run:{run_id}:redispatch:{attempt}"


def fair_tenants(pool: str, tier: str) -> str:
    """Sorted set of the tenants with runs waiting in one (pool, tier), scored by the
    virtual time of each one's next turn (chatsite.runs.fair_queue)."""
    return f"fair:{pool}:{tier}:tenants"


def fair_clock(pool: str, tier: str) -> str:
    """The virtual time of the last turn served in one (pool, tier): a tenant with new work starts there."""
    return f"fair:{pool}:{tier}:clock"


def fair_bell(pool: str, tier: str) -> str:
    """A short list pushed once per run recorded in one (pool, tier): a worker's reserve
    threads block on it (BLPOP) instead of polling."""
    return f"fair:{pool}:{tier}:bell"


def fair_runs(pool: str, tier: str, tenant_id: int | str) -> str:
    """Sorted set of one tenant's runs waiting in one (pool, tier), scored by run id (oldest first).
    With `tenant_id=""` it is the prefix the pop script appends a tenant id to."""
    return f"fair:{pool}:{tier}:runs:{tenant_id}"


def tenant_rate(tenant_id: int, minute: int) -> str:
    """Requests a tenant made in one wall-clock minute."""
    return f"tenant:{tenant_id}:rpm:{minute}"


def metric_counter(name: str) -> str:
    """A platform-wide counter (hash of label -> count) the /metrics page reads."""
    return f"metrics:{name}"


def metric_histogram(name: str, pool: str) -> str:
    """A latency histogram (hash of bucket -> count, plus sum and count) for one pool."""
    return f"metrics:{name}:{pool}"


def login_lock(kind: str, value: str) -> str:
    """Failed sign-ins and the lock they earned (a hash) for one account from one address
    ("pair", value "ADDRESS USERNAME"), one address ("ip") or one account ("user")."""
    return f"login-lock:{kind}:{value}"


def login_known(address: str, username: str) -> str:
    """Present while `username` signed in successfully from `address` recently (an address
    known for the account: the address's and the account's locks do not apply there)."""
    return f"login-known:{address} {username}"


def revoked(kind: str, ident: str) -> str:
    """When access through a principal (key, session, membership, user, tenant, chat) was revoked."""
    return f"revoked:{kind}:{ident}"


def revocations_loaded() -> str:
    """Present while Redis holds every revocation marker Postgres records (set after a
    rebuild; gone with a Redis that lost its data)."""
    return "revoked:loaded"


def sse_streams(tenant_id: int, user_id: int) -> str:
    """Sorted set of one user's open SSE streams in a tenant (score: when the entry expires)."""
    return f"sse:{tenant_id}:{user_id}:streams"


def share_streams(share_id: int) -> str:
    """Sorted set of the open SSE streams of one chat's share link (its viewers hold no
    account; score: when the entry expires)."""
    return f"sse:share:{share_id}:streams"


def hub_wakeup(hub_id: str) -> str:
    """A web process's private stream, written to wake its blocked multiplexed read."""
    return f"hub:{hub_id}:wake"


USER_EVENTS_MAXLEN = 500  # events kept per user (approximately): a window away longer reloads its lists
USER_EVENTS_TTL_SECONDS = 86400  # a day without events and the stream is gone


def user_events(user_id: int) -> str:
    """A user's small events (chat created/renamed/deleted, a turn started, a version
    chosen), followed by every open window of that user (SSE); MAXLEN and TTL above."""
    return f"user:{user_id}:events"
