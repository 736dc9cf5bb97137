"""Write-through of our own writes into the informer cache (``record_write`` with the version
the write replaced), guarded by that base version; reads return the newest write either way."""

from __future__ import annotations

from typing import Any

from kuberay.runtime.client import CONFIGMAPS
from kuberay.runtime.informer import Informer


def _obj(rv: str, data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "a", "namespace": "n", "resourceVersion": rv, "managedFields": [{}]},
        "data": {"x": data},
    }


def test_own_write_lands_only_on_the_version_it_was_based_on() -> None:
    inf = Informer(object(), CONFIGMAPS)  # type: ignore[arg-type]
    inf.store.upsert(_obj("10", "old"))
    assert inf.record_write(_obj("11", "new"), based_on="10")
    stored = inf.store.get("n/a")
    assert stored is not None
    assert stored["data"]["x"] == "new"
    assert "managedFields" not in stored["metadata"]
    # a write based on a version the cache no longer holds is not written through ...
    assert not inf.record_write(_obj("12", "newer"), based_on="10")
    assert inf.store.get("n/a")["data"]["x"] == "new"  # type: ignore[index]
    # ... but reads return it until the watch delivers it
    assert inf.get("n", "a")["data"]["x"] == "newer"  # type: ignore[index]
    assert not inf.is_fresh("n", "a")
    inf._apply("MODIFIED", _obj("12", "newer"))
    assert inf.is_fresh("n", "a")
