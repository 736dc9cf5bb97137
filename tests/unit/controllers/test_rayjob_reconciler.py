"""The RayJob reconciler built without a manager: what it reads from its caches, hands to the
status functions and writes back. The client and recorder are small fakes; the caches are the
reconciler's own standalone ``ResourceCache``s, their informers' stores filled by hand."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kuberay.api import features
from kuberay.api.features import FeatureGates
from kuberay.controllers import rayjob as rj
from kuberay.controllers.common import rfc3339
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import KubeClient
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.events import EventRecorder

T0 = 1_700_000_000.0


class Client:
    def __init__(self) -> None:
        self.status_writes: list[dict[str, Any]] = []

    async def update_status(self, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Records the body; answers it at the next resourceVersion, as the server does."""
        self.status_writes.append(body)
        rv = str(int(body["metadata"]["resourceVersion"]) + 1)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": rv}}


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str = "") -> None:
        self.reasons.append(reason)


def reconciler(
    client: Client | None = None,
    gates: FeatureGates | None = None,
    now: float = T0,
    recorder: Recorder | None = None,
) -> rj.RayJobReconciler:
    config = rj.RayJobConfig(gates=gates or FeatureGates(), clock=lambda: now)
    return rj.RayJobReconciler(
        cast(KubeClient, client or Client()),
        config,
        lambda *a, **k: None,  # type: ignore[arg-type]
        cast(EventRecorder, recorder),
    )


def fill(cache: ResourceCache, *objs: dict[str, Any]) -> None:
    """Puts ``objs`` into the cache as if its informer had listed them."""
    for obj in objs:
        cache.informers[0].store.upsert(obj)


def job(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "generation": 1, "resourceVersion": "7"},
        "spec": {},
        "status": {"startTime": rfc3339(T0), **status},
    }


def test_a_reconciler_needs_no_manager() -> None:
    r = reconciler()
    caches = (r.rayjobs, r.clusters, r.services, r.jobs, r.pods)
    assert [cache.list() for cache in caches] == [[], [], [], [], []]
    assert [inf.namespace for cache in caches for inf in cache.informers] == [None] * 5
    assert r.services.informers[0].label_selector == rj.SERVICE_SELECTOR
    assert r.controller is None
    assert r.now() == T0


def submitter_job(cond_type: str) -> dict[str, Any]:
    cond = {"type": cond_type, "status": "True", "lastTransitionTime": rfc3339(T0 - 5)}
    return {"metadata": {"name": "j", "namespace": "ns"}, "status": {"conditions": [cond]}}


@pytest.mark.parametrize(
    ("cached", "want"),
    [
        ([submitter_job("Complete")], (False, T0 - 5)),
        ([submitter_job("Failed")], (True, T0 - 5)),
        ([], (False, None)),
    ],
)
def test_k8s_job_mode_reads_the_cached_submitter(
    cached: list[dict[str, Any]], want: tuple[bool, float | None]
) -> None:
    r = reconciler()
    fill(r.jobs, *cached)
    assert r.check_submitter(job(jobDeploymentStatus="Running"), "K8sJobMode") == want


def pod(name: str, node_type: str, state: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "labels": {"ray.io/cluster": "c", "ray.io/node-type": node_type},
    }
    if deleting:
        meta["deletionTimestamp"] = rfc3339(T0)
    statuses = [{"name": "ray-job-submitter", "state": state, "restartCount": 3}]
    return {"metadata": meta, "status": {"containerStatuses": statuses}}


DONE = {"terminated": {"exitCode": 0, "finishedAt": rfc3339(T0 - 1)}}
RUNNING: dict[str, Any] = {"running": {}}


@pytest.mark.parametrize(
    ("pods", "restart", "want"),
    [
        ([pod("h", "head", DONE)], False, (False, T0 - 1)),
        ([pod("w", "worker", DONE)], False, (True, None)),  # a worker is not the head
        ([pod("h", "head", DONE, deleting=True)], False, (True, None)),  # going away
        ([pod("h", "head", RUNNING)], False, (False, None)),
        ([pod("h", "head", RUNNING)], True, (True, T0)),  # too many restarts, gate on
    ],
)
def test_sidecar_mode_reads_the_cached_head_pod(
    pods: list[dict[str, Any]], restart: bool, want: tuple[bool, float | None]
) -> None:
    gates = FeatureGates({features.SIDECAR_SUBMITTER_RESTART: restart})
    r = reconciler(gates=gates)
    fill(r.pods, *pods)
    obj = job(jobDeploymentStatus="Running", rayClusterName="c")
    assert r.check_submitter(obj, "SidecarMode") == want


