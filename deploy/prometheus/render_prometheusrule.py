"""Writes prometheusrule.yaml (a monitoring.coreos.com/v1 PrometheusRule) from the rule file.

kuberay-alerts.rules.yaml is the one to edit; run this afterwards:

    .venv/bin/python deploy/prometheus/render_prometheusrule.py

tests/unit/test_monitoring_rules.py fails while the two files carry different groups.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "kuberay-alerts.rules.yaml"
TARGET = HERE / "prometheusrule.yaml"

HEADER = """\
# Generated from kuberay-alerts.rules.yaml by render_prometheusrule.py; do not edit.
# Install next to your Prometheus Operator; add the labels its ruleSelector asks for (often
# `release: <your kube-prometheus-stack release>`) and a namespace it watches.
"""


class _Dumper(yaml.SafeDumper):
    """Block scalars for multi-line text, so expressions stay readable."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def manifest(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "kuberay-alerts",
            "labels": {
                "app.kubernetes.io/name": "kuberay-operator",
                "app.kubernetes.io/component": "alerts",
            },
        },
        "spec": {"groups": groups},
    }


def render() -> str:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    body = yaml.dump(manifest(groups), Dumper=_Dumper, sort_keys=False, width=100)
    return HEADER + body


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.name} is stale; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
