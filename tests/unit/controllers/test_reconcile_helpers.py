"""The shared reconcile preamble, child-write events and dashboard access: what each returns,
raises and records, with the exact event texts users and tests match."""

from __future__ import annotations

import base64
from typing import Any, cast

import pytest

from kuberay.api import constants as c
from kuberay.controllers import dashboards as d
from kuberay.controllers import reconcile as r
from kuberay.ray.dashboard import DashboardClient, DashboardError
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import PODS, KubeClient
from kuberay.runtime.controller import Request
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound, ServerError
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Informer
from kuberay.runtime.store import index_by_label


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str = "") -> None:
        self.events.append((etype, reason, message, action))


def caches(*objs: dict[str, Any]) -> ResourceCache:
    """A cache of two watched namespaces, "other" and "ns", with ``objs`` listed in "ns"."""
    informers = [
        Informer(cast(KubeClient, None), c.RAYJOBS, namespace=ns) for ns in ("other", "ns")
    ]
    for o in objs:
        informers[1].store.upsert(o)
    return ResourceCache(c.RAYJOBS, informers)


def obj(**spec: Any) -> dict[str, Any]:
    meta = {"name": "o", "namespace": "ns", "resourceVersion": "3", "uid": "u"}
    return {"metadata": meta, "spec": {"nested": {"a": 1}, **spec}}


REQ = Request("ns", "o")


# ---------------------------------------------------------------------------- preamble
def test_a_missing_object_is_nothing_to_do() -> None:
    assert r.fetch_working_copy(caches(), REQ, c.KIND_RAYJOB) is None
    assert r.working_copy(None, c.KIND_RAYJOB) is None


@pytest.mark.parametrize(
    ("managed_by", "ours"),
    [
        (None, True),
        (c.MANAGED_BY_KUBERAY, True),
        (c.MANAGED_BY_MULTIKUEUE, False),
        ("someone-else", False),
    ],
)
def test_managed_by_another_controller_is_skipped(managed_by: str | None, ours: bool) -> None:
    cached = obj() if managed_by is None else obj(managedBy=managed_by)
    got = r.fetch_working_copy(caches(cached), REQ, c.KIND_RAYSERVICE)
    assert (got is not None) == ours
    assert r.managed_elsewhere(cached) is not ours
    # A kind without the field (RayCronJob) is reconciled whatever the spec says.
    assert r.working_copy(cached, c.KIND_RAYCRONJOB, honour_managed_by=False) is not None


def test_the_copy_is_isolated_from_the_cache_and_names_its_kind() -> None:
    cached = obj()
    got = r.fetch_working_copy(caches(cached), REQ, c.KIND_RAYJOB, ensure=("spec", "status"))
    assert got is not None
    assert (got["apiVersion"], got["kind"], got["status"]) == (c.API_VERSION, "RayJob", {})
    got["spec"]["nested"]["a"] = 2
    got["metadata"]["labels"] = {"x": "y"}
    assert cached["spec"]["nested"] == {"a": 1}
    assert "labels" not in cached["metadata"]
    assert "status" not in cached
    assert "kind" not in cached


def test_the_copy_is_of_our_own_write_until_the_watch_delivers_it() -> None:
    cache = caches(obj())
    written = obj(nested={"a": 2})
    written["metadata"]["resourceVersion"] = "4"
    cache.record_write(written)
    got = r.fetch_working_copy(cache, REQ, c.KIND_RAYJOB)
    assert got is not None
    assert got["spec"]["nested"] == {"a": 2}
    assert got is not cache.get("ns", "o")


def test_ensure_replaces_a_missing_or_null_section_only() -> None:
    cached = {"metadata": {"name": "o"}, "status": None}
    got = r.working_copy(cached, c.KIND_RAYJOB, ensure=("spec", "status"))
    assert got is not None
    assert got["spec"] == {}
    assert got["status"] == {}
    kept = r.working_copy({**obj(), "status": {"s": 1}}, c.KIND_RAYJOB, ensure=("status",))
    assert kept is not None
    assert kept["status"] == {"s": 1}


