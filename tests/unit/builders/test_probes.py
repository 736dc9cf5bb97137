"""Liveness/readiness probes (upstream: common/pod.go) by Ray version and node type."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod

from . import samples

OPTS = BuildOptions()
RAYLET = "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"
GCS = "wget --tries 1 -T 10 -q -O- http://localhost:8265/api/gcs_healthz | grep success"


def _probes(pod: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ray = samples.ray_container(pod)
    return ray["livenessProbe"], ray["readinessProbe"]


def test_exec_probes_before_2_53_head() -> None:
    liveness, readiness = _probes(build_head_pod(samples.cluster(), OPTS))
    command = {"command": ["bash", "-c", f"{RAYLET} && {GCS}"]}
    assert liveness == {
        "exec": command,
        "initialDelaySeconds": 30,
        "timeoutSeconds": 5,
        "periodSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 120,
    }
    assert readiness == {
        "exec": command,
        "initialDelaySeconds": 10,
        "timeoutSeconds": 5,
        "periodSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 10,
    }


def test_exec_probes_worker_raylet_only_timeout_2() -> None:
    rc = samples.cluster()
    liveness, readiness = _probes(build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS))
    assert liveness["exec"] == {"command": ["bash", "-c", RAYLET]}
    assert liveness["timeoutSeconds"] == 2
    assert readiness["timeoutSeconds"] == 2


@pytest.mark.parametrize("version", ["2.53.0", "2.54", "v3.0.0", "2.53.0rc1"])
def test_http_probes_from_2_53(version: str) -> None:
    rc = samples.cluster(rayVersion=version)
    liveness, readiness = _probes(build_head_pod(rc, OPTS))
    assert liveness["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert readiness["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert "exec" not in liveness


@pytest.mark.parametrize("version", ["2.52.1", "nightly", "", "2"])
def test_exec_probes_for_old_or_unparseable_versions(version: str) -> None:
    rc = samples.cluster(rayVersion=version)
    liveness, _ = _probes(build_head_pod(rc, OPTS))
    assert "exec" in liveness


def test_probe_ports_follow_start_params() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {
        "dashboard-agent-listen-port": "50000",
        "dashboard-port": "9999",
    }
    liveness, _ = _probes(build_head_pod(rc, OPTS))
    text = liveness["exec"]["command"][2]
    assert "localhost:50000/api/local_raylet_healthz" in text
    assert "localhost:9999/api/gcs_healthz" in text
    rc["spec"]["rayVersion"] = "2.53.0"
    liveness, _ = _probes(build_head_pod(rc, OPTS))
    assert liveness["httpGet"]["port"] == 50000


def test_user_probe_kept_and_injection_switch() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"] = {"tcpSocket": {"port": 6379}}
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert ray["readinessProbe"] == {"tcpSocket": {"port": 6379}}
    assert "exec" in ray["livenessProbe"]
    off = samples.ray_container(build_head_pod(rc, BuildOptions(enable_probes_injection=False)))
    assert "livenessProbe" not in off


def test_rayservice_worker_readiness_checks_serve_proxy() -> None:
    rc = samples.cluster(rayVersion="2.53.0")
    rc["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    group = rc["spec"]["workerGroupSpecs"][0]
    group["template"]["spec"]["containers"][0]["ports"] = [{"name": "serve", "containerPort": 9000}]
    liveness, readiness = _probes(build_worker_pod(rc, group, OPTS))
    assert "httpGet" in liveness
    assert "httpGet" not in readiness
    serve = "wget --tries 1 -T 10 -q -O- http://localhost:9000/-/healthz | grep success"
    assert readiness["exec"] == {"command": ["bash", "-c", f"{RAYLET} && {serve}"]}
    assert readiness["failureThreshold"] == 1
    _head_liveness, head_readiness = _probes(build_head_pod(rc, OPTS))
    assert "httpGet" in head_readiness
    assert head_readiness["failureThreshold"] == 10
