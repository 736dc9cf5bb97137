"""The alert rules in deploy/prometheus: valid for Prometheus, tested by promtool, in sync.

kuberay-alerts.rules.yaml is the source; prometheusrule.yaml is generated from it by
deploy/prometheus/render_prometheusrule.py and must carry the same groups. promtool (built on
demand from controlplane/prometheus, like the other pinned binaries) checks the rules and runs the
unit tests in deploy/prometheus/tests, which must show every alert both firing and staying quiet.
Rules may only name operator series the operator really exports.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kuberay.controllers.crd_metrics import RayClusterMetrics, RayJobMetrics, RayServiceMetrics
from kuberay.runtime.metrics import RuntimeMetrics

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
RULES = PROM / "kuberay-alerts.rules.yaml"
MANIFEST = PROM / "prometheusrule.yaml"
UNIT_TESTS = PROM / "tests" / "kuberay-alerts.test.yaml"
SEVERITIES = {"critical", "warning", "info"}
# Series prefixes the operator owns: a name with one of these must be one it exports.
OPERATOR_PREFIXES = (
    "controller_runtime_",
    "workqueue_",
    "rest_client_",
    "leader_election_",
    "process_",
    "kuberay_",
)


# The first test to ask for promtool may build it from source (about 10 minutes on 2 cores).
NEEDS_PROMTOOL = pytest.mark.timeout(3600)


def _run(cmd: list[str], cwd: Path = ROOT) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{out}"
    return out


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _alerts() -> list[dict[str, Any]]:
    return [rule for group in _load(RULES)["groups"] for rule in group["rules"]]


def exported_series_names() -> set[str]:
    """Every series name the operator can serve on /metrics (suffixes included)."""
    collectors: list[Any] = [
        RuntimeMetrics().registry,
        RayClusterMetrics(),
        RayJobMetrics(),
        RayServiceMetrics(),
    ]
    names: set[str] = set()
    for collector in collectors:
        for family in collector.collect():
            if family.type == "counter":
                names.add(f"{family.name}_total")
            elif family.type == "histogram":
                names.update(f"{family.name}{s}" for s in ("_bucket", "_count", "_sum"))
            else:
                names.add(family.name)
    return names


def operator_series_in(expr: str) -> set[str]:
    """Names in ``expr`` that claim to be the operator's (label values and strings excluded)."""
    without_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    tokens = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_strings))
    return {t for t in tokens if t.startswith(OPERATOR_PREFIXES)}


# ------------------------------------------------------------------------------ structure


def _render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "render_prometheusrule", PROM / "render_prometheusrule.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prometheusrule_carries_the_rule_files_groups() -> None:
    manifest = _load(MANIFEST)
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"]["name"]
    assert manifest["spec"]["groups"] == _load(RULES)["groups"], (
        "prometheusrule.yaml differs from kuberay-alerts.rules.yaml; "
        "run deploy/prometheus/render_prometheusrule.py"
    )
    assert MANIFEST.read_text() == _render_module().render(), (
        "prometheusrule.yaml was edited by hand; run deploy/prometheus/render_prometheusrule.py"
    )


def test_every_alert_has_for_severity_summary_and_description() -> None:
    alerts = _alerts()
    names = [a["alert"] for a in alerts]
    assert len(names) == len(set(names)), "alert names must be unique"
    for alert in alerts:
        name = alert["alert"]
        assert re.fullmatch(r"\d+[smh]", str(alert.get("for", ""))), f"{name}: no `for:`"
        assert alert["labels"]["severity"] in SEVERITIES, name
        assert set(alert["annotations"]) >= {"summary", "description"}, name
        assert all(alert["annotations"][k].strip() for k in ("summary", "description")), name


def test_the_issues_alerts_are_all_there() -> None:
    assert {a["alert"] for a in _alerts()} >= {
        "KubeRayOperatorDown",
        "KubeRayOperatorNoLeader",
        "KubeRayReconcileErrors",
        "RayClusterNotProvisioned",
        "RayClusterWorkersUnavailable",
        "RayJobFailed",
        "RayServiceNotReady",
        "RayHeadNotExportingGCSMetrics",
    }


def test_rules_name_only_series_the_operator_exports() -> None:
    exported = exported_series_names()
    for alert in _alerts():
        unknown = operator_series_in(alert["expr"]) - exported
        assert not unknown, f"{alert['alert']} uses series the operator does not export: {unknown}"


def test_the_operator_series_check_sees_names_but_not_strings() -> None:
    expr = 'sum by (name) (rate(workqueue_adds_total{name="kuberay_x", job=~"process_.*"}[5m]))'
    assert operator_series_in(expr) == {"workqueue_adds_total"}
    assert "workqueue_adds_total" in exported_series_names()
    assert "controller_runtime_reconcile_time_seconds_bucket" in exported_series_names()


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    doc = _load(UNIT_TESTS)
    assert doc["rule_files"] == ["../kuberay-alerts.rules.yaml"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in doc["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - fires == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested staying quiet"


# ------------------------------------------------------------------------------- promtool


@NEEDS_PROMTOOL
def test_promtool_accepts_the_rule_file(promtool: Path) -> None:
    out = _run([str(promtool), "check", "rules", str(RULES)])
    assert f"SUCCESS: {len(_alerts())} rules found" in out, out


@NEEDS_PROMTOOL
def test_promtool_accepts_the_prometheusrule_groups(promtool: Path, tmp_path: Path) -> None:
    extracted = tmp_path / "from-prometheusrule.yaml"
    extracted.write_text(yaml.safe_dump({"groups": _load(MANIFEST)["spec"]["groups"]}))
    _run([str(promtool), "check", "rules", str(extracted)])


@NEEDS_PROMTOOL
def test_promtool_unit_tests_pass(promtool: Path) -> None:
    out = _run([str(promtool), "test", "rules", str(UNIT_TESTS)])
    assert "SUCCESS" in out, out


@NEEDS_PROMTOOL
def test_promtool_unit_tests_catch_a_broken_rule(promtool: Path, tmp_path: Path) -> None:
    """The unit tests fail when an alert stops firing (here: a threshold nobody reaches)."""
    text = RULES.read_text().replace(
        '(kuberay_job_deployment_status{deployment_status=~"Failed|ValidationFailed"}) == 1',
        '(kuberay_job_deployment_status{deployment_status=~"Failed|ValidationFailed"}) == 2',
    )
    assert text != RULES.read_text()
    (tmp_path / "kuberay-alerts.rules.yaml").write_text(text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / UNIT_TESTS.name).write_text(UNIT_TESTS.read_text())
    proc = subprocess.run(
        [str(promtool), "test", "rules", str(tmp_path / "tests" / UNIT_TESTS.name)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "RayJobFailed" in proc.stdout + proc.stderr
