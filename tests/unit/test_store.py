"""Indexed store: index consistency, relist differences, projection."""

from __future__ import annotations

from typing import Any

from kuberay.runtime.store import POD_FIELDS, Store, index_by_label, project


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
