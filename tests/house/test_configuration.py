"""docs/configuration.md lists every environment variable the code reads, and only those:
a setting added without its row, or a row left behind by a setting that went, fails here.
Read by the code means: an `os.environ` / `os.getenv` read in chatsite/, workers/, inference/
or manage.py, any string there that is a platform variable's name (CHATSITE_, DJANGO_,
DATABASE_, REDIS_: helpers such as settings.env_bool take the name), and a variable the
scripts/ and the Procfile read from their environment (`$NAME` or `${NAME:-default}`, not
one of their own locals)."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
PLATFORM = re.compile(r"^(CHATSITE|DJANGO|DATABASE|REDIS)_[A-Z0-9_]+$")
NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def _is_environ(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _python_reads(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and PLATFORM.match(node.value):
            names.add(node.value)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func  # os.environ.get / .setdefault / .pop, os.getenv
            if isinstance(func, ast.Attribute) and (
                    (func.attr in ("get", "setdefault", "pop") and _is_environ(func.value)) or func.attr == "getenv"):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant):
                names.add(node.slice.value)
    return {n for n in names if isinstance(n, str) and NAME.match(n)}


def _shell_reads(path: Path) -> set[str]:
    code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    used = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", code))
    # A local: assigned in the file, unless the assignment only defaults the environment's
    # value (NAME=${NAME:-...}); loop variables too.
    locals_ = set(re.findall(r"(?:^|[\s;(])([A-Z_][A-Z0-9_]*)=(?!\$\{\1[:?=+-])", code, re.M))
    locals_ |= set(re.findall(r"\bfor ([A-Z_][A-Z0-9_]*) in\b", code))
    return used - locals_


def code_reads() -> dict[str, list[str]]:
    """Every variable the code reads, with the files that read it."""
    files = [p for pkg in ("chatsite", "workers", "inference") for p in sorted((ROOT / pkg).rglob("*.py"))]
    reads: dict[str, list[str]] = {}
    for path in [*files, ROOT / "manage.py"]:
        for name in _python_reads(path):
            reads.setdefault(name, []).append(str(path.relative_to(ROOT)))
    for path in [*sorted((ROOT / "scripts").glob("*.sh")), ROOT / "Procfile"]:
        for name in _shell_reads(path):
            reads.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return reads


def documented() -> set[str]:
    """The names in the first column of the document's tables."""
    return set(re.findall(r"^\| `([A-Z_][A-Z0-9_]*)` \|", DOC.read_text(), re.M))


def test_every_variable_the_code_reads_has_a_row():
    missing = {name: where for name, where in code_reads().items() if name not in documented()}
    assert missing == {}, f"add these to {DOC.relative_to(ROOT)} (name, default, what it does)"


def test_every_platform_variable_with_a_row_is_read():
    stale = {name for name in documented() if PLATFORM.match(name)} - set(code_reads())
    assert stale == set(), "nothing reads these any more: remove their rows"


def test_the_reader_finds_reads_of_every_kind(tmp_path):
    """The scans themselves: an environ read, a helper given a platform name, a shell default
    and a plain shell read count; a script's own locals do not."""
    py = tmp_path / "m.py"
    py.write_text('import os\nA = os.environ.get("LOG_LEVEL")\nB = os.environ["HOME_DIR"]\n'
                  'C = env_bool("CHATSITE_X", False)\nos.environ["DJANGO_Y"] = "1"\n')
    assert _python_reads(py) == {"LOG_LEVEL", "HOME_DIR", "CHATSITE_X", "DJANGO_Y"}
    sh = tmp_path / "s.sh"
    sh.write_text('PY=${PYTHON:-python3}\nexport CPUS=${CPUS:-0}\nLOCAL=$(nproc)\necho "$LOCAL $PY $OUTSIDE"\n'
                  '# $COMMENTED\nfor POOL in a b; do echo $POOL; done\n')
    assert _shell_reads(sh) == {"PYTHON", "CPUS", "OUTSIDE"}
