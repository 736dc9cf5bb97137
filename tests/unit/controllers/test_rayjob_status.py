"""RayJob status decisions as tables: timers, deadlines, backoff, submitter outcome, TTLs,
conditions. Every case calls a pure function of ``rayjob_status`` with the job, what was
observed and ``now``; no reconciler, cache or clock is involved."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.controllers import rayjob as rj
from kuberay.controllers import rayjob_status as st
from kuberay.controllers.common import parse_time, rfc3339
from kuberay.controllers.dashboards import dashboard_base_url
from kuberay.ray.dashboard import JobInfo

T0 = 1_700_000_000.0
S0 = rfc3339(T0)


def job(spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "generation": 3},
        "spec": spec or {},
        "status": {"startTime": S0, **status},
    }


def bare(spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    """A job without ``startTime``."""
    obj = job(spec, **status)
    del obj["status"]["startTime"]
    return obj


# ---------------------------------------------------------------------------- config
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


def test_time_helpers_round_trip() -> None:
    assert parse_time(rfc3339(T0)) == T0
    assert parse_time("") is None
    assert parse_time("not a time") is None


# ---------------------------------------------------------------------------- New / validation
class Names:
    """A suffix source that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"s{self.calls}"


@pytest.mark.parametrize(
    ("spec", "status", "want_id", "want_cluster", "calls"),
    [
        ({}, {}, "j-s1", "j-s2", 2),
        ({"jobId": "mine"}, {}, "mine", "j-s1", 1),
        ({"jobId": "mine"}, {"jobId": "old"}, "mine", "j-s1", 1),
        ({}, {"jobId": "kept", "rayClusterName": "rc"}, "kept", "rc", 0),
        ({"submissionMode": "InteractiveMode"}, {}, None, "j-s1", 1),
        ({"clusterSelector": {"ray.io/cluster": "shared"}}, {}, "j-s1", "shared", 1),
    ],
)
def test_init_status_chooses_names_once(
    spec: dict[str, Any],
    status: dict[str, Any],
    want_id: str | None,
    want_cluster: str,
    calls: int,
) -> None:
    obj = bare(spec, **status)
    names = Names()
    st.init_status(obj, names, T0)
    got = obj["status"]
    assert got.get("jobId") == want_id
    assert got["rayClusterName"] == want_cluster
    assert names.calls == calls, "a random suffix is drawn only for a name that is needed"
    assert (got["jobStatus"], got["jobDeploymentStatus"]) == ("", "Initializing")
    assert got["startTime"] == S0


def test_validation_failure_status() -> None:
    obj = job(jobDeploymentStatus="Running")
    st.mark_validation_failed(obj, "RayJob: bad spec")
    assert (obj["status"]["jobDeploymentStatus"], obj["status"]["reason"]) == (
        "ValidationFailed",
        "ValidationFailed",
    )
    assert obj["status"]["message"] == "RayJob: bad spec"


# ---------------------------------------------------------------------------- timers
@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({}, False),
        ({"suspend": False}, False),
        ({"suspend": True, "clusterSelector": {"ray.io/cluster": "c"}}, False),
        ({"suspend": True}, True),
    ],
)
def test_to_suspending(spec: dict[str, Any], want: bool) -> None:
    obj = job(spec, jobDeploymentStatus="Running")
    assert st.to_suspending_if_needed(obj) is want
    assert obj["status"]["jobDeploymentStatus"] == ("Suspending" if want else "Running")


DEADLINES = [
    # (check, spec key, reason, message label)
    (st.active_deadline_exceeded, "activeDeadlineSeconds", "DeadlineExceeded", "active"),
    (
        st.pre_running_deadline_exceeded,
        "preRunningDeadlineSeconds",
        "PreRunningDeadlineExceeded",
        "preRunning",
    ),
]


