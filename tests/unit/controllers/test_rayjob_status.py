"""RayJob state-machine pieces that need no API server: timers, backoff, conditions, config.

The reconciler is built without a Manager (``__new__``) because these methods read only the
configuration, the clock and the RayJob dict.
"""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.controllers import rayjob as rj

T0 = 1_700_000_000.0


def reconciler(now: float, **config: Any) -> rj.RayJobReconciler:
    r = rj.RayJobReconciler.__new__(rj.RayJobReconciler)
    r.config = rj.RayJobConfig(clock=lambda: now, **config)
    return r


def job(spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "generation": 3},
        "spec": spec or {},
        "status": {"startTime": rj.rfc3339(T0), **status},
    }


def test_config_from_env_reads_upstream_variables() -> None:
    cfg = rj.RayJobConfig.from_env(
        {
            "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS": "12",
            "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "bad",
            "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": "TRUE",
        }
    )
    assert cfg.transition_grace_seconds == 12
    assert cfg.status_check_timeout_seconds == 300
    assert cfg.delete_rayjob_after_finishes is True
    defaults = rj.RayJobConfig()
    assert (defaults.requeue_seconds, defaults.submitter_finished_grace_seconds) == (3.0, 30.0)


def test_active_deadline_counts_from_start_time() -> None:
    obj = job({"activeDeadlineSeconds": 10})
    assert not reconciler(T0 + 9).active_deadline_exceeded(obj)
    assert reconciler(T0 + 10).active_deadline_exceeded(obj)
    assert obj["status"]["jobDeploymentStatus"] == "Failed"
    assert obj["status"]["reason"] == "DeadlineExceeded"


def test_pre_running_deadline() -> None:
    obj = job({"preRunningDeadlineSeconds": 5})
    assert reconciler(T0 + 5).pre_running_deadline_exceeded(obj)
    assert obj["status"]["reason"] == "PreRunningDeadlineExceeded"


@pytest.mark.parametrize(("ray_status", "want"), [("SUCCEEDED", "Complete"), ("FAILED", "Failed")])
def test_transition_grace_period_forces_the_deployment_status(ray_status: str, want: str) -> None:
    info = {"endTime": rj.rfc3339(T0)}
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running", rayJobInfo=info)
    assert not reconciler(T0 + 299).transition_grace_exceeded(obj)
    assert reconciler(T0 + 300).transition_grace_exceeded(obj)
    assert obj["status"]["jobDeploymentStatus"] == want
    assert obj["status"]["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"


def test_submitter_finished_without_terminal_job_fails_after_30s() -> None:
    obj = job(jobStatus="RUNNING", jobDeploymentStatus="Running")
    assert not reconciler(T0 + 29).submitter_finished_timeout(obj, T0)
    assert not reconciler(T0 + 100).submitter_finished_timeout(obj, None)
    assert reconciler(T0 + 30).submitter_finished_timeout(obj, T0)
    assert obj["status"]["jobStatus"] == "FAILED"
    assert obj["status"]["jobDeploymentStatus"] == "Failed"


def test_status_check_timeout() -> None:
    obj = job(jobDeploymentStatus="Running")
    r = reconciler(T0 + 50)
    r.status_check_failed(obj)
    first = obj["status"]["jobStatusCheckFailureStartTime"]
    reconciler(T0 + 60).status_check_failed(obj)
    assert obj["status"]["jobStatusCheckFailureStartTime"] == first, "only the first failure"
    assert not reconciler(T0 + 349).status_check_timed_out(obj)
    assert reconciler(T0 + 350).status_check_timed_out(obj)
    assert obj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"


@pytest.mark.parametrize(
    ("reason", "failed_before", "limit", "want"),
    [
        ("AppFailed", 0, 1, "Retrying"),
        ("AppFailed", 1, 1, "Failed"),
        ("PreRunningDeadlineExceeded", 0, 2, "Retrying"),
        ("SubmissionFailed", 0, 2, "Retrying"),
        ("DeadlineExceeded", 0, 2, "Failed"),
        ("JobStatusCheckTimeoutExceeded", 0, 2, "Failed"),
        ("AppFailed", 0, None, "Failed"),
    ],
)
def test_backoff_limit(reason: str, failed_before: int, limit: int | None, want: str) -> None:
    spec = {} if limit is None else {"backoffLimit": limit}
    obj = job(spec, jobDeploymentStatus="Failed", reason=reason, failed=failed_before)
    reconciler(T0).check_backoff_limit(obj)
    assert obj["status"]["jobDeploymentStatus"] == want
    assert obj["status"]["failed"] == failed_before + 1
    assert obj["status"]["succeeded"] == 0


def test_succeeded_counter() -> None:
    obj = job(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", succeeded=2)
    reconciler(T0).check_backoff_limit(obj)
    assert (obj["status"]["succeeded"], obj["status"]["failed"]) == (3, 0)


def test_conditions_carry_the_cluster_stall_reason_while_initializing() -> None:
    obj = job(jobDeploymentStatus="Initializing")
    cluster = {
        "status": {
            "state": "",
            "conditions": [
                {
                    "type": "RayClusterProvisioned",
                    "status": "False",
                    "reason": "RayClusterPodsProvisioning",
                    "message": "RayCluster Pods are being provisioned for first time; pod x: "
                    "Unschedulable: 0/4 nodes are available",
                }
            ],
        }
    }
    rj.set_conditions(obj, cluster, T0)
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "ClusterReady")
    assert ready["status"] == "False"
    assert ready["reason"] == "RayClusterPodsProvisioning"
    assert "Unschedulable" in ready["message"]
    assert ready["observedGeneration"] == 3
    rj.set_conditions(obj, None, T0)
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "ClusterReady")
    assert ready["reason"] == "RayClusterNotFound"
    assert ready["lastTransitionTime"] == rj.rfc3339(T0)


