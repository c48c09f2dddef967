"""Settings for the chat platform. Every value comes from the environment with a
default that runs on a laptop; `chatsite.settings_production` tightens them."""
import os
from pathlib import Path

import dj_database_url
from whitenoise.compress import Compressor

from chatsite.install_secret import read_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CHATSITE_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


# Off unless a developer asks for Django's debug pages: DJANGO_DEBUG=true (`DJANGO_DEBUG=true make run`).
# With it off, a missing page, a refusal or a bug shows the product's own page (chatsite/web/errors.py).
DEBUG = env_bool("DJANGO_DEBUG", False)
# This install's own secret (chatsite/install_secret.py): DJANGO_SECRET_KEY, else the file
# setup made under var/ (git-ignored, mode 600; made here on first use, debug or not, unless
# the production settings, which refuse to make one, set CHATSITE_MAKE_SECRET_KEY=false).
SECRET_KEY_FILE = Path(os.environ.get("DJANGO_SECRET_KEY_FILE", VAR_DIR / "secret_key"))
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or read_secret_key(
    SECRET_KEY_FILE, create=env_bool("CHATSITE_MAKE_SECRET_KEY", True))
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "chatsite.tenancy",
    "chatsite.pools",
    "chatsite.chats",
    "chatsite.runs",
    "chatsite.quotas",
    "chatsite.metrics",
    "chatsite.api",
    "chatsite.openai_api",
    "chatsite.web",
    "workers",
]

MIDDLEWARE = [
    # Outermost: every error under /api/ and /v1/ leaves as JSON in that API's shape.
    "chatsite.api.middleware.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Innermost: lets an events token be bound to the request's user and credential.
    "chatsite.tenancy.request_context.RequestContextMiddleware",
]

ROOT_URLCONF = "chatsite.urls"
ASGI_APPLICATION = "chatsite.edge.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "chatsite.web.context.preferences",
            ],
        },
    },
]

DATABASES = {"default": dj_database_url.parse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/chatsite"))}
# A connection that went silent (a partition drops packets, nobody resets anything) fails
# within seconds, so the caller's retry reconnects as soon as Postgres is reachable again,
# instead of waiting out TCP's retransmission backoff (tens of seconds after a minute's
# cut, up to ~15 minutes): what was sent must be acknowledged within
# DATABASE_TCP_USER_TIMEOUT_MS, a connection made within DATABASE_CONNECT_TIMEOUT seconds,
# and idle connections are probed by keepalives (tests/faults/hosts, row d).
DATABASES["default"]["OPTIONS"] = {
    "connect_timeout": int(os.environ.get("DATABASE_CONNECT_TIMEOUT", "5")),
    "tcp_user_timeout": int(os.environ.get("DATABASE_TCP_USER_TIMEOUT_MS", "10000")),
    "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 5, "keepalives_count": 3,
}
# Parameters bound by the server (Django's default binds them on the client, which
# cannot prepare), so that a pooled connection keeps the hot path's statements prepared
# (chatsite/runs/store/backend/: only those marked with rows.prepared). DATABASE_PREPARED=off binds
# on the client, as Django does, for a pooler in transaction mode (pgbouncer < 1.21).
if os.environ.get("DATABASE_PREPARED", "on") != "off":
    DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
# A connection pool per process (psycopg_pool through Django), checked on checkout: a
# request borrows a live connection instead of forking a Postgres backend. It waits up
# to DATABASE_POOL_TIMEOUT seconds for one, then fails with 503 + Retry-After. A web
# process's request threads hold a connection only while they run a hop, at most
# CHATSITE_WEB_THREADS at once (chatsite/edge/gate.py), plus the stream
# endpoint's one thread; a worker's, one per run being claimed or finalized (Procfile: 24
# for the web, 8 per worker).
# After a Postgres restart every idle connection is dead: the checkout check
# (chatsite/runs/store/backend/checkout.py) replaces them all as soon as one fails, instead of a request
# walking through them one backoff (1 s, 2 s, ...) at a time; reconnect_timeout caps
# the backoff of a reconnection (psycopg_pool's default is 5 minutes).
# DATABASE_POOL_MAX=0 (the default: tests, management commands) means no pool: one
# connection per request, closed after.
_POOL_MAX = int(os.environ.get("DATABASE_POOL_MAX", "0"))
if _POOL_MAX > 0:
    DATABASES["default"]["ENGINE"] = "chatsite.runs.store.backend"  # Django's, with the checkout check above
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1, "max_size": _POOL_MAX, "max_idle": 60, "reconnect_timeout": 5,
        "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "3"))}
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("DATABASE_TEST_NAME", "test_chatsite")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# A Redis that persists nothing loses every run stream in flight when it restarts: the web and the
# workers refuse to start against one unless this accepts it (chatsite/redis_durability.py).
ALLOW_VOLATILE_REDIS = env_bool("CHATSITE_ALLOW_VOLATILE_REDIS", False)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
AUTHENTICATION_BACKENDS = ["chatsite.tenancy.throttle.ThrottledModelBackend"]
CSRF_FAILURE_VIEW = "chatsite.web.errors.csrf_failure"
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("CHATSITE_STATIC_ROOT", BASE_DIR / "staticfiles"))
# collectstatic (scripts/setup.sh) writes each file under a name holding a hash of its content, with
# gzip and brotli copies beside it; whitenoise serves those (chatsite/web/static_files.py) with a
# year's cache lifetime, compressed as the browser accepts. Under DEBUG the files come from static/
# as they are edited, uncached.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "chatsite.web.static_files.StaticFilesStorage"},
}
WHITENOISE_KEEP_ONLY_HASHED_FILES = True  # pages name the hashed files only; half the files to compress
# Source maps (the API docs' bundles ship 3 MB of them) are read by developer tools alone: left
# uncompressed, they made collectstatic three times slower.
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = [*Compressor.SKIP_COMPRESS_EXTENSIONS, "map"]

DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024  # a bigger body is refused with 413

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chatsite.runs.admission.credentials.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "chatsite.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "chatsite API",
    "DESCRIPTION": "Chats, messages and generation runs; tokens stream over Server-Sent Events.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The SSE consumer and the OpenAI-compatible async views are not DRF views: document them too.
    "PREPROCESSING_HOOKS": ["chatsite.api.schema_hook.add_documented_endpoints"],
    "TAGS": [
        {"name": "chats", "description": "Chats and their messages; posting a message starts a run."},
        {"name": "runs", "description": "A run generates one reply: status, cancel, and its token stream (SSE)."},
        {"name": "models", "description": "The model pools your tenant may use."},
        {"name": "keys", "description": "Your own API keys."},
        {"name": "usage", "description": "Your tenant's token usage this month."},
        {"name": "openai", "description": "OpenAI-compatible endpoints under /v1/ (OpenAI's wire format and "
                                          "error shape); point an OpenAI SDK's base_url at /v1."},
    ],
}

# --- the platform's own knobs -------------------------------------------------
CHATSITE = {
    # Folder holding the demo models `build_demo_models` trains.
    "DEMO_MODELS_DIR": Path(os.environ.get("CHATSITE_DEMO_MODELS_DIR", VAR_DIR / "models")),
    # Seconds a finished run's stream stays in Redis; Postgres keeps the durable copy.
    "STREAM_TTL_SECONDS": int(os.environ.get("CHATSITE_STREAM_TTL", "3600")),
    # How long a run's events_url token lets its holder read the run without credentials.
    "EVENTS_TOKEN_SECONDS": float(os.environ.get("CHATSITE_EVENTS_TOKEN_SECONDS", "900")),
    # SSE keep-alive comment interval, seconds.
    "SSE_KEEPALIVE_SECONDS": float(os.environ.get("CHATSITE_SSE_KEEPALIVE", "15")),
    # A worker's claim on a run lapses this long after its last heartbeat.
    "RUN_LEASE_SECONDS": float(os.environ.get("CHATSITE_RUN_LEASE", "6")),
    "MAX_MESSAGE_CHARS": int(os.environ.get("CHATSITE_MAX_MESSAGE_CHARS", "32000")),
    "DEFAULT_MAX_TOKENS": int(os.environ.get("CHATSITE_DEFAULT_MAX_TOKENS", "256")),
    # A chat stays pinned to its worker (prefix-cache affinity) unless that worker is this hot.
    "AFFINITY_MAX_KV_USAGE": float(os.environ.get("CHATSITE_AFFINITY_MAX_KV", "0.9")),
    "AFFINITY_MAX_WAITING": int(os.environ.get("CHATSITE_AFFINITY_MAX_WAITING", "4")),
    # Optional bearer token required to scrape /metrics.
    "METRICS_TOKEN": os.environ.get("CHATSITE_METRICS_TOKEN", ""),
    # A web process's request threads running a hop at once (chatsite/edge/gate.py): the others
    # wait their turn, asleep, instead of taking the GIL from the event loop that streams every
    # run. Raise it when the database is far away (round trips, not the CPU, then bound a
    # request); 0: no limit (Django's way).
    "WEB_THREADS": int(os.environ.get("CHATSITE_WEB_THREADS", "2")),
}

