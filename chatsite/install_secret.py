"""This install's SECRET_KEY, kept in a file of its own (var/secret_key by default).

`scripts/setup.sh` makes it on first run; development settings make it on first
use when setup did not run. Production settings never make one: they refuse to
start without a real key (DJANGO_SECRET_KEY, or this file made beforehand).
Imported by the settings, so it uses nothing but the standard library.
"""
import os
import secrets
from pathlib import Path

MIN_CHARS = 50
MIN_UNIQUE_CHARS = 5
INSECURE_PREFIXES = ("dev-only", "django-insecure-", "change-me")


def is_real_secret(value: str | None) -> bool:
    """Long and random enough to sign with (Django's own check --deploy rule, and not a known default)."""
    return bool(value) and len(value) >= MIN_CHARS and len(set(value)) >= MIN_UNIQUE_CHARS \
        and not value.startswith(INSECURE_PREFIXES)


def create_secret_key(path: Path) -> bool:
    """Write a new random key to `path` (mode 600) unless it exists; True if this call made it.

    Safe when several processes start at once: the file is created exclusively,
    written in full under a temporary name first, then linked into place."""
    path = Path(path)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(64) + "\n")
    try:
        os.link(tmp, path)  # fails if another process got there first; theirs wins
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def read_secret_key(path: Path, *, create: bool) -> str:
    """The key in `path`; made first when missing and `create`; "" when there is none."""
    path = Path(path)
    if create and not path.exists():
        try:
            create_secret_key(path)
        except OSError as exc:
            raise RuntimeError(f"no SECRET_KEY: set DJANGO_SECRET_KEY, or run scripts/setup.sh to make {path} "
                               f"(could not make it here: {exc})") from None
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


if __name__ == "__main__":  # scripts/setup.sh: python -m chatsite.install_secret PATH
    import sys

    target = Path(sys.argv[1])
    if create_secret_key(target):
        print(f"==> made this install's secret key ({target}, mode 600, git-ignored)")
