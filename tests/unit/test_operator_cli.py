"""`kuberay operator` flags and configuration file: upstream names, defaults and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberay.cli.main import build_parser
from kuberay.cli.operator import SettingsError, load_config_file, settings_from_args


def _parse(*argv: str) -> object:
    return build_parser().parse_args(["operator", *argv])


def test_defaults_match_upstream_except_concurrency() -> None:
    s = settings_from_args(_parse())  # type: ignore[arg-type]
    assert s.metrics_addr == ":8080"
    assert s.probe_addr == ":8082"
    assert s.enable_leader_election is True
    assert (s.qps, s.burst) == (100.0, 200)
    assert s.watch_namespace == []
    assert s.reconcile_concurrency > 1  # upstream's 1 causes head-of-line blocking


def test_flags() -> None:
    s = settings_from_args(
        _parse(  # type: ignore[arg-type]
            "--watch-namespace=a,b",
            "--enable-leader-election=false",
            "--reconcile-concurrency=3",
            "--feature-gates=RayCronJob=true",
            "--qps=50",
            "--burst=60",
        )
    )
    assert s.watch_namespace == ["a", "b"]
    assert s.enable_leader_election is False
    assert s.reconcile_concurrency == 3
    assert s.feature_gates == "RayCronJob=true"
    assert (s.qps, s.burst) == (50.0, 60)


def test_bad_concurrency_is_a_clear_error() -> None:
    with pytest.raises(SettingsError, match="at least 1"):
        settings_from_args(_parse("--reconcile-concurrency=0"))  # type: ignore[arg-type]


def test_config_file_wins_and_reads_operator_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.ray.io/v1alpha1\n"
        "kind: Configuration\n"
        "metricsAddr: ':9090'\n"
        "reconcileConcurrency: 5\n"
        "watchNamespace: team-a,team-b\n"
        "defaultPodLabels: {team: ml}\n"
        "defaultContainerEnvs: [{name: A, value: b}]\n"
        "headSidecarContainers: [{name: fluentbit, image: fluent/fluent-bit}]\n"
        "deleteRayJobAfterJobFinishes: true\n"
    )
    s = settings_from_args(_parse(f"--config={path}", "--metrics-addr=:1"))  # type: ignore[arg-type]
    assert s.metrics_addr == ":9090"
    assert s.reconcile_concurrency == 5
    assert s.watch_namespace == ["team-a", "team-b"]
    assert s.default_pod_labels == {"team": "ml"}
    assert s.default_container_envs == [{"name": "A", "value": "b"}]
    assert s.head_sidecar_containers[0]["name"] == "fluentbit"
    assert s.delete_rayjob_after_job_finishes is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Other\napiVersion: config.ray.io/v1alpha1\n", "expected apiVersion"),
        (
            "apiVersion: config.ray.io/v1alpha1\nkind: Configuration\nbogus: 1\n",
            "unknown field 'bogus'",
        ),
        ("{{{", "cannot read --config"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=message):
        load_config_file(str(path), None)