# --- security: sign-in throttling, proxies, SSE limits, revocation, /metrics --
CHATSITE.update({
    # Sign-in throttling (chatsite/tenancy/throttle.py): an account locks from one address after
    # this many failures from it, for LOGIN_LOCK_SECONDS doubling per further failure up to the
    # max; an address after far more, and an account from everywhere after more, except at the
    # addresses the account signed in from within LOGIN_KNOWN_ADDRESS_SECONDS. Failures are
    # forgotten this long after the last one.
    "LOGIN_MAX_FAILURES": int(os.environ.get("CHATSITE_LOGIN_MAX_FAILURES", "5")),
    "LOGIN_MAX_FAILURES_PER_ADDRESS": int(os.environ.get("CHATSITE_LOGIN_MAX_FAILURES_PER_ADDRESS", "50")),
    "LOGIN_MAX_FAILURES_PER_ACCOUNT": int(os.environ.get("CHATSITE_LOGIN_MAX_FAILURES_PER_ACCOUNT", "20")),
    "LOGIN_KNOWN_ADDRESS_SECONDS": int(os.environ.get("CHATSITE_LOGIN_KNOWN_ADDRESS_SECONDS", str(30 * 86400))),
    "LOGIN_LOCK_SECONDS": int(os.environ.get("CHATSITE_LOGIN_LOCK_SECONDS", "60")),
    "LOGIN_LOCK_MAX_SECONDS": int(os.environ.get("CHATSITE_LOGIN_LOCK_MAX_SECONDS", "900")),
    "LOGIN_FAILURE_WINDOW_SECONDS": int(os.environ.get("CHATSITE_LOGIN_FAILURE_WINDOW_SECONDS", "86400")),
    # Proxies whose X-Forwarded-For we believe (addresses or networks, comma-separated),
    # e.g. "10.0.0.0/8,127.0.0.1" behind a load balancer. Empty: REMOTE_ADDR is the client.
    "TRUSTED_PROXIES": [p for p in os.environ.get("CHATSITE_TRUSTED_PROXIES", "").split(",") if p.strip()],
    # Open SSE streams one user may hold in a tenant; one more is refused with 429.
    "SSE_MAX_STREAMS_PER_USER": int(os.environ.get("CHATSITE_SSE_MAX_STREAMS_PER_USER", "32")),
    # How often an open SSE stream checks that its principal was not revoked (one Redis call).
    "SSE_REVOCATION_CHECK_SECONDS": float(os.environ.get("CHATSITE_SSE_REVOCATION_CHECK_SECONDS", "3")),
    # A chat's share link (no account): viewers following it live at once (one more: 429), and how
    # often each checks that the link was not revoked (a revoked link ends them within this).
    "SHARE_MAX_STREAMS_PER_LINK": int(os.environ.get("CHATSITE_SHARE_MAX_STREAMS_PER_LINK", "100")),
    "SHARE_REVOCATION_CHECK_SECONDS": float(os.environ.get("CHATSITE_SHARE_REVOCATION_CHECK_SECONDS", "1")),
    # How long a revocation is remembered; a stream open longer than this re-authenticates.
    "REVOCATION_TTL_SECONDS": int(os.environ.get("CHATSITE_REVOCATION_TTL_SECONDS", "86400")),
    # Under production settings /metrics answers only with METRICS_TOKEN (403 while none is set).
    "METRICS_REQUIRE_TOKEN": env_bool("CHATSITE_METRICS_REQUIRE_TOKEN", False),
})