def test_conditions_for_terminal_and_suspended_states() -> None:
    obj = job(jobDeploymentStatus="Failed", reason="AppFailed", message="boom")
    rj.set_conditions(obj, None, T0)
    by_type = {c["type"]: c for c in obj["status"]["conditions"]}
    assert by_type["Failed"]["status"] == "True"
    assert (by_type["Failed"]["reason"], by_type["Failed"]["message"]) == ("AppFailed", "boom")
    assert by_type["Complete"]["status"] == "False"
    obj["status"]["jobDeploymentStatus"] = "Suspended"
    rj.set_conditions(obj, None, T0 + 5)
    by_type = {c["type"]: c for c in obj["status"]["conditions"]}
    assert by_type["Suspended"]["status"] == "True"
    assert by_type["Failed"]["status"] == "False"
    assert by_type["Failed"]["lastTransitionTime"] == rj.rfc3339(T0 + 5)


def test_time_helpers_round_trip() -> None:
    assert rj.parse_time(rj.rfc3339(T0)) == T0
    assert rj.parse_time("") is None
    assert rj.parse_time("not a time") is None


class _Store:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs

    def get_by_name(self, ns: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objs if o["metadata"]["name"] == name), None)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        return [o for o in self.objs if f"ns/{o['metadata']['labels']['ray.io/cluster']}" == value]


class _Informer:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.store = _Store(objs)


def with_cache(r: rj.RayJobReconciler, jobs: list[Any], pods: list[Any]) -> rj.RayJobReconciler:
    r.jobs = [_Informer(jobs)]  # type: ignore[list-item]
    r.pods = [_Informer(pods)]  # type: ignore[list-item]
    return r


def submitter(cond_type: str, reason: str = "BackoffLimitExceeded") -> dict[str, Any]:
    cond = {
        "type": cond_type,
        "status": "True",
        "reason": reason,
        "message": "Job has reached the specified backoff limit",
        "lastTransitionTime": rj.rfc3339(T0),
    }
    return {"metadata": {"name": "j"}, "status": {"conditions": [cond]}}


@pytest.mark.parametrize(
    ("ray_status", "reason"), [("RUNNING", "SubmissionFailed"), ("FAILED", "AppFailed")]
)
def test_failed_submitter_job(ray_status: str, reason: str) -> None:
    r = with_cache(reconciler(T0 + 5), [submitter("Failed")], [])
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running")
    failed, finished = r.check_submitter(obj, "K8sJobMode")
    assert failed
    assert finished == T0
    assert obj["status"]["reason"] == reason
    assert obj["status"]["message"] == (
        "Job submission has failed. Reason: BackoffLimitExceeded. "
        "Message: Job has reached the specified backoff limit"
    )


def test_complete_submitter_job_gives_finish_time() -> None:
    r = with_cache(reconciler(T0 + 5), [submitter("Complete", "")], [])
    obj = job(jobDeploymentStatus="Running")
    assert r.check_submitter(obj, "K8sJobMode") == (False, T0)
    assert with_cache(reconciler(T0), [], []).check_submitter(obj, "K8sJobMode") == (False, None)


def head_pod(state: dict[str, Any], restarts: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "h", "labels": {"ray.io/cluster": "c", "ray.io/node-type": "head"}},
        "status": {
            "containerStatuses": [
                {"name": "ray-head", "state": {"running": {}}},
                {"name": "ray-job-submitter", "state": state, "restartCount": restarts},
            ]
        },
    }


def test_sidecar_checks() -> None:
    obj = job(jobDeploymentStatus="Running", rayClusterName="c")
    assert with_cache(reconciler(T0), [], []).check_submitter(obj, "SidecarMode") == (True, None)
    assert obj["status"]["message"] == "Ray head pod not found."
    obj = job(jobDeploymentStatus="Running", rayClusterName="c")
    done = {"terminated": {"exitCode": 0, "finishedAt": rj.rfc3339(T0)}}
    r = with_cache(reconciler(T0), [], [head_pod(done)])
    assert r.check_submitter(obj, "SidecarMode") == (False, T0)
    crashed = {"terminated": {"exitCode": 2, "finishedAt": rj.rfc3339(T0), "reason": "Error"}}
    r = with_cache(reconciler(T0), [], [head_pod(crashed)])
    assert r.check_submitter(obj, "SidecarMode") == (True, T0)
    assert obj["status"]["reason"] == "SubmissionFailed"
    assert "exit code 2" in obj["status"]["message"]


def test_dashboard_base_url_direct_and_through_the_api_server_proxy() -> None:
    from kuberay.controllers.rayjob import dashboard_base_url

    url = "job-abcde-head-svc.team.svc.cluster.local:8265"
    assert dashboard_base_url(url, "team", None) == f"http://{url}"
    assert dashboard_base_url(url, "team", "https://10.0.0.1:6443") == (
        "https://10.0.0.1:6443/api/v1/namespaces/team/services/job-abcde-head-svc:dashboard/proxy"
    )