@pytest.mark.parametrize(("check", "key", "reason", "label"), DEADLINES)
@pytest.mark.parametrize(
    ("deadline", "started", "now", "want"),
    [
        (None, True, T0 + 10_000, False),  # no deadline, never
        (10, True, T0 + 9, False),
        (10, True, T0 + 10, True),  # counted from startTime, inclusive
        (5, True, T0 + 5, True),
        (5, False, T0 + 10_000, False),  # no startTime: counts from now
        (0, False, T0, True),
    ],
)
def test_deadlines_count_from_start_time(
    check: Any,
    key: str,
    reason: str,
    label: str,
    deadline: int | None,
    started: bool,
    now: float,
    want: bool,
) -> None:
    spec = {} if deadline is None else {key: deadline}
    obj = job(spec, jobDeploymentStatus="Running") if started else bare(spec)
    assert check(obj, now) is want
    if want:
        assert obj["status"]["jobDeploymentStatus"] == "Failed"
        assert obj["status"]["reason"] == reason
        assert obj["status"]["message"] == (
            f"The RayJob has passed the {label}DeadlineSeconds. StartTime: "
            f"{st.go_time(obj['status'].get('startTime'))}. {label[0].upper()}{label[1:]}"
            f"DeadlineSeconds: {deadline}"
        )
    else:
        assert "reason" not in obj["status"]


@pytest.mark.parametrize(
    ("ray_status", "info", "now", "want"),
    [
        ("SUCCEEDED", {"endTime": S0}, T0 + 299, None),
        ("SUCCEEDED", {"endTime": S0}, T0 + 300, "Complete"),
        ("FAILED", {"endTime": S0}, T0 + 299, None),
        ("FAILED", {"endTime": S0}, T0 + 300, "Failed"),
        ("STOPPED", {"endTime": S0}, T0 + 300, "Complete"),
        ("RUNNING", {"endTime": S0}, T0 + 10_000, None),  # not terminal
        ("SUCCEEDED", {}, T0 + 10_000, None),  # an older status without endTime
        ("SUCCEEDED", None, T0 + 10_000, None),
    ],
)
def test_transition_grace_period_forces_the_deployment_status(
    ray_status: str, info: dict[str, Any] | None, now: float, want: str | None
) -> None:
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running", rayJobInfo=info)
    assert st.transition_grace_exceeded(obj, now, 300.0) is (want is not None)
    assert obj["status"]["jobDeploymentStatus"] == (want or "Running")
    if want:
        assert obj["status"]["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"
        assert obj["status"]["message"] == (
            "JobDeploymentStatus does not transition to Complete or Failed within the grace "
            "period after JobStatus reaches a terminal state."
        )


def test_go_time_prints_a_status_time_as_go_prints_a_metav1_time() -> None:
    assert st.go_time("2026-12-02T12:44:12Z") == "2026-12-02 12:44:12 +0000 UTC"
    assert st.go_time(None) == "<nil>"


@pytest.mark.parametrize(
    ("ray_status", "finished_at", "now", "want"),
    [
        ("RUNNING", T0, T0 + 29, False),
        ("RUNNING", None, T0 + 100, False),  # the submitter has not finished
        ("RUNNING", T0, T0 + 30, True),
        ("PENDING", T0, T0 + 31, True),
        ("SUCCEEDED", T0, T0 + 10_000, False),  # the Ray job did end
        ("FAILED", T0, T0 + 10_000, False),
    ],
)
def test_submitter_finished_without_terminal_job_fails_after_30s(
    ray_status: str, finished_at: float | None, now: float, want: bool
) -> None:
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running")
    assert st.submitter_finished_timeout(obj, finished_at, now, 30.0) is want
    if want:
        assert obj["status"]["jobStatus"] == "FAILED"
        assert obj["status"]["jobDeploymentStatus"] == "Failed"
        assert obj["status"]["reason"] == "JobDeploymentStatusTransitionGracePeriodExceeded"
        assert obj["status"]["message"] == (
            f"The RayJob submitter finished at {S0.replace('T', ' ').rstrip('Z')} but the ray "
            "job did not reach terminal state within 30s"
        )
    else:
        assert (obj["status"]["jobStatus"], obj["status"]["jobDeploymentStatus"]) == (
            ray_status,
            "Running",
        )


def test_status_check_timer_keeps_the_first_failure() -> None:
    obj = job(jobDeploymentStatus="Running")
    st.status_check_failed(obj, T0 + 50)
    first = obj["status"]["jobStatusCheckFailureStartTime"]
    assert first == rfc3339(T0 + 50)
    st.status_check_failed(obj, T0 + 60)
    assert obj["status"]["jobStatusCheckFailureStartTime"] == first, "only the first failure"


@pytest.mark.parametrize(
    ("since", "now", "want"),
    [
        (rfc3339(T0 + 50), T0 + 349, False),
        (rfc3339(T0 + 50), T0 + 350, True),
        (None, T0 + 10_000, False),  # the dashboard has always answered
        ("not a time", T0 + 10_000, False),
    ],
)
def test_status_check_timeout(since: str | None, now: float, want: bool) -> None:
    obj = job(jobDeploymentStatus="Running")
    if since is not None:
        obj["status"]["jobStatusCheckFailureStartTime"] = since
    assert st.status_check_timed_out(obj, now, 300.0) is want
    assert obj["status"]["jobDeploymentStatus"] == ("Failed" if want else "Running")
    if want:
        assert obj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
        assert obj["status"]["message"] == (
            "Failed to get the Ray job status from the dashboard for more than 300 seconds"
        )


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
        ("AppFailed", 0, 0, "Failed"),
    ],
)
def test_backoff_limit(reason: str, failed_before: int, limit: int | None, want: str) -> None:
    spec = {} if limit is None else {"backoffLimit": limit}
    obj = job(spec, jobDeploymentStatus="Failed", reason=reason, failed=failed_before)
    st.check_backoff_limit(obj)
    assert obj["status"]["jobDeploymentStatus"] == want
    assert obj["status"]["failed"] == failed_before + 1
    assert obj["status"]["succeeded"] == 0


