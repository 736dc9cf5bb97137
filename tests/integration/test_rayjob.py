"""RayJob controller on the real plane (KWOK) with the in-process fake Ray dashboard.

The operator runs in the test's event loop (a Manager with the RayCluster and RayJob
controllers, watching only the test's namespace) so the fake dashboard can be injected. What
the cluster side would do is simulated where KWOK cannot: the K8sJobMode submitter's effect
(submit-if-absent with the Job's submission id) happens when the operator creates the Job, and
the SidecarMode submitter's effect when the head pod is created.

The crash test runs a RayJob to completion through many operator "lives", each ended abruptly
after a few API writes (before or after the write lands), and checks that one Ray job was
started per submission id, that ids and cluster names were persisted before they were used, and
that the final status is right.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kuberay.api.constants import RAYCLUSTERS
from kuberay.api.features import FeatureGates
from kuberay.controllers.crd_metrics import RayJobMetrics
from kuberay.controllers.raycluster import RayClusterConfig
from kuberay.controllers.raycluster import register as register_raycluster
from kuberay.controllers.raycronjob import RAYCRONJOBS, RayCronJobConfig
from kuberay.controllers.raycronjob import register as register_raycronjob
from kuberay.controllers.rayjob import RAYJOBS, RayJobConfig
from kuberay.controllers.rayjob import register as register_rayjob
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    condition,
    reconcile_trace,
    wait_for,
    wait_gone,
    wait_until,
)
from kuberay.ray.dashboard import JobInfo, JobSubmitRequest
from kuberay.ray.fake import FakeDashboardRegistry
from kuberay.runtime.client import JOBS, PODS, SERVICES, KubeClient, Resource, load_kubeconfig
from kuberay.runtime.errors import ApiError, NotFound
from kuberay.runtime.events import EVENTS_V1
from kuberay.runtime.manager import Manager, ManagerOptions

WRITES = ("POST", "PUT", "PATCH", "DELETE")


def cluster_spec(workers: int = 1) -> dict[str, Any]:
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.52.0",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    }
    worker = copy.deepcopy(container)
    worker["name"] = "ray-worker"
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 10,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def rayjob(name: str, entrypoint: str = "sleep 1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"entrypoint": entrypoint, "rayClusterSpec": cluster_spec()}
    body.update(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name}, "spec": body}


def deployment(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("jobDeploymentStatus") or "")


class Crash(Exception):
    """The simulated operator process is dead: nothing it does reaches the outside any more."""


class Budget:
    """How many outside effects (API writes, job submissions) this operator life may make."""

    def __init__(self, writes: int | None = None, *, after: bool = False) -> None:
        self.left = writes
        self.after = after  # True: the last allowed write lands, then the process dies
        self.dead = False
        self.on_crash: Callable[[], None] = lambda: None

    def crash(self) -> None:
        if not self.dead:
            self.dead = True
            self.on_crash()

    def before(self) -> bool:
        """Call before an effect; returns True when the process dies right after it."""
        if self.dead:
            raise Crash()
        if self.left is None:
            return False
        if self.left <= 0:
            self.crash()
            raise Crash()
        self.left -= 1
        return self.left == 0 and self.after


Hook = Callable[[str, str, Any, Any], Awaitable[None]]


class LifeClient(KubeClient):
    """The operator's API client for one life: counts writes against the budget and lets the
    test observe them (to play the cluster's part and to check invariants)."""

    def __init__(self, plane: Plane, budget: Budget, hooks: list[Hook]) -> None:
        config = load_kubeconfig(plane.kubeconfig)
        config.qps = 0
        super().__init__(config, user_agent="kuberay-rayjob-test")
        self.budget = budget
        self.hooks = hooks

    async def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        write = method in WRITES and "/events" not in path
        if self.budget.dead:
            raise Crash()
        last = False
        if write:
            last = self.budget.before()
            for hook in self.hooks:
                await hook("before", method, path, body)
        result = await super().request(method, path, body, **kwargs)
        if write:
            for hook in self.hooks:
                await hook("after", method, path, result)
        if last:
            self.budget.crash()
            raise Crash()
        return result


class GatedDashboard:
    """A dashboard client that dies with its operator life; submissions count as effects."""

    def __init__(self, inner: Any, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget

    def _alive(self) -> None:
        if self.budget.dead:
            raise Crash()

    async def submit_job(self, request: JobSubmitRequest) -> str:
        last = self.budget.before()
        out: str = await self.inner.submit_job(request)
        if last:
            self.budget.crash()
            raise Crash()
        return out

    async def get_job_info(self, submission_id: str) -> JobInfo | None:
        self._alive()
        info: JobInfo | None = await self.inner.get_job_info(submission_id)
        self._alive()
        return info

    async def list_jobs(self) -> list[JobInfo]:
        self._alive()
        return list(await self.inner.list_jobs())

    async def get_job_logs(self, submission_id: str) -> str | None:
        self._alive()
        out: str | None = await self.inner.get_job_logs(submission_id)
        return out

    async def stop_job(self, submission_id: str) -> bool:
        self.budget.before()
        return bool(await self.inner.stop_job(submission_id))

    async def delete_job(self, submission_id: str) -> bool:
        self.budget.before()
        return bool(await self.inner.delete_job(submission_id))

    async def get_serve_details(self) -> dict[str, Any]:
        raise NotImplementedError

    async def update_serve_config(self, config: dict[str, Any]) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        await self.inner.close()


class Operator:
    """An in-process operator (RayCluster + RayJob controllers) for one namespace, which can be
    started and 'killed' repeatedly; the fake dashboards outlive it, as Ray clusters do."""

    def __init__(
        self,
        plane: Plane,
        kube: KubeClient,
        namespace: str,
        *,
        gates: FeatureGates | None = None,
        **config: Any,
    ) -> None:
        self.plane = plane
        self.kube = kube
        self.namespace = namespace
        self.registry = FakeDashboardRegistry(time_scale=1.0)
        self.gates = gates or FeatureGates()
        self.config = {"requeue_seconds": 0.5, **config}
        self.hooks: list[Hook] = [self._play_submitters]
        self.budget = Budget()
        self.client: LifeClient | None = None
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[int] | None = None
        self.lives = 0
        self.job_metrics = RayJobMetrics()
        # Every submitter Job the operator created, across lives: (name, uid). Each is one
        # submitter pod run on a real cluster.
        self.submitter_jobs: list[tuple[str, str]] = []
        self.trace = reconcile_trace()

    def dashboard(self, cluster: str) -> Any:
        return self.registry.get(
            f"http://{cluster}-head-svc.{self.namespace}.svc.cluster.local:8265"
        )

    async def start(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.client = LifeClient(self.plane, self.budget, self.hooks)
        mgr = Manager(
            self.client,
            ManagerOptions(metrics_addr=None, probe_addr=None, leader_election=False),
        )
        register_raycluster(mgr, RayClusterConfig(gates=self.gates), [self.namespace])
        budget_now = self.budget

        def factory(base_url: str, *, auth_token: str | None = None) -> Any:
            return GatedDashboard(self.registry(base_url, auth_token=auth_token), budget_now)

        config = RayJobConfig(gates=self.gates, **self.config)
        jobs = register_rayjob(mgr, config, [self.namespace], factory)
        self.job_metrics = RayJobMetrics(jobs.rayjobs)
        jobs.on_attempt_end = self.job_metrics.observe_execution
        if self.gates.enabled("RayCronJob"):
            register_raycronjob(mgr, RayCronJobConfig(gates=self.gates), [self.namespace])
        self.stop_event = asyncio.Event()
        self.budget.on_crash = self.stop_event.set
        self.task = asyncio.create_task(mgr.run(self.stop_event))
        self.lives += 1
        waiter = asyncio.create_task(mgr.leading.wait())
        done, _ = await asyncio.wait({waiter, self.task}, timeout=30, return_when="FIRST_COMPLETED")
        if waiter not in done:
            waiter.cancel()
            raise AssertionError("operator did not start")

    async def stop(self) -> None:
        if self.task is not None:
            self.budget.crash()
            with contextlib.suppress(Crash, asyncio.CancelledError):
                await asyncio.wait_for(self.task, 30)
            self.task = None
        if self.client is not None:
            await self.client.close()
            self.client = None

    async def _play_submitters(self, when: str, method: str, path: str, obj: Any) -> None:
        """Plays the cluster's part once the operator created a submitter Job or a head pod
        with the sidecar: as upstream's submitter script, it checks ``ray job status <id>``
        and submits only when the id is absent. Every Job created is recorded, so a second
        submitter (a retry of the submission) is seen even though it submits nothing."""
        if when != "after" or method != "POST" or not isinstance(obj, dict):
            return
        if path.startswith("/apis/batch/v1/"):
            self.submitter_jobs.append((obj["metadata"]["name"], obj["metadata"]["uid"]))
            container = obj["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            url = "http://" + str(env["RAY_DASHBOARD_ADDRESS"])
            entrypoint = container["args"][0].split(" -- ", 1)[1].split(" ; fi ;")[0]
            await self._submit_if_absent(url, str(env["RAY_JOB_SUBMISSION_ID"]), entrypoint)
        elif path.endswith("/pods"):
            labels = obj["metadata"].get("labels") or {}
            for container in obj["spec"]["containers"]:
                if container["name"] != "ray-job-submitter":
                    continue
                env = {e["name"]: e.get("value") for e in container.get("env") or []}
                entrypoint = container["args"][0].split(" -- ", 1)[1]
                await self._submit_if_absent(
                    self.dashboard(labels["ray.io/cluster"]).base_url,
                    str(env["RAY_JOB_SUBMISSION_ID"]),
                    entrypoint,
                )

    async def _submit_if_absent(self, url: str, job_id: str, entrypoint: str) -> None:
        fake = self.registry.get(url)
        if job_id not in fake.jobs:
            await fake.submit_job(JobSubmitRequest(entrypoint=entrypoint, submission_id=job_id))


@pytest.fixture(scope="module")
async def crds(kube: KubeClient) -> None:
    from operator_fixture import install_crds

    await install_crds(kube)


@pytest.fixture
async def operator(
    plane: Plane, kube: KubeClient, namespace: str, crds: None
) -> AsyncIterator[Operator]:
    op = Operator(plane, kube, namespace)
    await op.start()
    yield op
    await op.stop()
    # Let the namespace go: nothing will remove our finalizer any more.
    for item in (await kube.list(RAYJOBS, namespace))["items"]:
        with contextlib.suppress(ApiError):
            await kube.patch(
                RAYJOBS, item["metadata"]["name"], {"metadata": {"finalizers": []}}, namespace
            )


async def wait_job(
    kube: KubeClient,
    ns: str,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 45,
) -> dict[str, Any]:
    return await wait_for(kube, RAYJOBS, name, ns, predicate, timeout=timeout, what=what)


async def wait_state(
    kube: KubeClient, ns: str, name: str, state: str, timeout: float = 45
) -> dict[str, Any]:
    return await wait_job(kube, ns, name, lambda o: deployment(o) == state, state, timeout)


async def events_of(kube: KubeClient, ns: str, name: str) -> list[str]:
    items = (await kube.list(EVENTS_V1, ns))["items"]
    return [e["reason"] for e in items if e["regarding"]["name"] == name]


async def exists(kube: KubeClient, res: Resource, name: str, ns: str) -> bool:
    try:
        obj = await kube.get(res, name, ns)
    except NotFound:
        return False
    return not obj["metadata"].get("deletionTimestamp")


# --------------------------------------------------------------------------- modes


async def test_k8s_job_mode_runs_to_complete_and_shuts_down(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    job = rayjob("k8s", shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=0)
    await kube.create(RAYJOBS, job, namespace)
    obj = await wait_job(
        kube, namespace, "k8s", lambda o: bool(o.get("status", {}).get("jobId")), "ids"
    )
    status = obj["status"]
    assert obj["metadata"]["finalizers"] == ["ray.io/rayjob-finalizer"]
    assert status["jobId"].startswith("k8s-")
    assert len(status["jobId"]) == len("k8s-") + 5
    assert status["rayClusterName"].startswith("k8s-")
    assert status["startTime"]
    cluster_name = status["rayClusterName"]
    cluster = await wait_for(kube, RAYCLUSTERS, cluster_name, namespace, lambda _: True)
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "K8sJobMode"
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    obj = await wait_state(kube, namespace, "k8s", "Complete")
    status = obj["status"]
    assert status["jobStatus"] == "SUCCEEDED"
    assert status["succeeded"] == 1
    assert status["failed"] == 0
    assert status["dashboardURL"] == f"{cluster_name}-head-svc.{namespace}.svc.cluster.local:8265"
    assert status["endTime"]
    job_svc = await kube.get(SERVICES, "k8s-head-svc", namespace)
    # Upstream's labels exactly (none of the cluster's), the cluster's head pod as selector.
    assert job_svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "k8s",
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/node-type": "head",
        "ray.io/identifier": "k8s-head",
    }
    assert job_svc["spec"]["selector"]["ray.io/cluster"] == cluster_name
    assert job_svc["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert status["rayJobInfo"]["startTime"]
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    submitter = await kube.get(JOBS, "k8s", namespace)
    assert submitter["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    args = submitter["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert f"--submission-id {status['jobId']}" in args
    await wait_gone(kube, RAYCLUSTERS, cluster_name, namespace)
    assert await exists(kube, JOBS, "k8s", namespace), "the submitter Job is kept for its logs"
    assert operator.dashboard(cluster_name).jobs_started[status["jobId"]] == 1
    reasons = await events_of(kube, namespace, "k8s")
    assert {"CreatedRayCluster", "CreatedRayJobSubmitter", "DeletedRayCluster"} <= set(reasons)


async def test_http_mode_resubmits_on_404_and_fails_app(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    await kube.create(
        RAYJOBS, rayjob("web", "sleep 3; exit 1", submissionMode="HTTPMode"), namespace
    )
    obj = await wait_state(kube, namespace, "web", "Running")
    status = obj["status"]
    fake = operator.dashboard(status["rayClusterName"])
    await wait_until(lambda: _async(status["jobId"] in fake.jobs), what="HTTP submission")
    assert not await exists(kube, JOBS, "web", namespace), "no submitter Job in HTTPMode"
    # The dashboard forgets the job (head restarted without GCS FT): it is submitted again.
    fake.set_job_status(status["jobId"], "STOPPED")
    await fake.delete_job(status["jobId"])
    await wait_until(lambda: _async(fake.submissions[status["jobId"]] >= 2), what="resubmission")
    obj = await wait_state(kube, namespace, "web", "Failed")
    assert obj["status"]["reason"] == "AppFailed"
    assert obj["status"]["jobStatus"] == "FAILED"
    assert "exit code 1" in obj["status"]["message"]
    assert obj["status"]["failed"] == 1
    failed = condition(obj, "Failed")
    if failed is not None:  # only when the installed CRD carries status.conditions
        assert failed["status"] == "True"
        assert failed["reason"] == "AppFailed"


async def _async(value: bool) -> bool:
    return value


async def test_sidecar_mode(kube: KubeClient, namespace: str, operator: Operator) -> None:
    await kube.create(RAYJOBS, rayjob("side", submissionMode="SidecarMode"), namespace)
    obj = await wait_state(kube, namespace, "side", "Running")
    cluster_name = obj["status"]["rayClusterName"]
    cluster = await kube.get(RAYCLUSTERS, cluster_name, namespace)
    assert cluster["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    heads = (
        await kube.list(
            PODS, namespace, label_selector=f"ray.io/cluster={cluster_name},ray.io/node-type=head"
        )
    )["items"]
    head = heads[0]
    assert head["spec"]["restartPolicy"] == "Never"
    assert [c["name"] for c in head["spec"]["containers"]][-1] == "ray-job-submitter"
    submitter = head["spec"]["containers"][-1]
    # As v1.7.0: the address env is the (then unknown) dashboardURL, the wait loop names the
    # loopback address it submits to, and the plain submit ends with " ;".
    env = {e["name"]: e.get("value") for e in submitter["env"]}
    assert env["RAY_DASHBOARD_ADDRESS"] is None
    assert env["RAY_JOB_SUBMISSION_ID"] == obj["status"]["jobId"]
    assert "healthy at http://127.0.0.1:8265 ..." in submitter["args"][0]
    assert submitter["args"][0].endswith(" ;")
    assert not await exists(kube, JOBS, "side", namespace)
    # The job finishes (the fake runs "sleep 1"), but the sidecar has not exited yet: once a
    # reconcile that started after the job ended has finished, the RayJob is still Running.
    fake = operator.dashboard(cluster_name)
    job_id = obj["status"]["jobId"]
    await wait_until(
        lambda: _async(job_id in fake.jobs and fake.job_status(job_id) == "SUCCEEDED"),
        what="the Ray job to succeed",
    )
    ended = operator.trace.mark()
    await operator.trace.wait_reconciled("rayjob", namespace, "side", after=ended)
    assert deployment(await kube.get(RAYJOBS, "side", namespace)) == "Running"
    statuses = copy.deepcopy(head["status"]["containerStatuses"])
    for cs in statuses:
        if cs["name"] == "ray-job-submitter":
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            cs["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}}
    await kube.patch(
        PODS,
        head["metadata"]["name"],
        {"status": {"containerStatuses": statuses}},
        namespace,
        content_type="application/strategic-merge-patch+json",
        subresource="status",
    )
    obj = await wait_state(kube, namespace, "side", "Complete")
    assert obj["status"]["jobStatus"] == "SUCCEEDED"


async def test_interactive_mode_waits_for_job_id(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    await kube.create(RAYJOBS, rayjob("chat", submissionMode="InteractiveMode"), namespace)
    obj = await wait_state(kube, namespace, "chat", "Waiting")
    assert not obj["status"].get("jobId")
    fake = operator.dashboard(obj["status"]["rayClusterName"])
    await fake.submit_job(JobSubmitRequest(entrypoint="sleep 0.5", submission_id="mine"))
    await kube.patch(RAYJOBS, "chat", {"spec": {"jobId": "mine"}}, namespace)
    obj = await wait_state(kube, namespace, "chat", "Complete")
    assert obj["status"]["jobId"] == "mine"
    assert obj["status"]["jobStatus"] == "SUCCEEDED"
    assert fake.submissions["mine"] == 1, "the operator never submits in InteractiveMode"


async def test_cluster_selector_uses_existing_cluster(
    kube: KubeClient, namespace: str, operator: Operator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kuberay.runtime.controller")
    await kube.create(
        RAYCLUSTERS,
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared"},
         "spec": cluster_spec()},
        namespace,
    )  # fmt: skip
    job = rayjob("sel", clusterSelector={"ray.io/cluster": "shared"})
    del job["spec"]["rayClusterSpec"]
    await kube.create(RAYJOBS, job, namespace)
    obj = await wait_state(kube, namespace, "sel", "Complete")
    assert obj["status"]["rayClusterName"] == "shared"
    assert obj["status"]["rayClusterStatus"]["state"] == "ready"
    # A reconcile that saw the job Complete has finished: it would have deleted the cluster.
    await operator.trace.wait_processed("rayjob", "rayjobs", obj)
    assert await exists(kube, RAYCLUSTERS, "shared", namespace), "never deleted"
    assert not await exists(kube, SERVICES, "sel-head-svc", namespace)

    missing = rayjob("lost", clusterSelector={"ray.io/cluster": "nope"})
    del missing["spec"]["rayClusterSpec"]
    await kube.create(RAYJOBS, missing, namespace)

    async def not_found_event() -> bool:
        return "RayClusterNotFound" in await events_of(kube, namespace, "lost")

    await wait_until(not_found_event, timeout=20, what="RayClusterNotFound event")
    assert deployment(await kube.get(RAYJOBS, "lost", namespace)) == "Initializing"

    def failures() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "kuberay.runtime.controller" and f"{namespace}/lost" in r.getMessage()
        ]

    async def logged() -> bool:
        return bool(failures())

    await wait_until(logged, timeout=20, what="the failed reconcile logged")
    # An expected API error is one line with the server's words, never a traceback.
    for record in failures():
        assert record.exc_info is None, record.getMessage()
        assert "\n" not in record.getMessage()
        assert "not found" in record.getMessage()


# --------------------------------------------------------------------------- lifecycle


async def test_kueue_flow_created_suspended_resumed_and_suspended_while_running(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    job = rayjob("kq", "sleep 60", suspend=True, shutdownAfterJobFinishes=True)
    await kube.create(RAYJOBS, job, namespace)
    obj = await wait_state(kube, namespace, "kq", "Suspended")
    assert not obj["status"].get("rayClusterName")
    assert not obj["status"].get("jobId")
    assert (await kube.list(RAYCLUSTERS, namespace))["items"] == []
    await kube.patch(RAYJOBS, "kq", {"spec": {"suspend": False}}, namespace)
    obj = await wait_state(kube, namespace, "kq", "Running")
    first_cluster, first_id = obj["status"]["rayClusterName"], obj["status"]["jobId"]
    assert await exists(kube, JOBS, "kq", namespace)
    # Kueue preempts: everything is torn down atomically and the status reset.
    await kube.patch(RAYJOBS, "kq", {"spec": {"suspend": True}}, namespace)
    obj = await wait_state(kube, namespace, "kq", "Suspended")
    status = obj["status"]
    assert not status.get("rayClusterName")
    assert not status.get("jobId")
    assert status["jobStatus"] == ""
    assert not status.get("dashboardURL")
    await wait_gone(kube, RAYCLUSTERS, first_cluster, namespace)
    await wait_gone(kube, JOBS, "kq", namespace)
    await kube.patch(RAYJOBS, "kq", {"spec": {"suspend": False}}, namespace)
    obj = await wait_state(kube, namespace, "kq", "Running")
    assert obj["status"]["rayClusterName"] != first_cluster
    assert obj["status"]["jobId"] != first_id


async def test_backoff_limit_retries_with_new_cluster_and_keeps_counters(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    await kube.create(
        RAYJOBS, rayjob("retry", "exit 3", submissionMode="HTTPMode", backoffLimit=1), namespace
    )
    seen: set[tuple[str, str]] = set()

    def track(o: dict[str, Any]) -> bool:
        s = o.get("status") or {}
        if s.get("rayClusterName") and s.get("jobId"):
            seen.add((s["rayClusterName"], s["jobId"]))
        return deployment(o) == "Failed"

    obj = await wait_job(kube, namespace, "retry", track, "Failed after retries", timeout=60)
    assert obj["status"]["failed"] == 2
    assert obj["status"]["succeeded"] == 0
    assert len({c for c, _ in seen}) == 2, seen
    assert len({j for _, j in seen}) == 2, seen
    # One execution-duration series per attempt, labelled with the failures before it.
    registry = CollectorRegistry()
    registry.register(operator.job_metrics)
    uid = obj["metadata"]["uid"]
    attempts = sorted(
        (sample.labels["job_deployment_status"], sample.labels["retry_count"])
        for family in registry.collect()
        if family.name == "kuberay_job_execution_duration_seconds"
        for sample in family.samples
        if sample.labels["uid"] == uid and sample.value > 0
    )
    assert attempts == [("Failed", "1"), ("Retrying", "0")]
    text = generate_latest(registry).decode()
    ident = f'name="retry",namespace="{namespace}",uid="{uid}"'
    assert f'kuberay_job_deployment_status{{deployment_status="Failed",{ident}}} 1.0' in text


async def test_active_deadline_is_not_retried(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    job = rayjob("slow", "sleep 600", submissionMode="HTTPMode", activeDeadlineSeconds=4)
    job["spec"]["backoffLimit"] = 2
    await kube.create(RAYJOBS, job, namespace)
    obj = await wait_state(kube, namespace, "slow", "Failed")
    assert obj["status"]["reason"] == "DeadlineExceeded"
    assert obj["status"]["failed"] == 1
    assert "activeDeadlineSeconds" in obj["status"]["message"]


async def test_pre_running_deadline_with_stall_reason_in_conditions(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    job = rayjob("stuck", preRunningDeadlineSeconds=6)
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["resources"] = {"limits": {"cpu": "9999", "memory": "1Gi"}}  # unschedulable
    await kube.create(RAYJOBS, job, namespace)

    # The RayCluster's stall reason reaches the RayJob while it is Initializing: in the
    # copied rayClusterStatus (upstream's field) and in the ClusterReady condition (ours).
    def stalled(o: dict[str, Any]) -> bool:
        copied = (o.get("status") or {}).get("rayClusterStatus") or {}
        provisioned = condition({"status": copied}, "RayClusterProvisioned") or {}
        return deployment(o) == "Initializing" and "Unschedulable" in str(
            provisioned.get("message")
        )

    obj = await wait_job(kube, namespace, "stuck", stalled, "stall reason", timeout=20)
    ready = condition(obj, "ClusterReady")
    if ready is not None:  # only when the installed CRD carries status.conditions
        assert ready["status"] == "False"
        assert "Unschedulable" in ready["message"]
    obj = await wait_state(kube, namespace, "stuck", "Failed")
    assert obj["status"]["reason"] == "PreRunningDeadlineExceeded"


async def test_deletion_rules_delete_workers_then_cluster(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    rules = [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 3}},
    ]
    job = rayjob("rules", "sleep 0.5", deletionStrategy={"deletionRules": rules})
    await kube.create(RAYJOBS, job, namespace)
    obj = await wait_state(kube, namespace, "rules", "Complete")
    name = obj["status"]["rayClusterName"]
    cluster = await wait_for(
        kube,
        RAYCLUSTERS,
        name,
        namespace,
        lambda o: all(g.get("suspend") for g in o["spec"]["workerGroupSpecs"]),
        what="workers suspended",
        timeout=20,
    )
    assert cluster["metadata"].get("deletionTimestamp") is None
    await wait_gone(kube, RAYCLUSTERS, name, namespace, timeout=20)


async def test_legacy_deletion_policy_delete_self(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    strategy = {"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {"policy": "DeleteNone"}}
    await kube.create(RAYJOBS, rayjob("selfdel", "sleep 0.5", deletionStrategy=strategy), namespace)
    await wait_gone(kube, RAYJOBS, "selfdel", namespace, timeout=45)


async def test_delete_rayjob_cr_after_job_finishes_env(
    plane: Plane, kube: KubeClient, namespace: str, crds: None
) -> None:
    """DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true: after the TTL the RayJob itself is deleted."""
    op = Operator(plane, kube, namespace, delete_rayjob_after_finishes=True)
    await op.start()
    try:
        job = rayjob(
            "bye",
            "sleep 0.5",
            submissionMode="HTTPMode",
            shutdownAfterJobFinishes=True,
            # Long enough that a poll on a loaded machine still sees Complete before deletion.
            ttlSecondsAfterFinished=4,
        )
        await kube.create(RAYJOBS, job, namespace)
        obj = await wait_state(kube, namespace, "bye", "Complete")
        await wait_gone(kube, RAYJOBS, "bye", namespace, timeout=20)
        assert obj["status"]["endTime"]
    finally:
        await op.stop()


async def test_deleting_a_running_job_stops_it(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    await kube.create(RAYJOBS, rayjob("del", "sleep 600", submissionMode="HTTPMode"), namespace)
    obj = await wait_state(kube, namespace, "del", "Running")
    fake = operator.dashboard(obj["status"]["rayClusterName"])
    job_id = obj["status"]["jobId"]
    await wait_until(lambda: _async(job_id in fake.jobs), what="submission")
    await kube.delete(RAYJOBS, "del", namespace)
    await wait_gone(kube, RAYJOBS, "del", namespace)
    assert fake.job_status(job_id) == "STOPPED"


async def test_validation_failed_and_managed_by(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    await kube.create(RAYJOBS, rayjob("bad", suspend=True), namespace)
    obj = await wait_state(kube, namespace, "bad", "ValidationFailed", timeout=20)
    assert obj["status"]["reason"] == "ValidationFailed"
    assert "not allowed to be suspended" in obj["status"]["message"]
    assert "InvalidRayJobSpec" in await events_of(kube, namespace, "bad")
    created = await kube.create(
        RAYJOBS, rayjob("mk", managedBy="kueue.x-k8s.io/multikueue"), namespace
    )
    # The operator reconciled the new RayJob (and left it alone).
    await operator.trace.wait_processed("rayjob", "rayjobs", created)
    obj = await kube.get(RAYJOBS, "mk", namespace)
    assert not obj.get("status")
    assert not obj["metadata"].get("finalizers")


async def test_status_check_timeout(
    plane: Plane, kube: KubeClient, namespace: str, crds: None
) -> None:
    op = Operator(plane, kube, namespace, status_check_timeout_seconds=3.0)
    await op.start()
    try:
        await kube.create(
            RAYJOBS, rayjob("blind", "sleep 600", submissionMode="HTTPMode"), namespace
        )
        obj = await wait_state(kube, namespace, "blind", "Running")
        fake = op.dashboard(obj["status"]["rayClusterName"])
        await wait_until(lambda: _async(bool(fake.jobs)), what="submission")
        fake.down = True
        obj = await wait_job(
            kube,
            namespace,
            "blind",
            lambda o: bool(o["status"].get("jobStatusCheckFailureStartTime")),
            "failure start time",
        )
        obj = await wait_state(kube, namespace, "blind", "Failed")
        assert obj["status"]["reason"] == "JobStatusCheckTimeoutExceeded"
    finally:
        await op.stop()
        with contextlib.suppress(ApiError):
            await kube.patch(RAYJOBS, "blind", {"metadata": {"finalizers": []}}, namespace)


# --------------------------------------------------------------------------- RayCronJob


async def test_raycronjob_creates_rayjobs_on_schedule(
    plane: Plane, kube: KubeClient, namespace: str, crds: None
) -> None:
    op = Operator(plane, kube, namespace, gates=FeatureGates({"RayCronJob": True}))
    await op.start()
    try:
        template = rayjob("x", "sleep 0.5", submissionMode="HTTPMode")["spec"]
        cron = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCronJob",
            "metadata": {"name": "tick"},
            "spec": {"schedule": "@every 2s", "timeZone": "Europe/Berlin", "jobTemplate": template},
        }
        await kube.create(RAYCRONJOBS, cron, namespace)
        obj = await wait_for(
            kube,
            RAYCRONJOBS,
            "tick",
            namespace,
            lambda o: bool((o.get("status") or {}).get("lastScheduleTime")),
            what="lastScheduleTime",
        )
        children = (await kube.list(RAYJOBS, namespace, label_selector="ray.io/cronjob-name=tick"))[
            "items"
        ]
        assert children
        child = children[0]
        scheduled = child["metadata"]["annotations"]["ray.io/cronjob-scheduled-timestamp"]
        assert child["metadata"]["ownerReferences"][0]["kind"] == "RayCronJob"
        assert obj["status"]["lastScheduleTime"] >= scheduled
        await wait_state(kube, namespace, child["metadata"]["name"], "Complete")
        await kube.patch(RAYCRONJOBS, "tick", {"spec": {"suspend": True}}, namespace)

        async def suspended_event() -> bool:
            return "SuspendedRayCronJob" in await events_of(kube, namespace, "tick")

        await wait_until(suspended_event, timeout=20, what="SuspendedRayCronJob event")
    finally:
        await op.stop()
        for item in (await kube.list(RAYJOBS, namespace))["items"]:
            with contextlib.suppress(ApiError):
                await kube.patch(
                    RAYJOBS, item["metadata"]["name"], {"metadata": {"finalizers": []}}, namespace
                )


# --------------------------------------------------------------------------- crash safety


@pytest.mark.parametrize(
    ("mode", "writes", "after"),
    [
        ("HTTPMode", 1, True),
        ("HTTPMode", 2, False),
        ("K8sJobMode", 1, True),
        ("K8sJobMode", 2, False),
        ("K8sJobMode", 3, False),
    ],
)
async def test_crash_at_every_write_never_submits_twice(
    plane: Plane,
    kube: KubeClient,
    namespace: str,
    crds: None,
    mode: str,
    writes: int,
    after: bool,
) -> None:
    """Each operator life may make ``writes`` outside effects; with ``after`` the last one lands
    and the process dies before it sees the answer, otherwise it dies just before it."""
    op = Operator(plane, kube, namespace)
    violations: list[str] = []

    async def check_intent(when: str, method: str, path: str, body: Any) -> None:
        """Before a cluster or submitter is created, its names must already be in status."""
        if when != "before" or method != "POST" or not isinstance(body, dict):
            return
        if "/rayclusters" not in path and not path.startswith("/apis/batch/v1/"):
            return
        status = (await kube.get(RAYJOBS, "safe", namespace)).get("status") or {}
        if "/rayclusters" in path and body["metadata"]["name"] != status.get("rayClusterName"):
            violations.append(f"cluster {body['metadata']['name']} created before persisted")
        if path.startswith("/apis/batch/v1/"):
            env = body["spec"]["template"]["spec"]["containers"][0]["env"]
            job_id = next(e["value"] for e in env if e["name"] == "RAY_JOB_SUBMISSION_ID")
            if job_id != status.get("jobId"):
                violations.append(f"submitter for {job_id} created before persisted")

    op.hooks.append(check_intent)
    await kube.create(
        RAYJOBS, rayjob("safe", "sleep 1", submissionMode=mode, shutdownAfterJobFinishes=True),
        namespace,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    final: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline:
            await op.start(Budget(writes, after=after))
            with contextlib.suppress(asyncio.TimeoutError, Crash):
                await asyncio.wait_for(op.stop_event.wait(), timeout=4)
            await op.stop()
            final = await kube.get(RAYJOBS, "safe", namespace)
            if deployment(final) == "Complete":
                break
        else:  # pragma: no cover
            pytest.fail(f"not complete after {op.lives} lives: {final.get('status')}")
        # One more calm life: the cluster is cleaned up and nothing changes the result.
        await op.start()
        name = final["status"]["rayClusterName"]
        await wait_gone(kube, RAYCLUSTERS, name, namespace, timeout=30)
        await op.stop()
    finally:
        await op.stop()
        with contextlib.suppress(ApiError):
            await kube.patch(RAYJOBS, "safe", {"metadata": {"finalizers": []}}, namespace)
    status = (await kube.get(RAYJOBS, "safe", namespace))["status"]
    assert status["jobDeploymentStatus"] == "Complete"
    assert status["jobStatus"] == "SUCCEEDED"
    assert status["succeeded"] == 1
    assert status["failed"] == 0
    assert violations == []
    started = {
        (url, sid): n
        for url, fake in op.registry.dashboards.items()
        for sid, n in fake.jobs_started.items()
    }
    assert list(started.values()) == [1], started
    assert op.registry.total_jobs_started(status["jobId"]) == 1
    if mode == "HTTPMode":
        fake = op.registry.matching(status["rayClusterName"])
        assert fake.submissions[status["jobId"]] == 1, "the operator submitted once"
        assert op.submitter_jobs == []
    else:
        # The played submitter never submits an id twice, as upstream's script checks first;
        # so count the submitter runs themselves: one Job was ever created, and it is the one
        # still there, not being deleted (nor deleted and made again).
        assert len(op.submitter_jobs) == 1, op.submitter_jobs
        job = await kube.get(JOBS, "safe", namespace)
        assert op.submitter_jobs == [("safe", job["metadata"]["uid"])]
        assert not job["metadata"].get("deletionTimestamp"), "the submitter Job was deleted"
    print(f"{mode} writes={writes} after={after}: complete after {op.lives} operator lives")
    assert op.lives > 3, "the run really was interrupted"
