"""The fault suite's stack on five hosts of its own, so that one host can be cut off.

Each host is a network namespace made by the tests (see netns.py); all of them hang
off one bridge in the root namespace, where this pytest process is the client:

    root (pytest, 10.231.N.1) ---bridge--- svc   .2 Redis (AOF, fsync always), beat
                                       |         .3 Postgres (initdb'd for the module)
                                       +-- web0 .10, web1 .11   one daphne each, port 8000
                                       +-- wk0  .20, wk1  .21   one fake-engine worker each

Postgres has an address of its own so that a worker can lose Postgres alone
(`Topology.blackhole`) while it still reaches Redis. This process's ORM is pointed
at that Postgres for the module (a copy of the session's test database), so what the
tests read and write is what the hosts see. Without `ip netns` (not root, no
kernel support) every test here is skipped with the reason.

Nothing leaves the machine: the namespaces have no route but their /24. Every name
carries this process's pid; the module's end (or the next session, if this one
died) deletes the namespaces, the veths and the bridge, after killing whatever of
ours still runs inside them.
"""
import os
import subprocess

import pytest
import redis
from django.db import connection

from bench.services import PG_BIN, PrivatePostgres, PrivateRedis
from tests import stack
from tests.factories import PoolFactory
from tests.faults.conftest import POOL
from tests.faults.hosts import matrix
from tests.faults.hosts.netns import NetnsUnavailable, Topology

LAYOUT = {"svc": [2, 3], "web0": [10], "web1": [11], "wk0": [20], "wk1": [21]}
WORKERS = {"ha": "wk0", "hb": "wk1"}  # worker name -> its host
WEB_PORT, REDIS_PORT, PG_PORT = 8000, 6379, 5432


@pytest.fixture(scope="module")
def topology():
    try:
        topo = Topology.create(LAYOUT)
    except (NetnsUnavailable, FileNotFoundError) as exc:
        pytest.skip(f"network namespaces are unavailable here: {exc}")
    yield topo
    topo.destroy()  # and anything of ours a failed test left running inside


@pytest.fixture(scope="module")
def host_services(topology):
    svc = topology["svc"]
    redis_server = PrivateRedis(appendfsync="always", host=svc.addrs[0], port=REDIS_PORT, netns=svc.ns)
    try:
        pg = PrivatePostgres(host=svc.addrs[1], port=PG_PORT, netns=svc.ns, trust_cidr=topology.cidr)
    except Exception:
        redis_server.stop()
        raise
    yield redis_server, pg
    pg.stop()
    redis_server.stop()


@pytest.fixture(scope="module", autouse=True)
def hosts_db(django_db_setup, django_db_blocker, host_services):
    """This process's ORM on the hosts' Postgres, holding a copy of the test database."""
    _, pg = host_services
    with django_db_blocker.unblock():
        db = connection.settings_dict
        source = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"]]
        target = ["-h", pg.host, "-p", str(pg.port), "-U", "postgres"]
        subprocess.run([str(PG_BIN / "createdb"), *target, db["NAME"]], check=True, capture_output=True, timeout=60)
        dump = subprocess.run([str(PG_BIN / "pg_dump"), *source, "--no-owner", "--no-privileges", db["NAME"]],
                              check=True, capture_output=True, timeout=120,
                              env={**os.environ, "PGPASSWORD": db.get("PASSWORD") or ""})
        subprocess.run([str(PG_BIN / "psql"), *target, "-q", "-v", "ON_ERROR_STOP=1", "-d", db["NAME"]],
                       input=dump.stdout, check=True, capture_output=True, timeout=120)
        saved = {"HOST": db["HOST"], "PORT": db["PORT"], "USER": db["USER"]}
        connection.close()
        db.update(HOST=pg.host, PORT=str(pg.port), USER="postgres")
    yield dict(db)
    with django_db_blocker.unblock():
        connection.close()
        db.update(saved)


@pytest.fixture(scope="module")
def hosts_env(hosts_db, host_services, topology, django_db_blocker):
    redis_server, _ = host_services
    with django_db_blocker.unblock():
        PoolFactory(name=POOL, max_output_tokens=2000, context_length=4096)
    webs = ",".join(topology[role].addr for role in ("web0", "web1"))
    return stack.process_env(hosts_db, redis_server.url, CHATSITE_ENGINE="fake", CHATSITE_FAKE_STEP_SECONDS="0.01",
                             CHATSITE_DRAIN_SECONDS="1", DJANGO_ALLOWED_HOSTS=f"localhost,127.0.0.1,{webs}")


@pytest.fixture(scope="module")
def hosts_stack(topology, hosts_env):
    """Launched together from this thread (they boot side by side), then waited for in turn;
    no pool of threads: a child gets SIGTERM when the thread that started it ends
    (PR_SET_PDEATHSIG)."""
    web_procs = [stack.launch_web(hosts_env, host=topology[role].addr, port=WEB_PORT, netns=topology[role].ns,
                                  name=f"hosts-{role}") for role in ("web0", "web1")]
    workers = {name: stack.launch_worker(hosts_env, pool=POOL, name=name, netns=topology[role].ns)
               for name, role in WORKERS.items()}
    beat = stack.launch_beat(hosts_env, sweep_seconds=1.0, netns=topology["svc"].ns)
    procs = [*web_procs, *workers.values(), beat]
    stack.started_together(procs, [stack.wait_for_web] * len(web_procs) + [stack.wait_for_worker] * len(workers)
                           + [stack.wait_for_beat])
    webs = [proc.url for proc in web_procs]
    state = {"webs": webs, "workers": workers, "env": hosts_env, "topology": topology}
    yield state
    for proc in [*procs, *state["workers"].values()]:
        proc.stop(timeout=10)


@pytest.fixture
def hosts_redis(host_services):
    return redis.Redis.from_url(host_services[0].url, decode_responses=True)


@pytest.fixture(scope="module")
def fault_matrix():
    """The rows this module measured, written to matrix.OUT at its end (var/fault_matrix.md,
    or the file FAULT_MATRIX_OUT names)."""
    rows: list[matrix.Row] = []
    yield rows
    if rows:
        matrix.write(rows)
        print("\n" + matrix.table(rows))


def pytest_terminal_summary(terminalreporter):
    if matrix.LAST:
        terminalreporter.write_sep("=", f"fault matrix across hosts ({matrix.OUT})")
        terminalreporter.write_line(matrix.table(matrix.LAST))
