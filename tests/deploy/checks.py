"""What the compose, Kubernetes and observability tests check alike: that a container's
command is a process the repository really runs (the Procfile's), that what it names
exists, and that a PromQL expression uses only metrics and labels /metrics exposes."""
import re
import shlex

from django.core.management import get_commands
from django.urls import Resolver404, resolve

from chatsite.pools.demo import DEMO_POOLS
from tests.stack import ROOT

# Exposed by another branch (a Redis persistence gauge): allowed to be missing until it lands, and only it.
NOT_YET_EXPOSED = {"chatsite_redis_persistent"}
METRIC = re.compile(r"\bchatsite_[a-z0-9_]+\b")
SELECTOR = re.compile(r"\b(chatsite_[a-z0-9_]+)\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def procfile() -> dict[str, tuple[dict[str, str], list[str]]]:
    """Process name -> (the environment it sets, its argv)."""
    out = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, command = line.split(":", 1)
        words = shlex.split(command)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        out[name.strip()] = (env, words)
    return out


def expand(text: str, env: dict[str, str]) -> str:
    """Shell / compose variable references in `text`, from `env` (a default when unset)."""
    def one(m):
        name, op, arg = m.group(1) or m.group(4), m.group(2), m.group(3)
        if name in env and not (op == ":-" and env[name] == ""):
            return str(env[name])
        if op in (":-", "-"):
            return arg
        raise KeyError(f"${name} is not set" + (f": {arg}" if arg else ""))
    return _VAR.sub(one, text.replace("$$", "\0")).replace("\0", "$")


def process_of(argv: list[str], env: dict[str, str]) -> str | None:
    """The Procfile process `argv` runs (with the container's `env`), or None."""
    for name, (_, words) in procfile().items():
        try:
            if [expand(w, env) for w in words] == list(argv):
                return name
        except KeyError:
            continue
    return None


def manage_commands(text: str) -> list[str]:
    return re.findall(r"manage\.py\s+([a-z_]+)", text)


def command_problems(argv: list[str], pools=frozenset(DEMO_POOLS)) -> list[str]:
    """What `argv` (or a shell line in it) names that the repository does not have;
    a worker must serve one of `pools`."""
    problems, text = [], " ".join(argv)
    commands = get_commands()
    for name in manage_commands(text):
        if name not in commands:
            problems.append(f"manage.py has no command {name!r}")
    for path in re.findall(r"(?<![\w/])((?:manage\.py|Procfile|deploy/[\w./-]+|scripts/[\w./-]+))", text):
        if not (ROOT / path).exists():
            problems.append(f"{path} is not in the repository")
    if "--model-pool" in argv:
        pool = argv[argv.index("--model-pool") + 1]
        if pool not in pools:
            problems.append(f"pool {pool!r} is not one of {sorted(pools)}")
        if "-n" in argv and not argv[argv.index("-n") + 1].startswith(f"{pool}@"):
            problems.append("the worker's name does not start with its pool's")
    for module in re.findall(r"\b(chatsite\.[\w.]+):application", text):
        if not (ROOT / (module.replace(".", "/") + ".py")).exists():
            problems.append(f"{module} is not a module of the repository")
    return problems


def url_exists(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def _labels_used(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    per_metric = {}
    for name, inner in SELECTOR.findall(expr):
        per_metric.setdefault(name, set()).update(MATCHER.findall(inner))
    grouped = {label.strip() for group in GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    return per_metric, grouped


def check_expr(expr: str, exposed: dict[str, set[str]]) -> list[str]:
    problems = []
    names = set(METRIC.findall(expr))
    for name in sorted(names - set(exposed) - NOT_YET_EXPOSED):
        problems.append(f"{name} is not on /metrics")
    per_metric, grouped = _labels_used(expr)
    for name in sorted(names & set(exposed)):
        if not exposed[name] and (per_metric.get(name) or grouped):
            problems.append(f"{name} has no sample in the render to check its labels against")
    for name, labels in per_metric.items():
        if name in exposed and exposed[name] and labels - exposed[name]:
            problems.append(f"{name} has no label {sorted(labels - exposed[name])}")
    known = set().union(*(exposed.get(n, set()) for n in names)) | {"le"}
    if grouped - known and not names & NOT_YET_EXPOSED:
        problems.append(f"grouping by {sorted(grouped - known)}, which none of {sorted(names)} has")
    return problems
