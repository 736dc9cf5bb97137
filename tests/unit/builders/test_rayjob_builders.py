"""Pure RayJob builders: the submitter command string, the submitter Job, the sidecar and the
RayCluster a RayJob owns (upstream: rayjob_controller.go, common/job.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberay.builders import rayjob as rjb
from kuberay.builders.options import BuildOptions

DASH = "demo-abcde-head-svc.ns.svc.cluster.local:8265"


def rayjob(**spec: Any) -> dict[str, Any]:
    cluster_spec = {
        "rayVersion": "2.52.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}
            },
        },
        "workerGroupSpecs": [],
    }
    body: dict[str, Any] = {
        "entrypoint": "python /home/ray/main.py",
        "rayClusterSpec": cluster_spec,
    }
    body.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "demo",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
        },
        "spec": body,
        "status": {"jobId": "demo-xyz12", "rayClusterName": "demo-abcde", "dashboardURL": DASH},
    }


def test_k8s_job_mode_command_is_idempotent_and_exact() -> None:
    job = rayjob(
        runtimeEnvYAML="pip:\n  - requests==2.26.0\nenv_vars:\n  A: '<b>'\n",
        metadata={"owner": "me"},
        entrypointNumCpus=1.5,
        entrypointNumGpus=0,
        entrypointResources='{"r": 1}',
    )
    text = " ".join(rjb.submitter_command(job, address=DASH, job_id="demo-xyz12"))
    addr = f"http://{DASH}"
    expected = (
        'until python -c "import urllib.request; r=urllib.request.urlopen('
        f"'{addr}/api/gcs_healthz', timeout=10); exit(0 if b'success' in r.read() else 1)\" "
        f'>/dev/null 2>&1 ; do echo "Waiting for Ray Dashboard GCS to become healthy at {addr} '
        '..." ; sleep 2 ; done ; '
        f"if ! ray job status --address {addr} demo-xyz12 >/dev/null 2>&1 ; then "
        f"ray job submit --address {addr} --no-wait "
        '--runtime-env-json "{\\"env_vars\\":{\\"A\\":\\"\\\\u003cb\\\\u003e\\"},'
        '\\"pip\\":[\\"requests==2.26.0\\"]}" '
        '--metadata-json "{\\"owner\\":\\"me\\"}" '
        "--submission-id demo-xyz12 --entrypoint-num-cpus 1.500000 "
        '--entrypoint-resources "{\\"r\\": 1}" '
        "-- python /home/ray/main.py ; fi ; "
        f"ray job logs --address {addr} --follow demo-xyz12"
    )
    assert text == expected


def test_sidecar_command_without_restart_gate_is_plain_submit() -> None:
    """upstream (v1.7.0 BuildJobSubmitCommand): the probe asks localhost, the wait message and
    the submit name the loopback address, and the command ends with ` ;`."""
    job = rayjob(submissionMode="SidecarMode")
    job["status"] = {"jobId": "id1"}
    container = rjb.build_sidecar_container(
        job, job["spec"]["rayClusterSpec"], job_id="id1", cluster_name="demo-x", restart=False
    )
    text = container["args"][0]
    probe = (
        'python -c "import urllib.request; r=urllib.request.urlopen('
        "'http://localhost:8265/api/gcs_healthz', timeout=10); "
        "exit(0 if b'success' in r.read() else 1)\""
    )
    assert text == (
        f"until {probe} >/dev/null 2>&1 ; do echo "
        '"Waiting for Ray Dashboard GCS to become healthy at http://127.0.0.1:8265 ..." ; '
        "sleep 2 ; done ; ray job submit --address http://127.0.0.1:8265 --submission-id id1 "
        "-- python /home/ray/main.py ;"
    )
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # status.dashboardURL is not known yet when the sidecar is built.
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "RAY_DASHBOARD_ADDRESS": None,
        "RAY_JOB_SUBMISSION_ID": "id1",
    }


def test_default_submitter_job() -> None:
    job = rayjob()
    out = rjb.build_submitter_job(job, job["spec"]["rayClusterSpec"])
    assert out["metadata"]["name"] == "demo"
    assert out["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "demo",
        "ray.io/originated-from-crd": "RayJob",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    ref = out["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("RayJob", "demo", True)
    assert out["spec"]["backoffLimit"] == 2
    template = out["spec"]["template"]
    assert template["metadata"]["labels"] == out["metadata"]["labels"]
    assert template["spec"]["restartPolicy"] == "Never"
    (container,) = template["spec"]["containers"]
    assert container["name"] == "ray-job-submitter"
    assert container["image"] == "rayproject/ray:2.52.0"
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "200Mi"},
    }
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    assert len(container["args"]) == 1
    assert "--submission-id demo-xyz12" in container["args"][0]
    assert container["env"] == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "RAY_DASHBOARD_ADDRESS", "value": DASH},
        {"name": "RAY_JOB_SUBMISSION_ID", "value": "demo-xyz12"},
    ]


def test_custom_submitter_template_keeps_user_command_and_gets_env() -> None:
    template = {
        "metadata": {"labels": {"mine": "yes"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "s", "image": "light", "command": ["/submitter"]}],
        },
    }
    job = rayjob(submitterPodTemplate=template, submitterConfig={"backoffLimit": 0})
    out = rjb.build_submitter_job(job, job["spec"]["rayClusterSpec"])
    assert out["spec"]["backoffLimit"] == 0
    container = out["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/submitter"]
    assert "args" not in container
    assert {e["name"] for e in container["env"]} >= {"RAY_JOB_SUBMISSION_ID"}
    assert out["spec"]["template"]["metadata"]["labels"]["mine"] == "yes"
    assert job["spec"]["submitterPodTemplate"] == template, "input not mutated"


def test_submitter_gets_auth_token_env() -> None:
    job = rayjob()
    job["spec"]["rayClusterSpec"]["authOptions"] = {"mode": "token"}
    out = rjb.build_submitter_job(job, job["spec"]["rayClusterSpec"])
    env = out["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "RAY_AUTH_MODE", "value": "token"} in env
    token = next(e for e in env if e["name"] == "RAY_AUTH_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "demo-abcde", "key": "auth_token"}


def test_cluster_for_job_labels_annotations_owner() -> None:
    job = rayjob()
    before = copy.deepcopy(job)
    cluster = rjb.build_cluster_for_job(job)
    meta = cluster["metadata"]
    assert meta["name"] == "demo-abcde"
    assert meta["labels"] == {
        "team": "a",
        "ray.io/originated-from-cr-name": "demo",
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/job-submission-mode": "K8sJobMode",
    }
    assert meta["annotations"] == {"note": "x"}
    assert meta["ownerReferences"][0]["uid"] == "uid-1"
    assert cluster["spec"] == job["spec"]["rayClusterSpec"]
    assert job == before


def test_cluster_for_sidecar_mode() -> None:
    job = rayjob(submissionMode="SidecarMode")
    cluster = rjb.build_cluster_for_job(job)
    assert cluster["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    pod = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert [c["name"] for c in pod["containers"]] == ["ray-head", "ray-job-submitter"]
    sidecar = pod["containers"][1]
    assert "restartPolicy" not in sidecar
    assert "--address http://127.0.0.1:8265" in sidecar["args"][0]
    restart = rjb.build_cluster_for_job(job, sidecar_restart=True)
    side = restart["spec"]["headGroupSpec"]["template"]["spec"]["containers"][1]
    assert side["restartPolicy"] == "OnFailure"
    assert "--no-wait" in side["args"][0]


def test_dashboard_url_and_port() -> None:
    job = rayjob()
    cluster = rjb.build_cluster_for_job(job)
    assert rjb.dashboard_url(cluster, BuildOptions()) == DASH
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [{"name": "dashboard", "containerPort": 9999}]
    assert rjb.dashboard_url(cluster, BuildOptions(cluster_domain="x.y")).endswith(".svc.x.y:9999")


def test_http_submit_payload() -> None:
    job = rayjob(
        runtimeEnvYAML="working_dir: /tmp", metadata={"k": "v"}, entrypointResources='{"a": 2}'
    )
    assert rjb.job_submit_payload(job, "id") == {
        "entrypoint": "python /home/ray/main.py",
        "submission_id": "id",
        "runtime_env": {"working_dir": "/tmp"},
        "metadata": {"k": "v"},
        "entrypoint_resources": {"a": 2.0},
    }


def test_job_head_service() -> None:
    job = rayjob()
    cluster = rjb.build_cluster_for_job(job)
    svc = rjb.build_job_head_service(job, cluster, BuildOptions())
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["spec"]["selector"]["ray.io/cluster"] == "demo-abcde"
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "RayJob"


def test_runtime_env_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="mapping"):
        rjb.runtime_env(rayjob(runtimeEnvYAML="- a\n- b\n"))
