"""`kuberay operator` flags and configuration file: upstream names, defaults and clear errors."""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import kuberay
from kuberay.api.features import FeatureGates
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


def test_every_operator_flag_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    op = sub.choices["operator"]
    flags = [a for a in op._actions if a.option_strings and a.dest != "help"]
    assert len(flags) >= 24
    assert [a.option_strings[0] for a in flags if not (a.help or "").strip()] == []


@pytest.mark.parametrize("argv", [["--version"], ["operator", "--version"]])
def test_version(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"kuberay-py {kuberay.__version__} (KubeRay v1.7.0)\n"


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


def test_config_file_keeps_feature_gates_and_log_level_flags(tmp_path: Path) -> None:
    """The chart's configuration mode passes --feature-gates next to --config (as upstream)."""
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: config.ray.io/v1alpha1\nkind: Configuration\n")
    args = _parse(f"--config={path}", "--feature-gates=RayCronJob=true", "--zap-log-level=debug")
    s = settings_from_args(args)  # type: ignore[arg-type]
    assert s.feature_gates == "RayCronJob=true"
    assert s.log_level == "debug"
    path.write_text(path.read_text() + "featureGates: {RayCronJob: false}\n")
    s = settings_from_args(args)  # type: ignore[arg-type]
    assert not FeatureGates.parse(s.feature_gates).enabled("RayCronJob")


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


def test_upstream_logging_and_zap_flags_are_accepted(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "operator.log"
    s = settings_from_args(
        _parse(  # type: ignore[arg-type]
            f"--log-file-path={log_file}",
            "--log-file-encoder=console",
            "--zap-log-level=debug",
            "--zap-devel",
            "--zap-encoder=console",
            "--zap-stacktrace-level=error",
            "--zap-time-encoding=iso8601",
            "--enable-batch-scheduler=true",
        )
    )
    assert s.log_file_path == str(log_file)
    assert s.log_file_encoder == "console"
    assert s.log_level == "debug"
    assert s.enable_batch_scheduler is True
    assert settings_from_args(_parse("--zap-log-level=2")).log_level == "debug"  # type: ignore[arg-type]


def test_log_file_gets_its_own_encoder(tmp_path: Path) -> None:
    import logging

    from kuberay.runtime import logs

    log_file = tmp_path / "logs" / "operator.log"
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.setup("json", "info", file_path=str(log_file), file_encoder="console")
        logging.getLogger("kuberay.test").info("hello file")
        for handler in root.handlers:
            handler.flush()
        line = log_file.read_text().strip()
        assert line.endswith("INFO kuberay.test: hello file")
    finally:
        for handler in root.handlers:
            if handler not in saved[0]:
                handler.close()
        root.handlers, root.level = saved[0], saved[1]


def test_config_file_logging_and_batch_scheduler_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.ray.io/v1alpha1\n"
        "kind: Configuration\n"
        "logFile: /var/log/kuberay.log\n"
        "logFileEncoder: console\n"
        "enableBatchScheduler: true\n"
    )
    s = load_config_file(str(path), None)
    assert (s.log_file_path, s.log_file_encoder) == ("/var/log/kuberay.log", "console")
    assert s.enable_batch_scheduler is True


def _run_operator(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    return subprocess.run(
        [sys.executable, "-m", "kuberay.cli.main", "operator", *args,
         "--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such kubeconfig file"),
        ("a: [b", "not a readable YAML kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "no contexts"),
        (
            "contexts: [{name: a, context: {cluster: a}}]\ncurrent-context: b\n",
            "context 'b' does not exist",
        ),
    ],
)
def test_bad_kubeconfig_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    proc = _run_operator(f"--kubeconfig={path}")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: kubeconfig: ")
    assert message in lines[0]


def test_unreachable_apiserver_is_retried_then_one_line_and_exit_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    doc = {
        "current-context": "a",
        "contexts": [{"name": "a", "context": {"cluster": "a", "user": "a"}}],
        "clusters": [{"name": "a", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "a", "user": {"token": "x"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    started = time.monotonic()
    proc = _run_operator(
        f"--kubeconfig={path}",
        "--log-stdout-encoder=json",
        env={"KUBERAY_APISERVER_WAIT_SECONDS": "2"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith(f"error: cannot reach the apiserver at http://127.0.0.1:{port}: ")
    # the back-off is visible in the log, one JSON line per try
    assert '"msg":"apiserver not reachable yet; retrying"' in proc.stderr + proc.stdout
    assert time.monotonic() - started >= 1.5


def test_plane_counts_must_be_positive() -> None:
    import argparse

    from kuberay.devenv.supervisor import add_plane_arguments

    parser = argparse.ArgumentParser(prog="kuberay dev up", exit_on_error=False)
    add_plane_arguments(parser)
    assert parser.parse_args(["--nodes", "3"]).nodes == 3
    for bad in (
        ["--nodes", "-1"],
        ["--nodes", "0"],
        ["--process-nodes", "0"],
        ["--node-gpus", "-2"],
    ):
        with pytest.raises(argparse.ArgumentError, match="must be at least"):
            parser.parse_args(bad)


def test_crds_check_fails_on_a_file_the_models_do_not_make(tmp_path: Path) -> None:
    from kuberay.api import crdgen

    crdgen.write(tmp_path)
    assert crdgen.stale_files(tmp_path) == []
    (tmp_path / "ray.io_rayoldthings.yaml").write_text("kind: CustomResourceDefinition\n")
    assert crdgen.stale_files(tmp_path) == ["ray.io_rayoldthings.yaml"]
