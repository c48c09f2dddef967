"""What a test needs, as markers, so that a developer can leave the slow kinds out
(`make test-fast`, README's Tests). A marker comes from the fixtures a test uses (whatever
it names, its fixtures' fixtures count) or from the folder it lives in; a test may also
carry one itself (`slow`, `docker`, or one of these where no fixture says it)."""
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# fixture -> marker: a test that uses the fixture needs what the marker names.
BY_FIXTURE = {
    "stack_env": "live",  # the platform's own processes (daphne, Celery workers, beat), started by tests/stack.py
    "browser": "browser",
    "vllm_worker": "vllm",
    "_vllm_worker_launched": "vllm",
}
# folder under tests/ -> markers of every test in it (and in its subfolders).
BY_FOLDER = {
    "e2e": ("vllm",),
    "faults": ("faults", "live"),
    "faults/hosts": ("netns",),
    "scripts": ("slow",),  # scripts/setup.sh itself, run against databases of its own
}


def add_needs(items: list[pytest.Item]) -> None:
    """Add the markers BY_FIXTURE and BY_FOLDER say each collected test needs."""
    for item in items:
        names = set(item.fixturenames)
        needs = {mark for fixture, mark in BY_FIXTURE.items() if fixture in names}
        folder = Path(item.path).resolve().parent
        for sub, marks in BY_FOLDER.items():
            if folder == TESTS / sub or (TESTS / sub) in folder.parents:
                needs.update(marks)
        for mark in sorted(needs - {m.name for m in item.iter_markers()}):
            item.add_marker(mark)
        # `pytest -n 3 --dist loadgroup` (make test, tests/conftest.py runs this first): the real
        # engines start on one worker only, the others run the rest meanwhile; a module that starts
        # processes of its own for all its tests runs on one worker, which starts them once.
        if item.get_closest_marker("vllm"):
            item.add_marker(pytest.mark.xdist_group("vllm"))
        elif item.get_closest_marker("live") and _has_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _has_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture (for a live test: processes or rows its module shares)."""
    defs = getattr(item, "_fixtureinfo", None)
    return defs is not None and any(d.scope == "module" for ds in defs.name2fixturedefs.values() for d in ds)
