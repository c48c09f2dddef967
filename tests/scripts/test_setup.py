"""scripts/setup.sh --dev, the setup `make test` runs, leaves the product's database alone
(issue 44 item 13): a clean clone's `make test` beside a `make run` stack had migrated and
seeded that stack's database, pointing its pools at the clone's model folders."""
import os
import subprocess

import pytest
from django.conf import settings
from django.db import connection

from tests.stack import ROOT

OTHER_CHECKOUT = "/srv/other-checkout/var/models"


def _psql(sql: str, db: str = "postgres") -> str:
    return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", sql, db], check=True,
                          capture_output=True, text=True).stdout


def _dump(db: str) -> str:
    """Schema and rows of `db` (pg_dump's random \\restrict key aside)."""
    out = subprocess.run(["pg_dump", "-h", "127.0.0.1", "-U", "postgres", db], check=True, capture_output=True,
                         text=True).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith(("\\restrict", "\\unrestrict")))


def _run(env: dict, *cmd: str) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture
def product(django_db_blocker):
    """A product database as another checkout's `make run` left it: migrated, seeded, its pools
    pointing at that checkout's models, its quantized pool serving (its gate passed there)."""
    with django_db_blocker.unblock():
        name = f"{connection.settings_dict['NAME']}_product"  # the session's own: concurrent sessions never share it
    _psql(f'drop database if exists "{name}"')
    _psql(f'create database "{name}"')
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_TEST_NAME")}
    env.update(DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{name}", REDIS_URL=settings.REDIS_URL,
               CELERY_BROKER_URL=settings.REDIS_URL)
    try:
        _run(env, ".venv/bin/python", "manage.py", "migrate", "--noinput", "-v", "0")
        _run(env, ".venv/bin/python", "manage.py", "seed_demo")
        models = str(settings.CHATSITE["DEMO_MODELS_DIR"])
        _psql(f"update pools_modelpool set model = replace(model, '{models}', '{OTHER_CHECKOUT}'), enabled = true",
              name)
        yield name, env
    finally:
        _psql(f'drop database if exists "{name}" with (force)')


def test_the_test_setup_leaves_the_product_database_alone(product):
    name, env = product
    before = _dump(name)
    _run(env, "bash", "scripts/setup.sh", "--dev")
    assert _psql("select name, model, enabled from pools_modelpool order by name", name).split() == [
        f"flagship|{OTHER_CHECKOUT}/smollm2-135m-instruct|t", f"small|{OTHER_CHECKOUT}/smollm2-135m-instruct-w8a8|t"]
    assert _dump(name) == before


def test_the_development_setup_asked_for_the_product_database_still_sets_it_up(product):
    """`make setup` and scripts/gpu_host.sh ask for it (--product-db): migrated and seeded from here."""
    name, env = product
    _run(env, "bash", "scripts/setup.sh", "--dev", "--product-db")
    models = settings.CHATSITE["DEMO_MODELS_DIR"]
    assert _psql("select name, model from pools_modelpool order by name", name).split() == [
        f"flagship|{models}/smollm2-135m-instruct", f"small|{models}/smollm2-135m-instruct-w8a8"]
