"""The dependency rules of the house style: `inference/` imports neither Django nor
Celery nor Redis (nor the platform); `chatsite/` imports neither vLLM nor torch, not even
through another module, and of `workers/` only the Celery app; `workers/` is where the
two meet. Checked twice: every file's import statements, and what importing every
module of a package really loads (in a fresh interpreter)."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "inference": {"django", "celery", "kombu", "redis", "rest_framework", "channels", "chatsite", "workers"},
    "chatsite": {"vllm", "torch", "transformers", "workers"},
}
ALLOWED = {"chatsite": {"workers.app"}}  # `celery -A chatsite` finds the Celery app through chatsite/celery.py
LOADED_NEVER = {"inference": ["django", "celery", "redis"], "chatsite": ["vllm", "torch", "transformers"]}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports (top level or inside functions), with its line."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def breaks(module: str, package: str) -> bool:
    if module in ALLOWED.get(package, ()):
        return False
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN[package])


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_file_imports_what_its_layer_forbids(package):
    offences = [f"{path.relative_to(ROOT)}:{line} imports {module}"
                for path in sorted((ROOT / package).rglob("*.py"))
                for line, module in imports_of(path) if breaks(module, package)]
    assert offences == []


_LOAD_ALL = """
import importlib, json, os, pkgutil, sys
package = sys.argv[1]
if package == "chatsite":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings_test")
    import django
    django.setup()
skip = {"chatsite.edge.asgi", "chatsite.settings_production"}  # asgi checks a live Redis; production needs its env
for info in pkgutil.walk_packages([package], prefix=package + "."):
    if info.name not in skip and ".migrations." not in info.name:
        importlib.import_module(info.name)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.mark.parametrize("package", sorted(LOADED_NEVER))
def test_importing_every_module_of_a_package_loads_nothing_forbidden(package):
    out = subprocess.run([sys.executable, "-c", _LOAD_ALL, package], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert package in loaded
    assert sorted(loaded & set(LOADED_NEVER[package])) == []


def test_the_check_finds_what_it_is_meant_to(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\ndef f():\n    from django.conf import settings\n    import vllm.engine\n")
    found = [m for _, m in imports_of(bad)]
    assert breaks(found[1], "inference") and breaks(found[2], "chatsite")
    assert not breaks("djangox", "inference") and not breaks("workers.app", "chatsite")
    assert breaks("workers.generation", "chatsite")


# The apps of chatsite/, lowest first: each imports only apps before it (and chatsite's own
# root modules), so no circle can form (docs/architecture.md, "Processes").
APP_ORDER = ["tenancy", "pools", "quotas", "chats", "runs", "usage", "metrics", "edge", "openai_api", "api", "web"]


def _chatsite_apps_imported(path: Path) -> set[tuple[int, str]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "chatsite" else [f"chatsite.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "chatsite" and len(parts) > 1 and parts[1] in APP_ORDER:
                found.add((node.lineno, parts[1]))
    return found


def test_the_apps_import_downwards_only():
    packages = sorted(p.name for p in (ROOT / "chatsite").iterdir() if p.is_dir() and any(p.glob("*.py")))
    assert sorted(APP_ORDER) == packages, "a package was added to chatsite/ or removed: place it in APP_ORDER"
    upward = []
    for app in APP_ORDER:
        for path in sorted((ROOT / "chatsite" / app).rglob("*.py")):
            for line, other in _chatsite_apps_imported(path):
                if APP_ORDER.index(other) > APP_ORDER.index(app):
                    upward.append(f"{path.relative_to(ROOT)}:{line} imports chatsite.{other}")
    assert not upward, "imports that go up the apps' order:\n" + "\n".join(upward)
