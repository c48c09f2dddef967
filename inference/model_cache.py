"""A machine-wide cache of built model folders, shared by every checkout (like pip's cache).

Training the tiny demo models and converting the real one take minutes, and their output is a
pure function of the build's fingerprint. Every checkout on a machine (a CI clone, a second
worktree) would otherwise rebuild the same bytes: a build is saved here under its name and
fingerprint, and a checkout that lacks it copies it instead of building. A fresh machine still
builds everything once.

Where: $CHATSITE_MODEL_CACHE, else $XDG_CACHE_HOME/chatsite/models, else ~/.cache/chatsite/models;
CHATSITE_MODEL_CACHE=off turns it off. Entries are folders `<name>-<fingerprint[:16]>`, each
complete once renamed into place (a crash leaves only a `.tmp-*` folder). Entries are copies,
never hard links: a checkout's model folder may be rewritten in place without touching the cache.
Nothing evicts entries; `rm -rf` the folder to reclaim the space.

No Django: the build modules (inference.demo_models, inference.real_model) call it directly.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

MARKER = "build.json"  # the builds' completion marker; a cache entry without it is ignored


def cache_root() -> Path | None:
    """The cache folder, or None when CHATSITE_MODEL_CACHE=off."""
    configured = os.environ.get("CHATSITE_MODEL_CACHE", "")
    if configured.lower() in ("off", "0", "no", "false"):
        return None
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "chatsite" / "models"


def _entry(name: str, fingerprint: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / f"{name}-{fingerprint[:16]}"


def restore(name: str, fingerprint: str, tmp: Path) -> bool:
    """Copy the cached build `name`/`fingerprint` into `tmp` (replacing it); False on a miss.
    The caller renames `tmp` into place, as it does a fresh build."""
    entry = _entry(name, fingerprint)
    if entry is None or not (entry / MARKER).is_file():
        return False
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(entry, tmp)
    except OSError:  # removed meanwhile, or the disk is full: build instead
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


def save(name: str, fingerprint: str, built: Path) -> None:
    """Copy the complete build at `built` into the cache, unless it is there already.
    Best effort: a cache that cannot be written only costs the next checkout a build."""
    entry = _entry(name, fingerprint)
    if entry is None or (entry / MARKER).is_file():
        return
    tmp = entry.with_name(f".tmp-{entry.name}-{os.getpid()}")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(built, tmp)
        tmp.rename(entry)  # entries appear complete, or not at all
    except OSError:
        pass  # another checkout saved it first (rename onto a full folder fails), or no space
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def converters(*packages: str) -> dict[str, str | None]:
    """The installed versions of the packages a build's output depends on: part of its
    fingerprint, so that the machine's model cache, shared by checkouts with other
    environments, never hands one a checkpoint another version of them converted."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