# --- workers: the engine, slots, heartbeat, sweep, drain, stream writes ---------
CHATSITE.update({
    # The engine a worker runs: "vllm" (the product) or "fake" (the fast deterministic
    # engine of the platform tests and benchmarks), and the fake engine's seconds per token.
    "ENGINE": os.environ.get("CHATSITE_ENGINE", "vllm"),
    "FAKE_STEP_SECONDS": float(os.environ.get("CHATSITE_FAKE_STEP_SECONDS", "0.01")),
    # How long a worker waits for the engine's grammar of a new JSON Schema to compile
    # before refusing the run (inference/constraint_check.py); the compile goes on, its result kept.
    "CONSTRAINT_COMPILE_SECONDS": float(os.environ.get("CHATSITE_CONSTRAINT_COMPILE_SECONDS", "10")),
    # Runs one worker process holds at once (Celery threads sharing its one engine).
    "WORKER_SLOTS": int(os.environ.get("CHATSITE_WORKER_SLOTS", "32")),
    # With the fair queue, threads a worker keeps beyond WORKER_SLOTS for tenants holding fewer than
    # WORKER_SLOTS of its runs: one tenant filling the slots never makes another wait for a slot.
    "WORKER_RESERVE_SLOTS": int(os.environ.get("CHATSITE_WORKER_RESERVE_SLOTS", "2")),
    # A queue message unacknowledged this long is delivered again (a dead worker's runs).
    "VISIBILITY_TIMEOUT_SECONDS": int(os.environ.get("CHATSITE_VISIBILITY_TIMEOUT", "3600")),
    # How often beat sweeps for runs whose lease lapsed.
    "SWEEP_SECONDS": float(os.environ.get("CHATSITE_SWEEP_SECONDS", "3")),
    # Heartbeat period (capped at 1 s: the lease is a few of them).
    "HEARTBEAT_SECONDS": min(float(os.environ.get("CHATSITE_HEARTBEAT_SECONDS", "1.0")), 1.0),
    # How often a worker of a disabled pool looks whether the pool was enabled (it loads no engine till then).
    "ENABLED_POLL_SECONDS": float(os.environ.get("CHATSITE_ENABLED_POLL_SECONDS", "5")),
    # How a worker drains on SIGTERM: "handoff" hands its runs to the pool's other workers at once
    # ("finish" when it has none), "finish" lets them finish until DRAIN_SECONDS (workers/drain.py).
    "DRAIN_MODE": os.environ.get("CHATSITE_DRAIN_MODE", "handoff"),
    # Seconds a draining worker in "finish" mode lets its runs finish before it hands the rest back.
    "DRAIN_SECONDS": float(os.environ.get("CHATSITE_DRAIN_SECONDS", "30")),
    # How long a worker gathers a run's tokens into one stream entry (a run's first token never
    # waits): COALESCE_MS with one run streaming, growing with the runs it streams to
    # COALESCE_BUSY_MS at COALESCE_BUSY_RUNS and more (workers/stream_writer.coalesce_window).
    "COALESCE_SECONDS": float(os.environ.get("CHATSITE_COALESCE_MS", "20")) / 1000,
    "COALESCE_BUSY_SECONDS": float(os.environ.get("CHATSITE_COALESCE_BUSY_MS", "50")) / 1000,
    "COALESCE_BUSY_RUNS": max(1, int(os.environ.get("CHATSITE_COALESCE_BUSY_RUNS", "16"))),
    # Prefix-cache affinity: a chat's next turn goes to the worker that holds its prefix.
    "AFFINITY": os.environ.get("CHATSITE_AFFINITY", "1") != "0",
    # Fair ordering between tenants within a pool's tier (chatsite/runs/fair_queue.py) and a
    # per-tenant share of its queue limit; "0" falls back to FIFO and a pool-wide limit.
    "FAIR_QUEUE": os.environ.get("CHATSITE_FAIR_QUEUE", "1") != "0",
    # On a CPU host, bind vLLM's engine-core process to its model worker's cores.
    "COLOCATE_ENGINE_CORE": os.environ.get("CHATSITE_COLOCATE_ENGINE_CORE", "1") != "0",
    # Where each worker names its engine's processes (inference/engine_lifetime.py): a worker
    # started under a dead one's name ends that one's engine if it still runs.
    "ENGINE_RECORD_DIR": Path(os.environ.get("CHATSITE_ENGINE_RECORD_DIR", VAR_DIR / "run")),
})

# Celery: Redis broker; settings the worker reads are in workers/app.py.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"redact": {"()": "chatsite.logging_filters.RedactSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
