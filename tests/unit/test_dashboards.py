"""The Grafana dashboards in deploy/grafana: importable as they are, and every query parses.

Structure is checked here (a ``${datasource}`` Prometheus variable that every panel and query
uses, unique panel ids, panels inside Grafana's 24 columns and not overlapping, every query an
``expr``); the files must be what deploy/grafana/build_dashboards.py writes. To prove that every
expression parses, the template variables are replaced by concrete values and all queries (the
variables' ``label_values`` selectors too) are written into a rule file as recording rules, which
``promtool check rules`` must accept. Queries may use no Grafana macro but ``$__rate_interval`` and
``$__interval``, so the same substitution lets them run against a real Prometheus.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from test_monitoring_rules import NEEDS_PROMTOOL as _NEEDS_PROMTOOL
from test_monitoring_rules import OPERATOR_PREFIXES, exported_series_names

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = ("kuberay-operator.json", "raycluster.json")
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
# What each variable stands for when a query is checked or run outside Grafana.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "30s",
    "$job": "kuberay-operator",
    "$controller": "raycluster",
    "$namespace": "default",
    "$cluster": "raycluster-sample",
}
LABEL_VALUES = re.compile(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)")


def _dashboard(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAFANA / name).read_text())
    return data


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dash["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _variables(dash: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dash["templating"]["list"]}


def substitute(expr: str) -> str:
    """``expr`` with every template variable replaced (longest names first)."""
    for var in sorted(SUBSTITUTIONS, key=len, reverse=True):
        expr = expr.replace(var, SUBSTITUTIONS[var])
    return expr


def queries(name: str) -> list[tuple[str, str]]:
    """(where, PromQL) for every query of dashboard ``name``, variables substituted."""
    dash = _dashboard(name)
    out = []
    for panel in _panels(dash):
        for target in panel.get("targets", []):
            out.append((f"panel {panel['id']} {target['refId']}", substitute(target["expr"])))
    for var in _variables(dash).values():
        if var["type"] == "query":
            match = LABEL_VALUES.fullmatch(var["query"]["query"])
            assert match, f"variable {var['name']}: not a label_values() query"
            out.append((f"variable {var['name']}", substitute(match["selector"])))
    return out


# ------------------------------------------------------------------------------ structure


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_dashboards", GRAFANA / "build_dashboards.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_is_what_the_builder_writes(name: str) -> None:
    assert (GRAFANA / name).read_text() == _builder().render(name), (
        f"{name} is stale or was edited by hand; edit deploy/grafana/build_dashboards.py and run it"
    )


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_structure(name: str) -> None:
    dash = _dashboard(name)
    assert dash["schemaVersion"] >= 36
    assert dash["uid"]
    assert dash["title"]
    assert dash["id"] is None, "an exported id would clash on import"
    ds = _variables(dash)["datasource"]
    assert ds["type"] == "datasource"
    assert ds["query"] == "prometheus"
    panels = _panels(dash)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not mine & cells, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["title"]
        assert panel.get("description"), f"{panel['title']}: say what it shows"
        assert panel["datasource"] == DS_REF, panel["title"]
        targets = panel["targets"]
        assert targets, f"{panel['title']}: no query"
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in targets:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"] == DS_REF, panel["title"]
    for var in _variables(dash).values():
        if var["type"] == "query":
            assert var["datasource"] == DS_REF, var["name"]


def test_dashboards_show_what_the_issue_asks_for() -> None:
    exprs = " ".join(expr for name in DASHBOARDS for _, expr in queries(name))
    for series in (
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "rest_client_requests_total",
        "leader_election_master_status",
        "kuberay_cluster_info",
        "kuberay_cluster_condition_provisioned",
        "kuberay_cluster_provisioned_duration_seconds",
        "kuberay_job_deployment_status",
        "kuberay_service_condition_ready",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "ray_node_cpu_count",
        "ray_node_mem_used",
        "ray_gcs_storage_operation_latency_ms_bucket",
    ):
        assert series in exprs, series


def test_raycluster_dashboard_is_about_one_cluster() -> None:
    dash = _dashboard("raycluster.json")
    variables = _variables(dash)
    assert {"namespace", "cluster"} <= set(variables)
    assert "$namespace" in variables["cluster"]["query"]["query"]
    for panel in _panels(dash):
        for target in panel.get("targets", []):
            assert "$cluster" in target["expr"], f"{panel['title']}: not filtered by $cluster"
            assert "$namespace" in target["expr"], f"{panel['title']}: not filtered by $namespace"


@pytest.mark.parametrize("name", DASHBOARDS)
def test_queries_use_no_grafana_only_syntax(name: str) -> None:
    for where, expr in queries(name):
        assert "$" not in expr.replace('"$1"', ""), f"{name} {where}: unknown variable in {expr}"
        assert "[$" not in expr, where


@pytest.mark.parametrize("name", DASHBOARDS)
def test_queries_name_only_series_the_operator_exports(name: str) -> None:
    exported = exported_series_names()
    for where, expr in queries(name):
        plain = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
        used = {t for t in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", plain)}
        unknown = {t for t in used if t.startswith(OPERATOR_PREFIXES)} - exported
        assert not unknown, f"{name} {where} uses series the operator does not export: {unknown}"


# ------------------------------------------------------------------------------- promtool


# Typed here: to mypy, a sibling test module imported by its bare name is Any.
NEEDS_PROMTOOL: pytest.MarkDecorator = _NEEDS_PROMTOOL


@NEEDS_PROMTOOL
def test_every_query_parses(promtool: Path, tmp_path: Path) -> None:
    rules = []
    for name in DASHBOARDS:
        stem = re.sub(r"\W", "_", name.removesuffix(".json"))
        for i, (where, expr) in enumerate(queries(name)):
            rules.append(
                {"record": f"dashboard:{stem}:q{i}", "expr": expr, "labels": {"at": where}}
            )
    rule_file = tmp_path / "dashboard-queries.rules.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(rule_file)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


@NEEDS_PROMTOOL
def test_a_broken_query_is_caught(promtool: Path, tmp_path: Path) -> None:
    rule_file = tmp_path / "broken.rules.yaml"
    broken = {"record": "dashboard:broken", "expr": substitute("sum(rate(x[$__rate_interval])")}
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "b", "rules": [broken]}]}))
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(rule_file)], capture_output=True, text=True
    )
    assert proc.returncode != 0
