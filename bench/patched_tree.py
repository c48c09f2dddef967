"""A scratch copy of this checkout's tracked files (as they are on disk) with a
patch applied, to measure a proposed change without touching the checkout."""
import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench import common


def patched_copy(patch: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=common.ROOT, capture_output=True, check=True).stdout
    dest = Path(tempfile.mkdtemp(prefix="bench_tree_"))
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    for name in filter(None, files.decode().split("\0")):
        src = common.ROOT / name
        if src.is_file() and not name.startswith(("var/", "bench/")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for src in (common.ROOT / "chatsite", common.ROOT / "workers", common.ROOT / "inference"):
        for path in src.rglob("*.py"):  # new modules others have not committed yet
            target = dest / path.relative_to(common.ROOT)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    patch = str(Path(patch).resolve())
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", patch], cwd=dest, capture_output=True)
    if dry.returncode != 0:
        reverse = subprocess.run(["patch", "-p1", "-R", "--dry-run", "-i", patch], cwd=dest, capture_output=True)
        if reverse.returncode == 0:
            print(f"note: {patch} is already in the code; the copy is unchanged", flush=True)
            return dest
        raise RuntimeError(f"{patch} does not apply to the current code:\n{dry.stdout.decode()}")
    subprocess.run(["patch", "-p1", "-i", patch], cwd=dest, check=True, capture_output=True)
    return dest
