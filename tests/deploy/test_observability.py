"""The Grafana dashboard and the Prometheus alert rules use only what /metrics exposes."""
import json
import re
import shutil
import subprocess

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from chatsite.metrics.counters import count_refusal, count_shed, count_unavailable, observe_latency
from tests.factories import ChatFactory
from tests.heartbeat import beat
from tests.stack import ROOT

OBS = ROOT / "deploy" / "observability"
# Exposed by another branch (a Redis persistence gauge): allowed to be missing until it lands, and only it.
NOT_YET_EXPOSED = {"chatsite_redis_persistent"}
METRIC = re.compile(r"\bchatsite_[a-z0-9_]+\b")
SELECTOR = re.compile(r"\b(chatsite_[a-z0-9_]+)\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def dashboard() -> dict:
    return json.loads((OBS / "grafana-dashboard.json").read_text())


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]


def alert_rules() -> dict[str, dict]:
    groups = yaml.safe_load((OBS / "alerts.yml").read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"]}


@pytest.fixture
def exposed(db, chat) -> dict[str, set[str]]:
    """Sample name -> label names, from /metrics rendered with a worker, a queued run and latencies."""
    from chatsite.runs.services import run_submit

    beat("obs-1@host", chat.pool.name, kv_cache_usage=0.5, tokens_per_second=12.0)
    beat("obs-2@host", chat.pool.name, draining=True)
    run_submit(chat=ChatFactory(tenant=chat.tenant, owner=chat.owner, pool=chat.pool), content="hi")
    observe_latency("ttft", chat.pool.name, 120)
    observe_latency("itl", chat.pool.name, 15)
    count_unavailable(chat.pool.name)
    count_shed(chat.pool.name)
    count_refusal("budget")
    type(chat.pool).objects.filter(pk=chat.pool.pk).update(recommended_replicas=2)
    text = Client().get("/metrics").content.decode()
    samples: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):  # also proves the text format parses
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):  # families with no sample yet
        for suffix in (("_bucket", "_sum", "_count") if kind == "histogram" else ("",)):
            samples.setdefault(name + suffix, set())
    return samples


def _labels_used(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    per_metric = {}
    for name, inner in SELECTOR.findall(expr):
        per_metric.setdefault(name, set()).update(MATCHER.findall(inner))
    grouped = {label.strip() for group in GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    return per_metric, grouped


def _check_expr(expr: str, exposed: dict[str, set[str]]) -> list[str]:
    problems = []
    names = set(METRIC.findall(expr))
    for name in sorted(names - set(exposed) - NOT_YET_EXPOSED):
        problems.append(f"{name} is not on /metrics")
    per_metric, grouped = _labels_used(expr)
    for name in sorted(names & set(exposed)):
        if not exposed[name] and (per_metric.get(name) or grouped):
            problems.append(f"{name} has no sample in the render to check its labels against")
    for name, labels in per_metric.items():
        if name in exposed and exposed[name] and labels - exposed[name]:
            problems.append(f"{name} has no label {sorted(labels - exposed[name])}")
    known = set().union(*(exposed.get(n, set()) for n in names)) | {"le"}
    if grouped - known and not names & NOT_YET_EXPOSED:
        problems.append(f"grouping by {sorted(grouped - known)}, which none of {sorted(names)} has")
    return problems


def test_every_dashboard_query_uses_metrics_and_labels_metrics_exposes(exposed):
    problems = {e: p for e in dashboard_exprs() if (p := _check_expr(e, exposed))}
    assert not problems, problems


def test_every_alert_uses_metrics_and_labels_metrics_exposes(exposed):
    problems = {name: p for name, rule in alert_rules().items() if (p := _check_expr(rule["expr"], exposed))}
    assert not problems, problems


def test_only_the_redis_gauge_from_the_other_branch_may_be_missing(exposed):
    used = {n for e in dashboard_exprs() + [r["expr"] for r in alert_rules().values()] for n in METRIC.findall(e)}
    assert used - set(exposed) <= NOT_YET_EXPOSED
    assert NOT_YET_EXPOSED <= used  # the allowance is for a name the rules really use


def test_the_checker_catches_a_typo_and_a_wrong_label(exposed):
    assert _check_expr("chatsite_queue_depht", exposed) == ["chatsite_queue_depht is not on /metrics"]
    assert _check_expr('chatsite_queue_depth{tenant="a"}', exposed) == ["chatsite_queue_depth has no label ['tenant']"]
    assert _check_expr("sum by (tier) (chatsite_worker_running)", exposed) == [
        "grouping by ['tier'], which none of ['chatsite_worker_running'] has"]


def test_the_dashboard_shows_what_an_operator_watches():
    exprs = dashboard_exprs()
    wanted = {  # what the issue asks for -> a query that shows it
        "TTFT p95 per pool": r"histogram_quantile\(0\.95, sum by \(pool, le\) \(rate\(chatsite_ttft_seconds_bucket",
        "ITL p95 per pool": r"histogram_quantile\(0\.95, sum by \(pool, le\) \(rate\(chatsite_itl_seconds_bucket",
        "queue depth per tier": r"sum by \(pool, tier\) \(chatsite_queue_depth",
        "KV use": r"chatsite_worker_kv_cache_usage", "tokens/s": r"chatsite_worker_tokens_per_second",
        "refusals": r"rate\(chatsite_refusals_total", "shed": r"rate\(chatsite_shed_total",
        "workers up": r"chatsite_pool_live_workers", "workers draining": r"chatsite_pool_draining_workers",
    }
    missing = [what for what, pattern in wanted.items() if not any(re.search(pattern, e) for e in exprs)]
    assert not missing
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert METRIC.search(variables["pool"]["query"]["query"])


def test_the_alerts_the_issue_asks_for_exist():
    rules = alert_rules()
    assert "chatsite_pool_ttft_slo_seconds" in rules["ChatsiteTTFTOverSLO"]["expr"]
    assert "chatsite_queue_oldest_seconds" in rules["ChatsiteQueueWaitHigh"]["expr"]
    assert "chatsite_pool_live_workers == 0" in rules["ChatsitePoolNoLiveWorker"]["expr"]
    assert "chatsite_redis_persistent == 0" in rules["ChatsiteRedisNotPersistent"]["expr"]
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"], name


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus) is not installed")
def test_promtool_checks_the_rules_and_their_unit_tests_fire_as_expected():
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        done = subprocess.run(["promtool", *args], cwd=OBS, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