@pytest.mark.parametrize(
    ("deployment", "ray_status", "before", "want"),
    [
        ("Complete", "SUCCEEDED", {"succeeded": 2}, (3, 0)),
        ("Complete", "STOPPED", {"succeeded": 2}, (2, 0)),  # only a success counts
        ("Running", "RUNNING", {}, (0, 0)),  # counters appear, unchanged
        ("Running", "RUNNING", {"failed": 1, "succeeded": 1}, (1, 1)),
    ],
)
def test_counters(
    deployment: str, ray_status: str, before: dict[str, int], want: tuple[int, int]
) -> None:
    obj = job({"backoffLimit": 3}, jobDeploymentStatus=deployment, jobStatus=ray_status, **before)
    st.check_backoff_limit(obj)
    assert (obj["status"]["succeeded"], obj["status"]["failed"]) == want
    assert obj["status"]["jobDeploymentStatus"] == deployment


# ---------------------------------------------------------------------------- submitter
def submitter(
    cond_type: str, reason: str = "BackoffLimitExceeded", status: str = "True", at: bool = True
) -> dict[str, Any]:
    cond = {
        "type": cond_type,
        "status": status,
        "reason": reason,
        "message": "Job has reached the specified backoff limit",
    }
    if at:
        cond["lastTransitionTime"] = S0
    return {"metadata": {"name": "j"}, "status": {"conditions": [cond]}}


@pytest.mark.parametrize(
    ("ray_status", "reason"), [("RUNNING", "SubmissionFailed"), ("FAILED", "AppFailed")]
)
def test_failed_submitter_job(ray_status: str, reason: str) -> None:
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running")
    assert st.check_submitter_job(obj, submitter("Failed"), T0 + 5) == (True, T0)
    assert obj["status"]["jobDeploymentStatus"] == "Failed"
    assert obj["status"]["reason"] == reason
    assert obj["status"]["message"] == (
        "Job submission has failed. Reason: BackoffLimitExceeded. "
        "Message: Job has reached the specified backoff limit"
    )


@pytest.mark.parametrize(
    ("observed", "want"),
    [
        (submitter("Complete", ""), (False, T0)),
        (submitter("Complete", "", at=False), (False, T0 + 5)),  # no time: finished now
        (submitter("Failed", status="False"), (False, None)),  # not a final condition
        (submitter("Suspended"), (False, None)),
        ({"metadata": {"name": "j"}}, (False, None)),  # no status yet
        (None, (False, None)),  # not created yet
    ],
)
def test_submitter_job_outcome(
    observed: dict[str, Any] | None, want: tuple[bool, float | None]
) -> None:
    obj = job(jobDeploymentStatus="Running")
    assert st.check_submitter_job(obj, observed, T0 + 5) == want
    assert obj["status"]["jobDeploymentStatus"] == "Running"


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


DONE = {"terminated": {"exitCode": 0, "finishedAt": S0}}
CRASHED = {"terminated": {"exitCode": 2, "finishedAt": S0, "reason": "Error"}}
CRASHED_NO_TIME = {"terminated": {"exitCode": 2, "reason": "Error"}}
RUNNING: dict[str, Any] = {"running": {}}


