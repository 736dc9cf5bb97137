"""``ray start`` generation (upstream: common/pod.go) and the container command."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, ray_start_command

from . import samples

OPTS = BuildOptions()
ULIMIT = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; "


def _worker(rc: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = rc["spec"]["workerGroupSpecs"][0]
    return group


def test_head_command_exact_bytes() -> None:
    rc = samples.cluster()
    assert ray_start_command(rc, None, OPTS) == (
        "ray start --head  --block  --dashboard-agent-listen-port=52365  "
        "--dashboard-host=0.0.0.0  --memory=2000000000  --metrics-export-port=8080  "
        "--num-cpus=1 "
    )


def test_worker_command_exact_bytes() -> None:
    rc = samples.cluster("demo")
    assert ray_start_command(rc, _worker(rc), OPTS) == (
        "ray start  --address=demo-head-svc.default.svc.cluster.local:6379  --block  "
        "--dashboard-agent-listen-port=52365  --memory=1073741824  "
        "--metrics-export-port=8080  --num-cpus=1 "
    )


def test_worker_address_follows_head_port_service_name_and_domain() -> None:
    rc = samples.cluster("demo")
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {"port": "6380"}
    rc["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": "head"}}
    cmd = ray_start_command(rc, _worker(rc), BuildOptions(cluster_domain="corp"))
    assert " --address=head.default.svc.corp:6380 " in cmd
    _worker(rc)["rayStartParams"] = {"address": "elsewhere:1"}
    assert " --address=elsewhere:1 " in ray_start_command(rc, _worker(rc), OPTS)


def test_user_params_win_over_defaults_except_block() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {
        "dashboard-host": "127.0.0.1",
        "metrics-export-port": "9000",
        "dashboard-agent-listen-port": "1234",
        "block": "false",
        "num-cpus": "0",
    }
    cmd = ray_start_command(rc, None, OPTS)
    assert " --dashboard-host=127.0.0.1 " in cmd
    assert " --metrics-export-port=9000 " in cmd
    assert " --dashboard-agent-listen-port=1234 " in cmd
    assert " --block " in cmd
    assert " --num-cpus=0 " in cmd


@pytest.mark.parametrize(
    ("resources", "expected_cpu"),
    [
        ({"limits": {"cpu": "500m"}}, "1"),
        ({"limits": {"cpu": "2500m"}, "requests": {"cpu": "1"}}, "3"),
        ({"requests": {"cpu": "1500m"}}, "2"),
        ({"limits": {"cpu": "0"}, "requests": {"cpu": "2"}}, "2"),
        ({}, None),
    ],
)
def test_num_cpus_rounds_up_from_limits_then_requests(
    resources: dict[str, Any], expected_cpu: str | None
) -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = resources
    cmd = ray_start_command(rc, None, OPTS)
    if expected_cpu is None:
        assert "--num-cpus" not in cmd
    else:
        assert f" --num-cpus={expected_cpu} " in cmd


def test_memory_only_from_limits() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"memory": "1Gi"}}
    assert "--memory" not in ray_start_command(rc, None, OPTS)
    container["resources"] = {"limits": {"memory": "1.5Gi"}}
    assert " --memory=1610612736 " in ray_start_command(rc, None, OPTS)


def test_gpus_first_sorted_key_and_mig() -> None:
    rc = samples.cluster()
    container = _worker(rc)["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": "2", "amd.com/gpu": "1"}}
    assert " --num-gpus=1 " in ray_start_command(rc, _worker(rc), OPTS)
    container["resources"] = {"limits": {"nvidia.com/mig-1g.5gb": "3"}}
    assert " --num-gpus=3 " in ray_start_command(rc, _worker(rc), OPTS)
    container["resources"] = {"limits": {"nvidia.com/gpu": "0"}}
    assert "--num-gpus" not in ray_start_command(rc, _worker(rc), OPTS)


def test_tpu_and_neuron_become_resources_json() -> None:
    rc = samples.cluster()
    container = _worker(rc)["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"google.com/tpu": "4", "aws.amazon.com/neuroncore": "2"}}
    # Only the first accelerator in key order is added.
    assert """ --resources='{"neuron_cores":2}' """ in ray_start_command(rc, _worker(rc), OPTS)
    container["resources"] = {"limits": {"google.com/tpu": "4"}}
    _worker(rc)["rayStartParams"] = {"resources": "'{\"custom\": 1.5}'"}
    cmd = ray_start_command(rc, _worker(rc), OPTS)
    assert """ --resources='{"TPU":4,"custom":1.5}' """ in cmd
    _worker(rc)["rayStartParams"] = {"resources": "'{\"TPU\": 8}'"}
    assert """ --resources='{"TPU": 8}' """ in ray_start_command(rc, _worker(rc), OPTS)


def test_group_resources_override_params() -> None:
    rc = samples.cluster()
    _worker(rc)["rayStartParams"] = {"num-cpus": "8"}
    _worker(rc)["resources"] = {
        "CPU": "1500m",
        "memory": "1Gi",
        "nvidia.com/gpu": "1",
        "custom_b": "2",
        "custom_a": "0.5",
        "broken": "not-a-quantity",
    }
    cmd = ray_start_command(rc, _worker(rc), OPTS)
    assert " --num-cpus=2 " in cmd
    assert " --memory=1073741824 " in cmd
    assert " --num-gpus=1 " in cmd
    assert """ --resources='{"custom_a":0.5,"custom_b":2}' """ in cmd
    assert "broken" not in cmd


def test_group_labels_become_sorted_labels_flag() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["labels"] = {"zone": "b", "accel": "none"}
    assert " --labels=accel=none,zone=b " in ray_start_command(rc, None, OPTS)
    pod = build_head_pod(rc, OPTS)
    assert pod["metadata"]["labels"]["zone"] == "b"


def test_boolean_flags() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {
        "disable-usage-stats": "True",
        "enable-object-reconstruction": "false",
        "log-color": "false",
        "include-dashboard": "true",
        "include-log-monitor": "FALSE",
    }
    cmd = ray_start_command(rc, None, OPTS)
    assert " --disable-usage-stats " in cmd
    assert "enable-object-reconstruction" not in cmd
    assert " --log-color=false " in cmd
    assert " --include-dashboard=true " in cmd
    assert " --include-log-monitor=FALSE " in cmd


def test_flags_sorted_by_key() -> None:
    rc = samples.cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {"z-last": "1", "a-first": "2"}
    cmd = ray_start_command(rc, None, OPTS)
    flags = [p.split("=")[0] for p in cmd.split()[3:]]
    assert flags == sorted(flags)


def test_no_monitor_with_autoscaling() -> None:
    rc = samples.autoscaling_cluster()
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {"no-monitor": "false"}
    assert " --no-monitor " in ray_start_command(rc, None, OPTS)
    assert "--no-monitor" not in ray_start_command(rc, _worker(rc), OPTS)


def test_container_command_and_args() -> None:
    rc = samples.cluster()
    pod = build_head_pod(rc, OPTS)
    ray = samples.ray_container(pod)
    assert ray["command"] == ["/bin/bash", "-c", "--"]
    assert ray["args"] == [ULIMIT + ray_start_command(rc, None, OPTS)]
    login = build_head_pod(rc, BuildOptions(enable_login_shell=True))
    assert samples.ray_container(login)["command"] == ["/bin/bash", "-lc", "--"]


def test_user_command_runs_before_ray_start() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["command"] = ["/bin/sh", "-c"]
    container["args"] = ["pip install x"]
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert ray["args"] == [
        " /bin/sh  -c  pip install x  && " + ULIMIT + ray_start_command(rc, None, OPTS)
    ]


def test_existing_ray_start_or_overwrite_annotation_keeps_command() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["command"] = ["bash", "-c", "ray start --head --block"]
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert ray["command"] == ["bash", "-c", "ray start --head --block"]
    assert "args" not in ray
    rc2 = samples.cluster()
    rc2["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    rc2["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["command"] = ["my-entry"]
    ray2 = samples.ray_container(build_head_pod(rc2, OPTS))
    assert ray2["command"] == ["my-entry"]
    # The generated command is still exported for the user's entrypoint.
    assert samples.env_value(ray2, "KUBERAY_GEN_RAY_START_CMD").startswith("ray start --head")


def test_redis_credentials_become_env_references_in_params() -> None:
    rc = samples.redis_ft_cluster(redisUsername={"value": "u"}, redisPassword={"value": "p"})
    cmd = ray_start_command(rc, None, OPTS)
    assert " --redis-password=$REDIS_PASSWORD " in cmd
    assert " --redis-username=$REDIS_USERNAME " in cmd
