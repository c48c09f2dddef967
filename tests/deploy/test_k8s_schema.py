"""deploy/k8s against the schemas a cluster checks them with, offline: every object of every
manifest file and of every overlay as kustomize renders it (cpu, gpu, each with the
prometheus-auth component) against Kubernetes' own (kubernetes-validate, strict: an unknown
field is an error, as `kubectl apply` makes it), and the KEDA objects against KEDA's CRDs
(tests/deploy/keda, copied from a KEDA release). The GPU overlay, rendered, asks for GPUs."""
import copy
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.stack import ROOT

K8S = ROOT / "deploy" / "k8s"
KEDA = Path(__file__).parent / "keda"
# The oldest Kubernetes KEDA 2.16+ supports, and the newest the schemas know.
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
OVERLAYS = {"cpu": ["cpu"], "gpu": ["gpu"], "cpu+prometheus-auth": ["cpu", "prometheus-auth"],
            "gpu+prometheus-auth": ["gpu", "prometheus-auth"]}
KUBECTL = shutil.which("kubectl")


def _closed(schema):
    """A CRD schema as the API server applies it to a request with strict field validation:
    fields the schema does not name are errors (unless it preserves unknown fields)."""
    if isinstance(schema, dict):
        schema = {k: _closed(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@cache
def _crd_validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    out = {}
    for path in KEDA.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            out[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(
                _closed(version["schema"]["openAPIV3Schema"]))
    return out


def problems(doc: dict) -> list[str]:
    """Why the API server (with KEDA's CRDs installed) would refuse `doc`; [] when it would not."""
    name = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
    crd = _crd_validators().get((doc.get("apiVersion"), doc.get("kind")))
    if crd is not None:
        return [f"{name}: {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in crd.iter_errors(doc)]
    out = []
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
            out.append(f"{name} (Kubernetes {version}): {exc}")
    return out


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_file_validates(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs
    assert not [p for d in docs for p in problems(d)]


@cache
def render(overlay: str, tmp: Path) -> tuple[dict, ...]:
    """`kubectl kustomize` of an overlay that lists deploy/k8s's parts (its own `namespace`, as a
    deployment's overlay sets it)."""
    base, *components = OVERLAYS[overlay]
    folder = tmp / overlay
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "chatsite",
        "resources": [os.path.relpath(K8S / base, folder)],
        "components": [os.path.relpath(K8S / c, folder) for c in components]}))
    done = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if not KUBECTL:
        pytest.skip("kubectl is not installed: its built-in kustomize renders the overlays")
    tmp = tmp_path_factory.mktemp("overlays")
    return lambda overlay: render(overlay, tmp)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_every_object_validates(rendered, overlay):
    docs = rendered(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ScaledObject", "PodDisruptionBudget", "Job", "Service"} <= kinds
    assert not [p for d in docs for p in problems(d)]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"chatsite"}
    if "prometheus-auth" in overlay:
        (auth,) = [d for d in docs if d["kind"] == "TriggerAuthentication"]
        for scaled in (d for d in docs if d["kind"] == "ScaledObject"):
            for trigger in scaled["spec"]["triggers"]:
                assert trigger["authenticationRef"] == {"name": auth["metadata"]["name"]}
                assert trigger["metadata"]["authModes"] == "bearer"


def test_the_rendered_gpu_overlay_gives_each_engine_its_gpus(rendered):
    """One GPU per tensor-parallel rank, requested and limited; GPU nodes only; no CPU engine settings."""
    workers = [d for d in rendered("gpu") if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("worker-")]
    assert len(workers) == 2
    for d in workers:
        pod = d["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        tp = d["metadata"]["annotations"]["chatsite.dev/tensor-parallel-size"]
        assert c["resources"]["requests"]["nvidia.com/gpu"] == c["resources"]["limits"]["nvidia.com/gpu"] == tp
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert not [e for e in c.get("env", []) if e["name"].startswith("VLLM_CPU_")]
        assert c["image"].startswith("chatsite-cuda:")
    assert {d["metadata"]["annotations"]["chatsite.dev/tensor-parallel-size"] for d in workers} == {"1", "2"}


def _first(kind: str) -> dict:
    for path in manifest_files():
        for d in yaml.safe_load_all(path.read_text()):
            if d and d["kind"] == kind:
                return copy.deepcopy(d)
    raise LookupError(kind)


@pytest.mark.parametrize("kind, mistake", [
    ("Deployment", lambda d: d["spec"].update(replica=2)),                      # a misspelt field
    ("Deployment", lambda d: d["spec"].update(replicas="two")),                  # a wrong type
    ("PodDisruptionBudget", lambda d: d["spec"].update(maxUnavailabe=1)),
    ("ScaledObject", lambda d: d["spec"].update(minReplicaCount="one")),
    ("ScaledObject", lambda d: d["spec"]["triggers"][0].pop("type")),            # a required field
    ("ScaledObject", lambda d: d["spec"].update(cooldown=600)),
    ("TriggerAuthentication", lambda d: d["spec"]["secretTargetRef"][0].pop("key")),
])
def test_a_mistake_is_caught(kind, mistake):
    doc = _first(kind)
    assert not problems(doc)
    mistake(doc)
    assert problems(doc)