@pytest.mark.parametrize(
    ("ray_status", "head", "restart", "want", "reason", "message"),
    [
        ("RUNNING", None, False, (True, None), "AppFailed", "Ray head pod not found."),
        ("RUNNING", head_pod(DONE), False, (False, T0), None, None),
        (
            "RUNNING",
            head_pod(CRASHED),
            False,
            (True, T0),
            "SubmissionFailed",
            "Ray head pod container ray-job-submitter terminated with exit code 2: Error",
        ),
        (
            "FAILED",
            head_pod(CRASHED),
            False,
            (True, T0),
            "AppFailed",
            "Ray head pod container ray-job-submitter terminated with exit code 2: Error",
        ),
        (
            "RUNNING",
            head_pod(CRASHED_NO_TIME),
            False,
            (True, T0 + 7),
            "SubmissionFailed",
            "Ray head pod container ray-job-submitter terminated with exit code 2: Error",
        ),
        ("RUNNING", head_pod(RUNNING), False, (False, None), None, None),
        # SidecarSubmitterRestart: the kubelet restarts a failed submitter ...
        ("RUNNING", head_pod(CRASHED, restarts=1), True, (False, None), None, None),
        ("RUNNING", head_pod(DONE, restarts=1), True, (False, T0), None, None),
        # ... until it has restarted too often.
        (
            "RUNNING",
            head_pod(RUNNING, restarts=2),
            True,
            (True, T0 + 7),
            "SubmissionFailed",
            "Ray head pod container ray-job-submitter restarted 2 times",
        ),
        ("RUNNING", head_pod(RUNNING, restarts=2), False, (False, None), None, None),
        (
            "RUNNING",
            {"metadata": {"name": "h"}, "status": {"containerStatuses": []}},
            False,
            (False, None),
            None,
            None,
        ),
    ],
)
def test_sidecar_checks(
    ray_status: str,
    head: dict[str, Any] | None,
    restart: bool,
    want: tuple[bool, float | None],
    reason: str | None,
    message: str | None,
) -> None:
    obj = job(jobStatus=ray_status, jobDeploymentStatus="Running", rayClusterName="c")
    assert st.check_sidecar(obj, head, T0 + 7, restart) == want
    assert obj["status"]["jobDeploymentStatus"] == ("Failed" if want[0] else "Running")
    assert obj["status"].get("reason") == reason
    assert obj["status"].get("message") == message


# ---------------------------------------------------------------------------- Running
@pytest.mark.parametrize(
    ("old", "new", "keeps_old"),
    [
        (
            {"state": "ready", "lastUpdateTime": "a"},
            {"state": "ready", "lastUpdateTime": "b"},
            True,
        ),
        ({"state": "", "lastUpdateTime": "a"}, {"state": "ready", "lastUpdateTime": "b"}, False),
        (None, {"state": "ready"}, False),
        ({}, {}, True),
    ],
)
def test_cluster_status_copy_ignores_last_update_time(
    old: dict[str, Any] | None, new: dict[str, Any], keeps_old: bool
) -> None:
    obj = job(rayClusterStatus=old) if old is not None else job()
    got = st.cluster_status_copy(obj, {"status": new})
    assert got == ((old or {}) if keeps_old else new)
    assert got is not new, "always a copy"
    assert got is not old


@pytest.mark.parametrize(("finished_at", "fails"), [(None, False), (T0, True)])
def test_ray_job_missing(finished_at: float | None, fails: bool) -> None:
    obj = job(jobStatus="PENDING", jobDeploymentStatus="Running")
    st.ray_job_missing(obj, finished_at)
    assert obj["status"]["jobDeploymentStatus"] == ("Failed" if fails else "Running")
    if fails:
        assert obj["status"]["reason"] == "AppFailed"
        assert obj["status"]["message"] == (
            "Submitter completed but Ray job not found in RayCluster."
        )