async def test_one_status_write_and_the_attempt_end_is_reported_once() -> None:
    client = Client()
    r = reconciler(client, now=T0 + 30)
    ended: list[tuple[str, int, float]] = []
    r.on_attempt_end = lambda obj, state, retries, seconds: ended.append((state, retries, seconds))
    obj = job(jobDeploymentStatus="Failed", failed=1)
    old = {**obj["status"], "jobDeploymentStatus": "Running", "failed": 0}
    assert await r._write_status(obj, old)
    assert len(client.status_writes) == 1
    written = client.status_writes[0]
    assert written["metadata"]["resourceVersion"] == "7"
    assert written["status"]["endTime"] == rfc3339(T0 + 30)
    assert ended == [("Failed", 0, 30.0)]
    # Nothing but conditions changed: no write, nothing reported.
    assert not await r._write_status(obj, {**obj["status"], "conditions": []})
    assert len(client.status_writes) == 1
    assert len(ended) == 1


async def test_after_its_status_write_a_pass_waits_for_the_watch() -> None:
    """The written status is recorded in the RayJob cache; until the watch delivers that version
    every pass only requeues shortly (it would act on its own write, not on what the watch says
    the object is after it), and then it reconciles again (here: finds the empty spec invalid)."""
    client, recorder = Client(), Recorder()
    r = reconciler(client, now=T0 + 30, recorder=recorder)
    obj = job(jobDeploymentStatus="Failed", failed=1)
    fill(r.rayjobs, obj)
    old = {**obj["status"], "jobDeploymentStatus": "Running", "failed": 0}
    assert await r._write_status(obj, old)
    assert not r.rayjobs.is_fresh("ns", "j")
    assert await r.reconcile(Request("ns", "j")) == Result(requeue_after=0.2)
    assert (len(client.status_writes), recorder.reasons) == (1, [])
    sent = client.status_writes[0]
    delivered = {**sent, "metadata": {**sent["metadata"], "resourceVersion": "8"}}
    r.rayjobs.informers[0]._apply("MODIFIED", delivered)
    assert r.rayjobs.is_fresh("ns", "j")
    assert await r.reconcile(Request("ns", "j")) is None
    assert recorder.reasons == ["InvalidRayJobSpec"]


FAILED_EXIT = {"terminated": {"exitCode": 1, "finishedAt": rfc3339(T0 - 1)}}


@pytest.mark.parametrize(
    ("mode", "state", "cluster_state", "want"),
    [
        ("SidecarMode", FAILED_EXIT, "", "Running"),  # ended before the cluster was ready
        ("SidecarMode", DONE, "", "Running"),
        ("SidecarMode", RUNNING, "", "Initializing"),  # still submitting: wait for ready
        ("K8sJobMode", FAILED_EXIT, "", "Initializing"),  # no sidecar in that mode
        ("SidecarMode", RUNNING, "ready", "Running"),
    ],
)
async def test_initializing_sidecar_job_moves_on_once_its_submitter_ended(
    mode: str, state: dict[str, Any], cluster_state: str, want: str
) -> None:
    r = reconciler()
    cluster = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"headGroupSpec": {}},
        "status": {"state": cluster_state} if cluster_state else {},
    }
    fill(r.clusters, cluster)
    fill(r.pods, pod("h", "head", state))
    obj = job(jobDeploymentStatus="Initializing", rayClusterName="c")
    obj["spec"] = {"submissionMode": mode, "rayClusterSpec": {"headGroupSpec": {}}}
    if mode == "K8sJobMode":
        r._create_submitter_if_needed = _no_submitter  # type: ignore[method-assign]
    assert await r._on_initializing(obj) is None
    assert obj["status"].get("jobDeploymentStatus") == want
    assert bool(obj["status"].get("dashboardURL")) == (want == "Running")


async def _no_submitter(job: dict[str, Any], cluster: dict[str, Any]) -> None:
    return None