def test_a_deleting_object_is_skipped_only_when_asked() -> None:
    cached = obj()
    cached["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert r.working_copy(cached, c.KIND_RAYCRONJOB, skip_deleting=True) is None
    assert r.working_copy(cached, c.KIND_RAYJOB) is not None


# ---------------------------------------------------------------------------- child writes
def error(cls: type[ApiError], message: str = "boom") -> ApiError:
    return cls(500, {"message": message, "reason": cls.__name__}, "POST", "/x")


async def answer(value: Any = None, exc: BaseException | None = None) -> Any:
    if exc is not None:
        raise exc
    return value


EVENTS = r.child_events(
    "Create", "RayCluster ns/c", c.EVENT_CREATED_RAYCLUSTER, c.EVENT_FAILED_TO_CREATE_RAYCLUSTER
)


async def test_created_records_the_normal_event_and_returns_the_object() -> None:
    rec = Recorder()
    out = await r.write_child(cast(EventRecorder, rec), obj(), EVENTS, answer({"made": 1}))
    assert out == {"made": 1}
    assert rec.events == [("Normal", "CreatedRayCluster", "Created RayCluster ns/c", "Create")]


@pytest.mark.parametrize("cls", [AlreadyExists, Conflict, NotFound])
async def test_a_benign_outcome_is_raised_without_an_event(cls: type[ApiError]) -> None:
    rec = Recorder()
    with pytest.raises(cls):
        await r.write_child(
            cast(EventRecorder, rec),
            obj(),
            EVENTS,
            answer(exc=error(cls)),
            benign=(Conflict, NotFound),
        )
    assert rec.events == []


async def test_a_failure_records_the_warning_with_the_server_message_and_is_raised() -> None:
    rec = Recorder()
    with pytest.raises(ServerError):
        await r.write_child(cast(EventRecorder, rec), obj(), EVENTS, answer(exc=error(ServerError)))
    assert rec.events == [
        ("Warning", "FailedToCreateRayCluster", "Failed to create RayCluster ns/c: boom", "Create")
    ]


async def test_a_conflict_not_named_benign_is_a_failure() -> None:
    rec = Recorder()
    events = r.child_events("Update", "service ns/s", "UpdatedService", "FailedToUpdateService")
    with pytest.raises(Conflict):
        await r.write_child(cast(EventRecorder, rec), obj(), events, answer(exc=error(Conflict)))
    assert [e[:3] for e in rec.events] == [
        ("Warning", "FailedToUpdateService", "Failed to update service ns/s: boom")
    ]


async def test_the_whole_error_text_when_asked_and_none_without_a_reason() -> None:
    rec = Recorder()
    events = r.child_events("Delete", "RayCluster ns/c", "Deleted", "Failed", server_message=False)
    exc = error(ServerError)
    _, problem = await r.try_write_child(cast(EventRecorder, rec), obj(), events, answer(exc=exc))
    assert problem == f"Failed to delete RayCluster ns/c: {exc}"
    assert rec.events == [("Warning", "Failed", problem, "Delete")]
    silent = r.child_events("Create", "service ns/s", "CreatedService", None)
    with pytest.raises(ServerError):
        await r.write_child(cast(EventRecorder, rec), obj(), silent, answer(exc=exc))
    assert len(rec.events) == 1


async def test_try_write_child_returns_the_problem_and_still_raises_benign_outcomes() -> None:
    rec = Recorder()
    ok, problem = await r.try_write_child(cast(EventRecorder, rec), obj(), EVENTS, answer(7))
    assert (ok, problem) == (7, "")
    with pytest.raises(NotFound):
        await r.try_write_child(
            cast(EventRecorder, rec), obj(), EVENTS, answer(exc=error(NotFound)), benign=(NotFound,)
        )
    assert [e[0] for e in rec.events] == ["Normal"]


async def test_dashboard_failures_when_named() -> None:
    rec = Recorder()
    events = r.child_events("Update", "serve applications to the RayCluster ns/c", "U", "F")
    failing = answer(exc=DashboardError("down"))
    _, problem = await r.try_write_child(
        cast(EventRecorder, rec), obj(), events, failing, failures=(DashboardError,)
    )
    assert problem == "Failed to update serve applications to the RayCluster ns/c: down"
    assert rec.events == [("Warning", "F", problem, "Update")]


async def test_other_exceptions_pass_through_without_an_event() -> None:
    rec = Recorder()
    with pytest.raises(RuntimeError):
        await r.write_child(cast(EventRecorder, rec), obj(), EVENTS, answer(exc=RuntimeError()))
    assert rec.events == []


# ---------------------------------------------------------------------------- dashboards
class SecretClient:
    def __init__(self, secret: dict[str, Any] | None) -> None:
        self.secret = secret
        self.reads: list[tuple[str, str | None]] = []

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.reads.append((name, namespace))
        if self.secret is None:
            raise error(NotFound, "secrets not found")
        return self.secret


def access(client: SecretClient, apiserver: str | None = None) -> d.DashboardAccess:
    def factory(base_url: str, *, auth_token: str | None = None) -> DashboardClient:
        return cast(DashboardClient, (base_url, auth_token))

    return d.DashboardAccess(cast(KubeClient, client), factory, apiserver)


TOKEN_SPEC = {"authOptions": {"mode": c.AUTH_MODE_TOKEN}}


async def test_open_without_auth_reads_no_secret() -> None:
    client = SecretClient(None)
    got = await access(client).open("c-head-svc.ns.svc.cluster.local:8265", "ns", {}, "c")
    assert got == ("http://c-head-svc.ns.svc.cluster.local:8265", None)  # type: ignore[comparison-overlap]
    assert client.reads == []


async def test_open_with_a_token_through_the_api_server_proxy() -> None:
    data = {c.AUTH_TOKEN_SECRET_KEY: base64.b64encode(b"s3cret").decode()}
    client = SecretClient({"data": data})
    spec = {"authOptions": {"mode": c.AUTH_MODE_TOKEN, "secretName": "mine"}}
    got = await access(client, "https://api:6443").open("c-head-svc.ns.svc:8265", "ns", spec, "c")
    want = "https://api:6443/api/v1/namespaces/ns/services/c-head-svc:dashboard/proxy"
    assert got == (want, "s3cret")  # type: ignore[comparison-overlap]
    assert client.reads == [("mine", "ns")]


async def test_an_unreadable_secret_is_a_dashboard_error_keeping_the_api_error() -> None:
    client = SecretClient(None)
    with pytest.raises(d.TokenUnreadable) as info:
        await access(client).open("h:8265", "ns", TOKEN_SPEC, "c")
    assert isinstance(info.value, DashboardError)
    assert isinstance(info.value.error, NotFound)
    name = d.auth_secret_name(TOKEN_SPEC, "c")
    assert str(info.value) == f"cannot read the auth token secret {name}: {info.value.error}"
    assert client.reads == [(name, "ns")]


def service(cluster: str, rv: str = "5") -> dict[str, Any]:
    selector = {c.LABEL_CLUSTER: cluster, c.LABEL_NODE_TYPE: "head"}
    return {"metadata": {"name": "s", "resourceVersion": rv}, "spec": {"selector": selector}}


def test_selector_patch_moves_only_the_selector_guarded_by_the_version_read() -> None:
    assert r.selector_patch(service("a"), service("a", rv="9")) is None
    want = service("b")
    assert r.selector_patch(service("a"), want) == {
        "metadata": {"resourceVersion": "5"},
        "spec": {"selector": want["spec"]["selector"]},
    }
    assert r.selector_patch({"metadata": {"resourceVersion": "1"}}, want) is not None


# ---------------------------------------------------------------------------- migrated sites
class DeletingClient:
    """get answers the child; delete answers ``outcome`` (an error to raise, or None)."""

    def __init__(self, outcome: ApiError | None) -> None:
        self.outcome = outcome
        self.deleted: list[tuple[str, str | None, str | None]] = []

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace, "uid": "child-uid"}}

    async def delete(self, res: Any, name: str, namespace: str | None = None, **kw: Any) -> None:
        self.deleted.append((name, namespace, kw.get("uid")))
        if self.outcome is not None:
            raise self.outcome