@pytest.mark.parametrize(
    ("mode", "ray_status", "finished_at", "reason_before", "want", "reason"),
    [
        ("HTTPMode", "RUNNING", None, None, "Running", None),
        ("HTTPMode", "SUCCEEDED", None, None, "Complete", None),
        ("HTTPMode", "STOPPED", None, None, "Complete", None),
        ("HTTPMode", "FAILED", None, None, "Failed", "AppFailed"),
        ("InteractiveMode", "SUCCEEDED", None, None, "Complete", None),
        # the submitter's logs must be complete before the RayJob ends
        ("K8sJobMode", "SUCCEEDED", None, None, "Running", None),
        ("K8sJobMode", "SUCCEEDED", T0, None, "Complete", None),
        ("SidecarMode", "FAILED", None, None, "Running", None),
        ("SidecarMode", "FAILED", T0, None, "Failed", "AppFailed"),
        ("HTTPMode", "RUNNING", None, "Earlier", "Running", "Earlier"),  # kept
        ("HTTPMode", "FAILED", None, "Earlier", "Failed", "AppFailed"),
    ],
)
def test_apply_job_info(
    mode: str,
    ray_status: str,
    finished_at: float | None,
    reason_before: str | None,
    want: str,
    reason: str | None,
) -> None:
    before: dict[str, Any] = {"jobStatusCheckFailureStartTime": S0}
    if reason_before:
        before["reason"] = reason_before
    obj = job(jobDeploymentStatus="Running", jobStatus="PENDING", **before)
    info = JobInfo(submission_id="s", status=ray_status, message="the message")
    st.apply_job_info(obj, info, mode, finished_at)
    status = obj["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == (want, ray_status)
    assert status.get("reason") == reason
    assert status["message"] == "the message"
    assert status["rayJobInfo"] == {}
    assert "jobStatusCheckFailureStartTime" not in status, "the dashboard answered"


def test_apply_job_info_copies_ray_times_in_milliseconds() -> None:
    obj = job(jobDeploymentStatus="Running")
    ms = int(T0 * 1000)
    info = JobInfo(submission_id="s", status="SUCCEEDED", start_time=ms, end_time=ms + 61_000)
    st.apply_job_info(obj, info, "HTTPMode", None)
    assert obj["status"]["rayJobInfo"] == {"startTime": S0, "endTime": rfc3339(T0 + 61)}


# ---------------------------------------------------------------------------- Suspending/Retrying
@pytest.mark.parametrize(("state", "want"), [("Suspending", "Suspended"), ("Retrying", "")])
def test_reset_attempt_forgets_the_attempt(state: str, want: str) -> None:
    obj = job(
        jobDeploymentStatus=state,
        jobStatus="FAILED",
        rayClusterName="c",
        dashboardURL="c-head-svc:8265",
        jobId="j-1",
        message="m",
        reason="AppFailed",
        jobStatusCheckFailureStartTime=S0,
        rayClusterStatus={"state": "ready"},
        rayJobInfo={"endTime": S0},
        failed=1,
    )
    st.reset_attempt(obj)
    assert obj["status"] == {
        "startTime": S0,
        "failed": 1,
        "rayClusterStatus": {},
        "rayJobInfo": {},
        "jobStatus": "",
        "jobDeploymentStatus": want,
    }


# ---------------------------------------------------------------------------- cleanup timing
@pytest.mark.parametrize(
    ("end", "ttl", "now", "want"),
    [
        (S0, 60.0, T0 + 10, 50.0),
        (S0, 60.0, T0 + 60, 0.0),
        (S0, 0.0, T0 + 5, -5.0),
        (None, 30.0, T0 + 999, 30.0),  # no endTime: counted from now
    ],
)
def test_ttl_wait(end: str | None, ttl: float, now: float, want: float) -> None:
    obj = job() if end is None else job(endTime=end)
    assert st.ttl_wait(obj, ttl, now) == want


@pytest.mark.parametrize(("wait", "want"), [(0.5, 2), (10.0, 12), (10.9, 12)])
def test_requeue_for_adds_slack(wait: float, want: int) -> None:
    assert st.requeue_for(wait) == want


@pytest.mark.parametrize(
    ("ray_status", "strategy", "want"),
    [
        ("SUCCEEDED", {"onSuccess": {"policy": "DeleteSelf"}}, "DeleteSelf"),
        ("FAILED", {"onFailure": {"policy": "DeleteWorkers"}}, "DeleteWorkers"),
        ("STOPPED", {"onFailure": {"policy": "DeleteCluster"}}, "DeleteCluster"),
        ("SUCCEEDED", {"onFailure": {"policy": "DeleteCluster"}}, "DeleteNone"),
        ("FAILED", {"onFailure": {}}, "DeleteNone"),
        ("FAILED", {}, "DeleteNone"),
    ],
)
def test_legacy_policy(ray_status: str, strategy: dict[str, Any], want: str) -> None:
    assert st.legacy_policy(job(jobStatus=ray_status), strategy) == want


def rule(policy: str, ttl: int = 0, **condition: str) -> dict[str, Any]:
    return {"policy": policy, "condition": {"ttlSeconds": ttl, **condition}}


@pytest.mark.parametrize(
    ("rules", "now", "cluster_deleted", "workers_deleted", "want"),
    [
        ([], T0, False, False, (None, None)),
        ([rule("DeleteCluster", jobStatus="SUCCEEDED")], T0, False, False, ("DeleteCluster", None)),
        ([rule("DeleteCluster", jobStatus="FAILED")], T0, False, False, (None, None)),
        (
            [rule("DeleteSelf", jobDeploymentStatus="Complete")],
            T0,
            False,
            False,
            ("DeleteSelf", None),
        ),
        ([rule("DeleteSelf", jobDeploymentStatus="Failed")], T0, False, False, (None, None)),
        # jobStatus decides when both are given
        (
            [rule("DeleteSelf", jobStatus="FAILED", jobDeploymentStatus="Complete")],
            T0,
            False,
            False,
            (None, None),
        ),
        # already taken effect: neither run again nor waited for
        ([rule("DeleteCluster", 60, jobStatus="SUCCEEDED")], T0, True, False, (None, None)),
        ([rule("DeleteWorkers", 60, jobStatus="SUCCEEDED")], T0, False, True, (None, None)),
        ([rule("DeleteWorkers", jobStatus="SUCCEEDED")], T0, True, False, ("DeleteWorkers", None)),
        # the most thorough due policy wins; the nearest pending one sets the wait
        (
            [
                rule("DeleteWorkers", jobStatus="SUCCEEDED"),
                rule("DeleteSelf", jobStatus="SUCCEEDED"),
                rule("DeleteCluster", jobStatus="SUCCEEDED"),
                rule("DeleteNone", jobStatus="SUCCEEDED"),
            ],
            T0,
            False,
            False,
            ("DeleteSelf", None),
        ),
        (
            [
                rule("DeleteWorkers", jobStatus="SUCCEEDED"),
                rule("DeleteCluster", 300, jobStatus="SUCCEEDED"),
                rule("DeleteSelf", 100, jobStatus="SUCCEEDED"),
            ],
            T0 + 40,
            False,
            False,
            ("DeleteWorkers", 60.0),
        ),
        (
            [rule("DeleteSelf", 100, jobStatus="SUCCEEDED")],
            T0 + 100,
            False,
            False,
            ("DeleteSelf", None),
        ),
        ([{"condition": {"jobStatus": "SUCCEEDED"}}], T0, False, False, ("DeleteNone", None)),
    ],
)
def test_due_deletion(
    rules: list[dict[str, Any]],
    now: float,
    cluster_deleted: bool,
    workers_deleted: bool,
    want: tuple[str | None, float | None],
) -> None:
    obj = job(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete", endTime=S0)
    got = st.due_deletion(
        obj, rules, now, cluster_deleted=cluster_deleted, workers_deleted=workers_deleted
    )
    assert got == want


@pytest.mark.parametrize(
    ("cluster", "want"),
    [
        (None, True),
        ({"spec": {}}, True),
        ({"spec": {"workerGroupSpecs": [{"suspend": True}, {"suspend": True}]}}, True),
        ({"spec": {"workerGroupSpecs": [{"suspend": True}, {}]}}, False),
    ],
)
def test_workers_suspended(cluster: dict[str, Any] | None, want: bool) -> None:
    assert st.workers_suspended(cluster) is want


# ---------------------------------------------------------------------------- status write
@pytest.mark.parametrize(
    ("before", "after", "stamps_end"),
    [
        ("Running", "Complete", True),
        ("Running", "Failed", True),
        ("Initializing", "Failed", True),
        ("Failed", "Failed", False),  # already ended: endTime stays
        ("Running", "Retrying", False),
        ("Running", "Running", False),
    ],
)
def test_prepare_write_stamps_end_time_once(before: str, after: str, stamps_end: bool) -> None:
    obj = job(jobDeploymentStatus=after)
    old = {**job(jobDeploymentStatus=before)["status"]}
    assert st.prepare_write(obj, old, None, T0 + 9)
    assert obj["status"].get("endTime") == (rfc3339(T0 + 9) if stamps_end else None)
    assert obj["status"]["observedGeneration"] == 3


def test_prepare_write_skips_a_conditions_only_change() -> None:
    obj = job(jobDeploymentStatus="Running", observedGeneration=3)
    old = {**obj["status"]}
    assert not st.prepare_write(obj, old, None, T0), "conditions alone never warrant a write"
    assert obj["status"]["conditions"], "but they are computed"
    obj["status"]["jobStatus"] = "RUNNING"
    assert st.prepare_write(obj, old, None, T0)


@pytest.mark.parametrize(
    ("before", "after", "failed", "started", "want"),
    [
        ("Running", "Complete", 0, S0, ("Complete", 0, 42.0)),
        ("Running", "Failed", 2, S0, ("Failed", 2, 42.0)),
        ("Running", "Retrying", 1, S0, ("Retrying", 1, 42.0)),
        ("Initializing", "Failed", 0, None, ("Failed", 0, 0.0)),  # no startTime: 0 s
        ("Failed", "Failed", 0, S0, None),
        ("Complete", "Retrying", 0, S0, None),  # an ended attempt is not reported twice
        ("Retrying", "Retrying", 0, S0, None),
        ("Running", "Running", 0, S0, None),
        ("Running", "Suspending", 0, S0, None),
    ],
)
def test_attempt_end(
    before: str,
    after: str,
    failed: int,
    started: str | None,
    want: tuple[str, int, float] | None,
) -> None:
    obj = job(jobDeploymentStatus=after, failed=failed + 1)
    if started is None:
        del obj["status"]["startTime"]
    old = {"jobDeploymentStatus": before, "failed": failed}
    assert st.attempt_end(obj, old, T0 + 42) == want


# ---------------------------------------------------------------------------- conditions
STALLED_CLUSTER = {
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


@pytest.mark.parametrize(
    ("state", "cluster", "want"),
    [
        (
            "Initializing",
            None,
            ("False", "RayClusterNotFound", "The RayCluster does not exist yet"),
        ),
        (
            "Initializing",
            {"status": {"state": "ready"}},
            ("True", "RayClusterReady", "The RayCluster is ready"),
        ),
        (
            "Initializing",
            STALLED_CLUSTER,
            (
                "False",
                "RayClusterPodsProvisioning",
                "RayCluster Pods are being provisioned for first time; pod x: "
                "Unschedulable: 0/4 nodes are available",
            ),
        ),
        (
            "Initializing",
            {"status": {}},
            ("False", "RayClusterNotReady", "Waiting for the RayCluster"),
        ),
        ("Running", None, ("True", "RayClusterReady", "The RayCluster is ready")),
        ("Waiting", None, ("True", "RayClusterReady", "The RayCluster is ready")),
        ("Suspended", None, ("False", "Suspended", "No RayCluster for this attempt yet")),
        ("Retrying", None, ("False", "Retrying", "No RayCluster for this attempt yet")),
        ("", None, ("False", "New", "No RayCluster for this attempt yet")),
        ("Suspending", None, None),
        ("Complete", None, None),
        ("Failed", None, None),
        ("ValidationFailed", None, None),
    ],
)
def test_cluster_ready(
    state: str, cluster: dict[str, Any] | None, want: tuple[str, str, str] | None
) -> None:
    assert st.cluster_ready(state, cluster) == want


def by_type(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_conditions_carry_the_cluster_stall_reason_while_initializing() -> None:
    obj = job(jobDeploymentStatus="Initializing")
    st.set_conditions(obj, STALLED_CLUSTER, T0)
    ready = by_type(obj)["ClusterReady"]
    assert ready["status"] == "False"
    assert ready["reason"] == "RayClusterPodsProvisioning"
    assert "Unschedulable" in ready["message"]
    assert ready["observedGeneration"] == 3
    st.set_conditions(obj, None, T0)
    ready = by_type(obj)["ClusterReady"]
    assert ready["reason"] == "RayClusterNotFound"
    assert ready["lastTransitionTime"] == S0


@pytest.mark.parametrize(
    ("state", "reason", "message", "want"),
    [
        # state -> {type: (status, reason, message)}
        (
            "Complete",
            "",
            "done",
            {
                "Complete": ("True", "JobSucceeded", "done"),
                "Failed": ("False", "Complete", ""),
                "Suspended": ("False", "NotSuspended", ""),
            },
        ),
        (
            "Complete",
            "JobDeploymentStatusTransitionGracePeriodExceeded",
            "late",
            {"Complete": ("True", "JobDeploymentStatusTransitionGracePeriodExceeded", "late")},
        ),
        (
            "Failed",
            "AppFailed",
            "boom",
            {"Failed": ("True", "AppFailed", "boom"), "Complete": ("False", "Failed", "")},
        ),
        ("Failed", "", "", {"Failed": ("True", "Failed", "")}),
        (
            "ValidationFailed",
            "ValidationFailed",
            "bad",
            {"Failed": ("True", "ValidationFailed", "bad"), "Complete": ("False", "Failed", "")},
        ),
        (
            "Suspended",
            "",
            "",
            {
                "Suspended": ("True", "Suspended", ""),
                "Complete": ("False", "Suspended", ""),
                "Failed": ("False", "Suspended", ""),
            },
        ),
        ("", "", "", {"Complete": ("False", "New", ""), "Failed": ("False", "New", "")}),
        (
            "Running",
            "",
            "",
            {"Complete": ("False", "Running", ""), "Failed": ("False", "Running", "")},
        ),
    ],
)
def test_outcome_conditions(
    state: str, reason: str, message: str, want: dict[str, tuple[str, str, str]]
) -> None:
    obj = job(jobDeploymentStatus=state, reason=reason, message=message)
    st.set_conditions(obj, None, T0)
    got = {t: (c["status"], c["reason"], c["message"]) for t, c in by_type(obj).items()}
    for ctype, expected in want.items():
        assert got[ctype] == expected, ctype
    if st.cluster_ready(state, None) is None:
        assert "ClusterReady" not in got


def test_conditions_for_terminal_and_suspended_states() -> None:
    obj = job(jobDeploymentStatus="Failed", reason="AppFailed", message="boom")
    st.set_conditions(obj, None, T0)
    conds = by_type(obj)
    assert conds["Failed"]["status"] == "True"
    assert (conds["Failed"]["reason"], conds["Failed"]["message"]) == ("AppFailed", "boom")
    assert conds["Complete"]["status"] == "False"
    obj["status"]["jobDeploymentStatus"] = "Suspended"
    st.set_conditions(obj, None, T0 + 5)
    conds = by_type(obj)
    assert conds["Suspended"]["status"] == "True"
    assert conds["Failed"]["status"] == "False"
    assert conds["Failed"]["lastTransitionTime"] == rfc3339(T0 + 5)


def test_condition_transition_time_moves_only_when_the_status_flips() -> None:
    obj = job(jobDeploymentStatus="Running")
    st.set_conditions(obj, None, T0)
    obj["metadata"]["generation"] = 4
    obj["status"]["jobDeploymentStatus"] = "Waiting"
    st.set_conditions(obj, None, T0 + 30)
    conds = by_type(obj)
    assert conds["ClusterReady"]["lastTransitionTime"] == S0, "still True"
    assert conds["Complete"]["reason"] == "Waiting", "reason follows even without a flip"
    assert conds["Complete"]["lastTransitionTime"] == S0
    assert {c["observedGeneration"] for c in conds.values()} == {4}
    del obj["metadata"]["generation"]
    fresh = job(jobDeploymentStatus="Running")
    del fresh["metadata"]["generation"]
    st.set_conditions(fresh, None, T0)
    assert all("observedGeneration" not in c for c in fresh["status"]["conditions"])


# ---------------------------------------------------------------------------- dashboard URL
@pytest.mark.parametrize(
    ("apiserver", "want"),
    [
        (None, "http://job-abcde-head-svc.team.svc.cluster.local:8265"),
        (
            "https://10.0.0.1:6443",
            "https://10.0.0.1:6443/api/v1/namespaces/team/services/job-abcde-head-svc:dashboard/proxy",
        ),
    ],
)
def test_dashboard_base_url_direct_and_through_the_api_server_proxy(
    apiserver: str | None, want: str
) -> None:
    url = "job-abcde-head-svc.team.svc.cluster.local:8265"
    assert dashboard_base_url(url, "team", apiserver) == want
