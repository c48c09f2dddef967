"""Serve the web: `python -m chatsite.edge.web_server` (what the Procfile, compose and
Kubernetes start).

CHATSITE_WEB_SERVER picks the ASGI server, with the same application either way:
- `daphne` (the default): chatsite/edge/daphne_server.py refuses an oversized body inside
  Twisted and keeps tokens out of daphne's access log;
- `uvicorn` (uvloop and httptools): an operator's choice that spends less of the web's
  CPU per SSE frame and per request (bench/out/RESULTS.md). The body limit is the ASGI
  layer's (chatsite/edge/body_limit.py: uvicorn hands the body over as it arrives), the
  access log is redacted by chatsite.logging_filters.RedactArgs, X-Forwarded-For is left
  to the application (CHATSITE["TRUSTED_PROXIES"]), and on SIGTERM open streams get
  CHATSITE_WEB_GRACE_SECONDS to end before they are closed (their clients resume with
  Last-Event-ID, as after any dropped connection).

The address is CHATSITE_HOST and CHATSITE_PORT (127.0.0.1:8000), or --host and --port.
"""
import argparse
import copy
import os
import sys

APP = "chatsite.edge.asgi:application"
SERVERS = ("daphne", "uvicorn")
GRACE_SECONDS = 10


def daphne_argv(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), APP]


def uvicorn_options(host: str, port: int) -> dict:
    """uvicorn.run's keyword arguments for the platform's web."""
    from uvicorn.config import LOGGING_CONFIG

    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config["filters"] = {"redact": {"()": "chatsite.logging_filters.RedactArgs"}}
    log_config["handlers"]["access"]["filters"] = ["redact"]
    log_config["formatters"]["default"]["use_colors"] = False
    log_config["formatters"]["access"]["use_colors"] = False
    return {
        "host": host, "port": port, "loop": "uvloop", "http": "httptools", "ws": "none",
        "lifespan": "off",  # the application has no startup or shutdown of its own to run
        "proxy_headers": False,  # chatsite.tenancy.addresses reads X-Forwarded-For from trusted proxies only
        "server_header": False,
        "log_config": log_config,
        "timeout_graceful_shutdown": int(os.environ.get("CHATSITE_WEB_GRACE_SECONDS", GRACE_SECONDS)),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m chatsite.edge.web_server", description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=os.environ.get("CHATSITE_WEB_SERVER", "daphne") or "daphne")
    ap.add_argument("--host", default=os.environ.get("CHATSITE_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("CHATSITE_PORT", "8000")))
    args = ap.parse_args(argv)
    if args.server not in SERVERS:
        ap.error(f"CHATSITE_WEB_SERVER (or --server) must be one of {', '.join(SERVERS)}, not {args.server!r}")
    if args.server == "daphne":
        os.execv(sys.executable, daphne_argv(args.host, args.port))
    import uvicorn

    uvicorn.run(APP, **uvicorn_options(args.host, args.port))


if __name__ == "__main__":
    main()
