"""Each install signs with a secret of its own: setup (or the first start in
development) makes it under var/, mode 600, git-ignored; production settings
refuse to start without a real one."""
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.stack import ROOT

PRINT_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE")}
    env.update({"DJANGO_SETTINGS_MODULE": "chatsite.settings", **extra})
    return env


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_development_settings_make_the_key_once_and_keep_it(tmp_path):
    path = tmp_path / "var" / "secret_key"
    env = _env(DJANGO_SECRET_KEY_FILE=str(path))
    with ThreadPoolExecutor(6) as pool:  # six processes starting at once agree on one key
        outs = list(pool.map(lambda _: _python(PRINT_KEY, env), range(6)))
    keys = {out.stdout.strip() for out in outs}
    assert all(out.returncode == 0 for out in outs), [out.stderr[-500:] for out in outs]
    assert len(keys) == 1 and len(keys.pop()) >= 80
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _python(PRINT_KEY, env).stdout.strip() == path.read_text().strip()
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_the_setup_step_makes_it_only_once(tmp_path):
    path = tmp_path / "secret_key"
    first = subprocess.run([sys.executable, "-m", "chatsite.install_secret", str(path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    key = path.read_text()
    again = subprocess.run([sys.executable, "-m", "chatsite.install_secret", str(path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert "made this install's secret key" in first.stdout and again.stdout == ""
    assert path.read_text() == key and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_key_file_is_git_ignored():
    out = subprocess.run(["git", "check-ignore", "-q", "var/secret_key"], cwd=ROOT, timeout=30)
    assert out.returncode == 0


PRODUCTION = {"DJANGO_SETTINGS_MODULE": "chatsite.settings_production", "DJANGO_ALLOWED_HOSTS": "chat.example.com"}


@pytest.mark.parametrize("secret", [None, "dev-only-insecure-key-change-me", "django-insecure-" + "x" * 60,
                                    "a" * 80, "short"])
def test_production_refuses_to_start_without_a_real_secret(tmp_path, secret):
    env = _env(**PRODUCTION, DJANGO_SECRET_KEY_FILE=str(tmp_path / "absent"))
    if secret is not None:
        env["DJANGO_SECRET_KEY"] = secret
    out = _python(PRINT_KEY, env)
    assert out.returncode != 0 and "must hold a long random value in production" in out.stderr
    assert not (tmp_path / "absent").exists()  # production never makes one


def test_production_starts_with_a_key_file_made_beforehand(tmp_path):
    path = tmp_path / "secret_key"
    subprocess.run([sys.executable, "-m", "chatsite.install_secret", str(path)], cwd=ROOT, check=True, timeout=60)
    out = _python(PRINT_KEY, _env(**PRODUCTION, DJANGO_SECRET_KEY_FILE=str(path)))
    assert out.returncode == 0, out.stderr[-1000:]
    assert out.stdout.strip() == path.read_text().strip()
