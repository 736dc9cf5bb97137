"""What counts as a NetworkPolicy change: the apiserver's TCP default and labels others add do
not; a spec or label of ours that drifted does. Then the reconciler, built without a manager:
which writes a pass makes and the events they record (texts users match)."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from kuberay.api.constants import RAYCLUSTERS
from kuberay.controllers import networkpolicy as np
from kuberay.controllers.networkpolicy import policy_differs
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.errors import ApiError, error_for
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Informer


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c-head", "labels": {"ray.io/cluster": "c"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], **spec},
    }


def test_missing_protocol_equals_tcp() -> None:
    want = _policy(ingress=[{"ports": [{"port": 8265}]}])
    have = _policy(ingress=[{"ports": [{"port": 8265, "protocol": "TCP"}]}])
    assert not policy_differs(want, have)
    have["spec"]["ingress"][0]["ports"][0]["protocol"] = "UDP"
    assert policy_differs(want, have)


def test_extra_labels_are_kept_but_ours_must_match() -> None:
    want = _policy()
    have = copy.deepcopy(want)
    have["metadata"]["labels"]["team"] = "security"
    assert not policy_differs(want, have)
    have["metadata"]["labels"]["ray.io/cluster"] = "other"
    assert policy_differs(want, have)


def test_mode_change_is_a_difference() -> None:
    assert policy_differs(_policy(), _policy(policyTypes=["Ingress", "Egress"]))


# ---------------------------------------------------------------------------- reconcile
class Client:
    """Records writes; each verb answers with the error named in ``fail``, if any."""

    def __init__(self, existing: dict[str, Any] | None = None, /, **fail: ApiError) -> None:
        self.existing = existing
        self.fail = fail
        self.calls: list[tuple[str, str]] = []

    def _answer(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        if verb in self.fail:
            raise self.fail[verb]

    async def create(self, resource: Any, obj: dict[str, Any], ns: str) -> Any:
        self._answer("create", obj["metadata"]["name"])
        return obj

    async def update(self, resource: Any, obj: dict[str, Any]) -> Any:
        self._answer("update", obj["metadata"]["name"])
        return obj

    async def delete(self, resource: Any, name: str, ns: str, uid: str | None = None) -> Any:
        self._answer("delete", name)
        return {}

    async def get(self, resource: Any, name: str, ns: str) -> Any:
        self._answer("get", name)
        return self.existing


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str = "") -> None:
        self.events.append((etype, reason, message, action))


def _cache(resource: Resource, *objs: dict[str, Any]) -> ResourceCache:
    inf = Informer(cast(KubeClient, None), resource)
    for obj in objs:
        inf.store.upsert(obj)
    return ResourceCache(resource, [inf])


def _cluster(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1", **meta},
        "spec": {
            "networkPolicy": {"mode": "DenyAll"},
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}},
        },
    }


def _owned(name: str, uid: str = "u1", **spec: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": "p-" + name,
        "labels": {"ray.io/cluster": "c"},
        "ownerReferences": [{"uid": uid, "controller": True}],
    }
    return {"metadata": meta, "spec": spec}


def _reconciler(
    client: Client, cluster: dict[str, Any], *policies: dict[str, Any]
) -> tuple[np.NetworkPolicyReconciler, Recorder]:
    recorder = Recorder()
    r = np.NetworkPolicyReconciler(
        cast(KubeClient, client),
        cast(EventRecorder, recorder),
        _cache(RAYCLUSTERS, cluster),
        _cache(np.NETWORKPOLICIES, *policies),
    )
    return r, recorder


def _err(status: int, reason: str) -> ApiError:
    return error_for(status, {"reason": reason, "message": "m"}, "POST", "/x")


REQ = Request("ns", "c")


async def test_a_missing_policy_is_created_and_a_stale_one_deleted() -> None:
    client = Client()
    r, recorder = _reconciler(client, _cluster(), _owned("c-gone"))
    assert await r.reconcile(REQ) is None
    assert r.controller is None
    assert client.calls == [("create", "c-head"), ("delete", "c-gone")]
    assert recorder.events == [
        ("Normal", "CreatedNetworkPolicy", "Created NetworkPolicy ns/c-head", "Create"),
        ("Normal", "DeletedNetworkPolicy", "Deleted NetworkPolicy ns/c-gone", "Delete"),
    ]


async def test_a_deleting_cluster_is_skipped() -> None:
    client = Client()
    r, recorder = _reconciler(client, _cluster(deletionTimestamp="2026-01-01T00:00:00Z"))
    assert await r.reconcile(REQ) is None
    assert (client.calls, recorder.events) == ([], [])


async def test_a_name_taken_by_another_owner_is_a_collision_retried_later() -> None:
    client = Client(_owned("c-head", uid="other"), create=_err(409, "AlreadyExists"))
    r, recorder = _reconciler(client, _cluster())
    assert await r.reconcile(REQ) == Result(requeue_after=np.RETRY_SECONDS)
    assert client.calls == [("create", "c-head"), ("get", "c-head")]
    assert [e[:2] for e in recorder.events] == [("Warning", "NetworkPolicyNameCollision")]
    assert recorder.events[0][2] == (
        "NetworkPolicy ns/c-head exists and is not owned by this RayCluster; "
        "rename or delete it so the cluster can be isolated"
    )


async def test_our_own_earlier_create_is_no_collision() -> None:
    client = Client(_owned("c-head"), create=_err(409, "AlreadyExists"))
    r, recorder = _reconciler(client, _cluster())
    assert await r.reconcile(REQ) is None
    assert recorder.events == []


@pytest.mark.parametrize(
    ("verb", "existing", "reason"),
    [
        ("create", (), "FailedToCreateNetworkPolicy"),
        ("update", (_owned("c-head", podSelector={"x": 1}),), "FailedToUpdateNetworkPolicy"),
        ("delete", (_owned("c-head"), _owned("c-gone")), "FailedToDeleteNetworkPolicy"),
    ],
)
async def test_failed_writes_warn_with_the_server_message(
    verb: str, existing: tuple[dict[str, Any], ...], reason: str
) -> None:
    client = Client(**{verb: _err(403, "Forbidden")})
    r, recorder = _reconciler(client, _cluster(), *existing)
    with pytest.raises(ApiError):
        await r.reconcile(REQ)
    name = client.calls[-1][1]
    message = f"Failed to {verb} NetworkPolicy ns/{name}: m"
    warnings = [e for e in recorder.events if e[0] == "Warning"]
    assert warnings == [("Warning", reason, message, verb.capitalize())]


async def test_benign_outcomes_record_nothing() -> None:
    drifted = _owned("c-head", podSelector={"x": 1})
    for fail in (_err(409, "Conflict"), _err(404, "NotFound")):
        r, recorder = _reconciler(Client(update=fail), _cluster(), drifted)
        with pytest.raises(ApiError):
            await r.reconcile(REQ)
        assert recorder.events == []
    head = copy.deepcopy(drifted)
    r, recorder = _reconciler(Client(delete=_err(404, "NotFound")), _cluster(), head, _owned("x"))
    await r.reconcile(REQ)  # the update goes through; the stale policy was gone already
    assert [e[1] for e in recorder.events] == ["UpdatedNetworkPolicy"]