@pytest.mark.parametrize(
    ("outcome", "gone", "want"),
    [
        (None, False, [("Normal", "DeletedRayCluster", "Deleted cluster ns/c", "Delete")]),
        (error(NotFound), True, []),
        (
            error(ServerError),
            None,
            [
                (
                    "Warning",
                    "FailedToDeleteRayCluster",
                    "Failed to delete cluster ns/c: boom",
                    "Delete",
                )
            ],
        ),
    ],
)
async def test_rayjob_deletes_its_cluster_with_upstreams_events(
    outcome: ApiError | None, gone: bool | None, want: list[tuple[str, str, str, str]]
) -> None:
    from kuberay.controllers import rayjob as rj

    rec, client = Recorder(), DeletingClient(outcome)
    reconciler = rj.RayJobReconciler(
        cast(KubeClient, client),
        rj.RayJobConfig(),
        lambda *a, **k: None,  # type: ignore[arg-type]
        cast(EventRecorder, rec),
    )
    job = {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
        "spec": {},
        "status": {"rayClusterName": "c"},
    }
    if gone is None:
        with pytest.raises(ServerError):
            await reconciler._delete_cluster(job)
    else:
        assert await reconciler._delete_cluster(job) is gone
    assert client.deleted == [("c", "ns", "child-uid")]
    assert rec.events == want


def test_cached_head_pod_skips_workers_and_a_head_being_deleted() -> None:
    def pod(name: str, node_type: str, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": "ns",
            "labels": {c.LABEL_CLUSTER: "c", c.LABEL_NODE_TYPE: node_type},
        }
        if deleting:
            meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return {"metadata": meta}

    informer = Informer(cast(KubeClient, None), PODS)
    informer.store.upsert(pod("w", "worker"))
    informer.store.upsert(pod("old", "head", deleting=True))
    pods = ResourceCache(PODS, [informer])
    pods.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
    assert r.cached_head_pod(pods, "ns", "c") is None
    informer.store.upsert(pod("new", "head"))
    assert (r.cached_head_pod(pods, "ns", "c") or {})["metadata"]["name"] == "new"
    assert r.cached_head_pod(pods, "ns", "other") is None


def test_dashboard_access_follows_the_proxy_setting() -> None:
    from kuberay.controllers.rayjob import RayJobConfig

    direct = d.DashboardAccess.configured(
        cast(KubeClient, None), cast(Any, None), RayJobConfig(apiserver="https://api")
    )
    proxied = d.DashboardAccess.configured(
        cast(KubeClient, None),
        cast(Any, None),
        RayJobConfig(use_kubernetes_proxy=True, apiserver="https://api"),
    )
    assert (direct.apiserver, proxied.apiserver) == (None, "https://api")
