"""supervisord's configuration for some of the Procfile's processes (scripts/supervise.sh runs it).

honcho stopped every process when one exited: a crashed worker took the web down with it.
Under supervisord each process is a program of its own: when one exits the others keep serving
and it is started again (a worker loads its engine again and takes work). SIGTERM stops a
program (a worker drains its runs and stops its engine, the web closes); one still running after
STOP_SECONDS gets SIGKILL with its whole process group, its engine's processes included.

With --redis-port and --redis-dir a Redis of the stack's own comes first (and is stopped last):
run streams kept in an append-only file (appendfsync everysec), so a restart loses at most
about a second of entries.

    .venv/bin/python scripts/supervisord_conf.py --run-dir var/run --log-dir var/log/run web flagship > conf
"""
import argparse
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A worker's drain (CHATSITE_DRAIN_SECONDS, 30) and hand-back (10 s), then its engine's shutdown.
STOP_SECONDS = 60
_LEADING_ASSIGNMENTS = re.compile(r"^((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(.+)$")


def procfile(path: Path) -> dict[str, str]:
    """Process name -> its command line, as honcho reads a Procfile."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, command = line.split(":", 1)
            out[name.strip()] = command.strip()
    return out


def _escaped(text: str) -> str:
    return text.replace("%", "%%")  # supervisord expands %(name)s; Celery's `-n pool@%h` must pass through


def program(name: str, command: str, *, log_dir: Path) -> str:
    assignments, rest = _LEADING_ASSIGNMENTS.match(command).groups()
    # The shell expands the Procfile's variables, then becomes the process (exec), so that
    # supervisord's signals reach the process itself and not a shell in front of it.
    shell = f"{assignments}exec {rest}"
    return "\n".join([
        f"[program:{name}]",
        _escaped(f"command=/bin/sh -c {shlex.quote(shell)}"),
        _escaped(f"directory={ROOT}"),
        "autostart=true",
        "autorestart=true",
        "startsecs=3",
        "startretries=5",
        "stopsignal=TERM",
        f"stopwaitsecs={STOP_SECONDS}",
        "killasgroup=true",
        "redirect_stderr=true",
        _escaped(f"stdout_logfile={log_dir / (name + '.log')}"),
        "stdout_logfile_maxbytes=50MB",
        "stdout_logfile_backups=2",
    ])


def redis_program(*, port: int, data_dir: Path, log_dir: Path) -> str:
    """The stack's own Redis: its port on 127.0.0.1, AOF in `data_dir`. Started before the others
    (priority), stopped after them, so workers drain into it; SHUTDOWN on SIGTERM syncs the AOF."""
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
               "--appendfsync", "everysec", "--save", "", "--maxmemory-policy", "noeviction", "--dir", str(data_dir)]
    return "\n".join([
        "[program:redis]",
        _escaped("command=" + shlex.join(command)),
        "priority=1",
        "autorestart=true",
        "startsecs=1",
        "stopsignal=TERM",
        f"stopwaitsecs={STOP_SECONDS}",
        "redirect_stderr=true",
        _escaped(f"stdout_logfile={log_dir / 'redis.log'}"),
        "stdout_logfile_maxbytes=10MB",
        "stdout_logfile_backups=1",
    ])


def config(names: list[str], *, procfile_path: Path, run_dir: Path, log_dir: Path, redis: str = "") -> str:
    """The whole file: supervisord in the foreground, its own log (each start, exit and restart)
    on stdout, a control socket in `run_dir` for supervisorctl, and one program per name (after
    `redis`, the stack's own Redis's program, when given)."""
    processes = procfile(procfile_path)
    missing = [n for n in names if n not in processes]
    if missing:
        raise SystemExit(f"not in {procfile_path}: {', '.join(missing)} (it has {', '.join(processes)})")
    socket = run_dir / "supervisor.sock"
    head = "\n".join([
        "[supervisord]",
        "nodaemon=true",
        "logfile=/dev/stdout",
        "logfile_maxbytes=0",
        "loglevel=info",
        _escaped(f"pidfile={run_dir / 'supervisord.pid'}"),
        _escaped(f"childlogdir={log_dir}"),
        "",
        "[unix_http_server]",
        _escaped(f"file={socket}"),
        "chmod=0700",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        _escaped(f"serverurl=unix://{socket}"),
    ])
    programs = [program(n, processes[n], log_dir=log_dir) for n in names]
    return "\n\n".join([head, *([redis] if redis else []), *programs]) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="processes of the Procfile to run")
    parser.add_argument("--procfile", type=Path, default=ROOT / "Procfile")
    parser.add_argument("--run-dir", type=Path, required=True, help="where the control socket and pid file go")
    parser.add_argument("--log-dir", type=Path, required=True, help="where each process's output goes")
    parser.add_argument("--redis-port", type=int, help="run a Redis of the stack's own on this port")
    parser.add_argument("--redis-dir", type=Path, default=ROOT / "var" / "redis", help="its append-only file's folder")
    args = parser.parse_args(argv)
    log_dir = args.log_dir.resolve()
    redis = redis_program(port=args.redis_port, data_dir=args.redis_dir.resolve(), log_dir=log_dir) \
        if args.redis_port else ""
    sys.stdout.write(config(args.names, procfile_path=args.procfile, run_dir=args.run_dir.resolve(), log_dir=log_dir,
                            redis=redis))


if __name__ == "__main__":
    main(sys.argv[1:])
