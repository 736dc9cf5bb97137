"""Indexed store: index consistency, relist differences, projection, shared values."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from kuberay.api.constants import RAYCLUSTERS
from kuberay.runtime.client import PODS
from kuberay.runtime.informer import Informer
from kuberay.runtime.store import POD_FIELDS, Sharer, Store, index_by_label, project, projector


def _obj(
    name: str, rv: str, ns: str = "a", labels: dict[str, str] | None = None, owner: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "resourceVersion": rv,
        "labels": labels or {},
    }
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "X", "name": "o", "apiVersion": "v1"}]
    return {"metadata": meta}


def test_indexes_follow_label_changes() -> None:
    store = Store()
    store.add_indexer("cluster", index_by_label("ray.io/cluster"))
    store.upsert(_obj("p1", "1", labels={"ray.io/cluster": "c1"}, owner="u1"))
    store.upsert(_obj("p2", "1", labels={"ray.io/cluster": "c1"}))
    assert {o["metadata"]["name"] for o in store.by_index("cluster", "a/c1")} == {"p1", "p2"}
    store.upsert(_obj("p1", "2", labels={"ray.io/cluster": "c2"}, owner="u1"))
    assert [o["metadata"]["name"] for o in store.by_index("cluster", "a/c1")] == ["p2"]
    assert [o["metadata"]["name"] for o in store.by_index("cluster", "a/c2")] == ["p1"]
    assert [o["metadata"]["name"] for o in store.by_index("owner", "u1")] == ["p1"]
    store.delete("a/p1")
    assert store.by_index("cluster", "a/c2") == []
    assert store.by_index("owner", "u1") == []
    assert len(store.by_index("namespace", "a")) == 1


def test_same_label_value_in_two_namespaces_does_not_mix() -> None:
    store = Store()
    store.add_indexer("cluster", index_by_label("ray.io/cluster"))
    store.upsert(_obj("p", "1", ns="a", labels={"ray.io/cluster": "c"}))
    store.upsert(_obj("p", "1", ns="b", labels={"ray.io/cluster": "c"}))
    assert len(store.by_index("cluster", "a/c")) == 1


def test_replace_reports_adds_updates_and_deletions() -> None:
    store = Store()
    for name in ("keep", "change", "gone"):
        store.upsert(_obj(name, "1"))
    added, updated, deleted = store.replace(
        [_obj("keep", "1"), _obj("change", "2"), _obj("new", "1")]
    )
    assert [o["metadata"]["name"] for o in added] == ["new"]
    assert [
        (o["metadata"]["resourceVersion"], n["metadata"]["resourceVersion"]) for o, n in updated
    ] == [("1", "2")]
    assert [o["metadata"]["name"] for o in deleted] == ["gone"]
    assert sorted(store.keys()) == ["a/change", "a/keep", "a/new"]


def test_pod_projection_keeps_what_controllers_read() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "a", "labels": {"x": "1"}, "managedFields": [{}]},
        "spec": {
            "nodeName": "n",
            "restartPolicy": "Never",
            "volumes": [{"name": "v"}],
            "containers": [
                {"name": "ray-head", "image": "ray", "env": [{"name": "A"}], "args": ["x"]}
            ],
        },
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }
    projected = project(pod, POD_FIELDS)
    assert projected["metadata"] == {"name": "p", "namespace": "a", "labels": {"x": "1"}}
    assert projected["spec"] == {
        "nodeName": "n",
        "restartPolicy": "Never",
        "containers": [{"name": "ray-head", "image": "ray"}],
    }
    assert projected["status"] == pod["status"]


def _ray_pod(name: str, ready_at: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "a",
            "labels": {"ray.io/cluster": "rc", "ray.io/group": "g"},
            "ownerReferences": [{"uid": "u1", "kind": "RayCluster", "name": "rc"}],
        },
        "spec": {"containers": [{"name": "ray-worker", "image": "ray", "env": [{"name": "A"}]}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}],
        },
    }


def test_equal_projected_values_are_one_object_across_pods() -> None:
    transform = projector(POD_FIELDS)
    a = transform(_ray_pod("a", "2026-01-01T00:00:00Z"))
    b = transform(_ray_pod("b", "2026-01-01T00:00:00Z"))
    c = transform(_ray_pod("c", "2026-01-01T00:00:09Z"))
    assert a["metadata"]["labels"] is b["metadata"]["labels"] is c["metadata"]["labels"]
    assert a["metadata"]["ownerReferences"] is c["metadata"]["ownerReferences"]
    assert a["spec"]["containers"] is c["spec"]["containers"]
    assert a["spec"]["containers"] == [{"name": "ray-worker", "image": "ray"}]
    assert a["status"]["conditions"] is b["status"]["conditions"]
    assert c["status"]["conditions"] is not a["status"]["conditions"]
    assert c["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:09Z"
    # Names stay per pod, and the projection equals the unshared one.
    assert a["metadata"]["name"] == "a"
    assert b["metadata"]["name"] == "b"
    assert a == project(_ray_pod("a", "2026-01-01T00:00:00Z"), POD_FIELDS)


def test_sharer_never_confuses_different_values_and_forgets_when_full() -> None:
    sharer = Sharer(limit=3)
    values = [{"k": str(i)} for i in range(10)]
    shared = [sharer.share(copy.deepcopy(v)) for v in values]
    assert shared == values
    assert sharer.share({"k": "9"}) is shared[9]
    # Every value stays what it was even after the memo was cleared several times.
    assert [sharer.share(copy.deepcopy(v)) for v in values] == values
    assert sharer.share({}) == {}
    assert sharer.share([1, "x"]) == [1, "x"]
    assert sharer.share("text") == "text"


def test_an_update_takes_unchanged_shared_fields_from_the_cached_version() -> None:
    # Without a sharer, identity with the previous version can only come from the reuse.
    transform = projector(POD_FIELDS, intern=False)
    before = transform(_ray_pod("a", "2026-01-01T00:00:00Z"))
    update = _ray_pod("a", "2026-01-01T00:00:09Z")
    update["metadata"]["labels"]["ray.io/group"] = "g2"
    after = transform(copy.deepcopy(update), before)
    assert after == project(update, POD_FIELDS)  # the same content as a fresh projection
    assert after["metadata"]["ownerReferences"] is before["metadata"]["ownerReferences"]
    assert after["spec"]["containers"] is before["spec"]["containers"]
    # What changed is the update's, not the cached version's.
    assert after["metadata"]["labels"]["ray.io/group"] == "g2"
    assert after["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:09Z"
    assert after["status"]["conditions"] is not before["status"]["conditions"]
    # A field the update no longer has is gone, even though the cached version had it.
    del update["status"]["conditions"]
    assert "conditions" not in transform(copy.deepcopy(update), before)["status"]
    # reuse=False projects every field again.
    fresh = projector(POD_FIELDS, intern=False, reuse=False)(copy.deepcopy(update), before)
    assert fresh["spec"]["containers"] is not before["spec"]["containers"]


def test_the_informer_hands_its_transform_the_cached_version() -> None:
    inf = Informer(object(), PODS, transform=projector(POD_FIELDS, intern=False))  # type: ignore[arg-type]
    inf._apply("ADDED", _ray_pod("a", "2026-01-01T00:00:00Z"))
    cached = inf.store.get("a/a")
    assert cached is not None
    inf._apply("MODIFIED", _ray_pod("a", "2026-01-01T00:00:09Z"))
    updated = inf.store.get("a/a")
    assert updated is not None
    assert updated["spec"]["containers"] is cached["spec"]["containers"]
    assert updated["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:09Z"


def test_an_informer_without_projection_interns_strings_and_shares_nothing_else() -> None:
    inf = Informer(object(), RAYCLUSTERS)  # type: ignore[arg-type]
    # Decoded separately, as two watch events would be: equal strings are distinct objects.
    raw = orjson.dumps(_obj("rc", "1", labels={"team": "ml-platform-" + "x" * 20}))
    for i in range(2):
        event = orjson.loads(raw.replace(b'"rc"', b'"rc-%d"' % i))
        event["spec"] = {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
        inf._apply("ADDED", event)
    a, b = inf.store.get("a/rc-0"), inf.store.get("a/rc-1")
    assert a is not None
    assert b is not None
    assert a["metadata"]["labels"]["team"] is b["metadata"]["labels"]["team"]
    # Only strings: a dict changed in place by mistake changes one cached object, not all.
    assert a["metadata"]["labels"] is not b["metadata"]["labels"]
    assert a["spec"]["headGroupSpec"] is not b["spec"]["headGroupSpec"]
    assert a["metadata"]["name"] == "rc-0"
    assert b["metadata"]["name"] == "rc-1"
