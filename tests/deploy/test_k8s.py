"""The Kubernetes manifests (deploy/k8s/{base,cpu,gpu}, kustomize layout), parsed and checked:
selectors match labels, probes point at real paths and commands, workers drain within their
grace period, beat is one replica, every worker has a PodDisruptionBudget and an autoscaler on
what /metrics exposes, and CUDA workers ask for one GPU per tensor-parallel rank."""
import shutil
import subprocess

import pytest
import yaml

from chatsite.pools.management.commands.drain_worker import HAND_BACK_SECONDS
from tests.deploy.checks import check_expr, command_problems, procfile, process_of, url_exists
from tests.stack import ROOT

K8S = ROOT / "deploy" / "k8s"
GPU_POOLS = {"flagship", "large"}  # large: the tensor-parallel example docs/deploy.md has you create


def _load(directory) -> list[dict]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs = []
    for resource in kustomization["resources"]:
        path = (directory / resource).resolve()
        docs += _load(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


@pytest.fixture(scope="module", params=["cpu", "gpu"])
def variant(request):
    docs = _load(K8S / request.param)
    return request.param, docs


def of_kind(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def workers(docs):
    return {n: d for n, d in of_kind(docs, "Deployment").items()
            if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"}


def container(deployment) -> dict:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def env_of(deployment, docs) -> dict[str, str]:
    env = {}
    for source in container(deployment).get("envFrom", []):
        if "configMapRef" in source:
            env.update(of_kind(docs, "ConfigMap")[source["configMapRef"]["name"]]["data"])
    env.update({e["name"]: e["value"] for e in container(deployment).get("env", [])})
    return env


def test_every_manifest_file_is_in_a_kustomization():
    for directory in (K8S / "base", K8S / "cpu", K8S / "gpu", K8S / "prometheus-auth"):
        listed = set(yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"])
        files = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
        assert files == {r for r in listed if not r.startswith("..")}, directory.name


def test_selectors_match_the_labels_they_select(variant):
    _, docs = variant
    deployments = of_kind(docs, "Deployment")
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in deployments.values()]
    for name, d in deployments.items():
        assert d["spec"]["selector"]["matchLabels"].items() <= d["spec"]["template"]["metadata"]["labels"].items(), name
    for kind, selector in (("Service", lambda d: d["spec"]["selector"]),
                           ("PodDisruptionBudget", lambda d: d["spec"]["selector"]["matchLabels"])):
        for name, d in of_kind(docs, kind).items():
            matched = [labels for labels in pod_labels if selector(d).items() <= labels.items()]
            assert len(matched) == 1, f"{kind} {name} selects {len(matched)} Deployments"
    for name, scaled in of_kind(docs, "ScaledObject").items():
        assert scaled["spec"]["scaleTargetRef"]["name"] in deployments, name


def test_the_web_is_probed_on_healthz_with_an_allowed_host(variant):
    _, docs = variant
    web = of_kind(docs, "Deployment")["web"]
    c = container(web)
    assert process_of(c["command"], env_of(web, docs)) == "web"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    hosts = env_of(web, docs)["DJANGO_ALLOWED_HOSTS"].split(",")
    for probe in (c["readinessProbe"], c["livenessProbe"]):
        get = probe["httpGet"]
        assert url_exists(get["path"]) and get["path"] == "/healthz"
        assert get["port"] in ports
        assert {h["value"] for h in get["httpHeaders"] if h["name"] == "Host"} <= set(hosts)
    service = of_kind(docs, "Service")["web"]
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    assert web["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_beat_is_exactly_one_replica_that_nothing_scales(variant):
    _, docs = variant
    beat = of_kind(docs, "Deployment")["beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    assert process_of(container(beat)["command"], env_of(beat, docs)) == "beat"
    targets = {s["spec"]["scaleTargetRef"]["name"] for s in of_kind(docs, "ScaledObject").values()}
    targets |= {h["spec"]["scaleTargetRef"]["name"] for h in of_kind(docs, "HorizontalPodAutoscaler").values()}
    assert "beat" not in targets
    beat_labels = beat["spec"]["template"]["metadata"]["labels"]
    assert not [p for p in of_kind(docs, "PodDisruptionBudget").values()
                if p["spec"]["selector"]["matchLabels"].items() <= beat_labels.items()]


def test_workers_drain_in_prestop_within_their_grace_period_and_probe_their_heartbeat(variant):
    kind, docs = variant
    pools = {"flagship", "small"} if kind == "cpu" else GPU_POOLS
    found = set()
    for name, d in workers(docs).items():
        c, env = container(d), env_of(d, docs)
        argv = c["command"]
        pool = argv[argv.index("--model-pool") + 1]
        worker_name = argv[argv.index("-n") + 1]
        found.add(pool)
        assert name == f"worker-{pool}" and worker_name == f"{pool}@%h"
        if kind == "cpu":
            assert process_of(argv, env) == pool  # the Procfile's process for the pool
            assert set(procfile()[pool][0]) <= set(env)
        pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[1:] == ["manage.py", "drain_worker", "--worker", worker_name]
        ready = c["readinessProbe"]["exec"]["command"]
        assert ready[1:] == ["manage.py", "worker_health", "--worker", worker_name]
        live = c["livenessProbe"]["exec"]["command"]
        assert live[1:5] == ["manage.py", "worker_health", "--worker", worker_name] and "--live" in live
        for argv_ in (argv, pre_stop, ready, live):
            assert not command_problems(argv_, pools=frozenset(pools)), argv_
        drain = float(env["CHATSITE_DRAIN_SECONDS"])
        assert d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > drain + HAND_BACK_SECONDS + 10
        assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert found == pools


def test_every_worker_has_a_disruption_budget_and_an_autoscaler_on_metrics_that_exist(variant, exposed):
    _, docs = variant
    budgets = of_kind(docs, "PodDisruptionBudget")
    scaled = {s["spec"]["scaleTargetRef"]["name"]: s for s in of_kind(docs, "ScaledObject").values()}
    for name, d in workers(docs).items():
        pool = d["metadata"]["labels"]["chatsite.dev/pool"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert [b for b in budgets.values() if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
                and b["spec"].get("maxUnavailable") == 1], name
        spec = scaled[name]["spec"]
        assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        assert d["spec"]["replicas"] == spec["minReplicaCount"]
        queries = [t["metadata"]["query"] for t in spec["triggers"] if t["type"] == "prometheus"]
        assert f'max(chatsite_pool_recommended_replicas{{pool="{pool}"}})' in queries
        for query in queries:
            assert f'pool="{pool}"' in query and not check_expr(query, exposed), query


def test_cuda_workers_ask_for_one_gpu_per_tensor_parallel_rank(variant):
    kind, docs = variant
    for name, d in workers(docs).items():
        resources = container(d)["resources"]
        if kind == "cpu":
            assert container(d)["image"].startswith("chatsite-cpu:")
            assert "nvidia.com/gpu" not in {**resources["requests"], **resources["limits"]}, name
            continue
        assert container(d)["image"].startswith("chatsite-cuda:")
        tp = int(d["metadata"]["annotations"]["chatsite.dev/tensor-parallel-size"])
        assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == str(tp), name
        assert not [e for e in container(d).get("env", []) if e["name"].startswith("VLLM_CPU_")], name
        shm = next(v for v in d["spec"]["template"]["spec"]["volumes"] if v["name"] == "shm")
        assert shm["emptyDir"]["medium"] == "Memory"
    if kind == "gpu":
        sizes = {d["metadata"]["annotations"]["chatsite.dev/tensor-parallel-size"] for d in workers(docs).values()}
        assert "2" in sizes  # the tensor-parallel example


def test_pods_run_as_a_user_and_read_what_exists(variant):
    _, docs = variant
    claims = set(of_kind(docs, "PersistentVolumeClaim"))
    templates = [d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "Job")]
    deploy_doc = (ROOT / "docs" / "deploy.md").read_text()
    for t in templates:
        spec = t["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
        for v in spec.get("volumes", []):
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims
        for c in spec["containers"]:
            assert c["image"].split(":")[0] in ("chatsite-web", "chatsite-cpu", "chatsite-cuda")
            assert not command_problems(c["command"], pools=frozenset({"flagship", "small"} | GPU_POOLS))
            for source in c.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in of_kind(docs, "ConfigMap")
                else:  # secrets are created by hand, as the docs say
                    assert f"create secret generic {source['secretRef']['name']}" in deploy_doc


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl (for its built-in kustomize) is not installed")
@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_kustomize_renders_the_same_objects(kind):
    done = subprocess.run(["kubectl", "kustomize", str(K8S / kind)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rendered = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(done.stdout) if d}
    assert rendered == {(d["kind"], d["metadata"]["name"]) for d in _load(K8S / kind)}
