"""What the ray.io controllers share: the RayCluster resource, the cache scoping selectors,
generated-name suffixes and RFC 3339 time helpers.

The selectors scope the operator's caches as upstream does (pods of Ray nodes only; Services and
batch Jobs the operator created), which keeps memory proportional to what it manages.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from kuberay.api import constants as c
from kuberay.runtime.client import Resource
from kuberay.runtime.informer import Informer
from kuberay.runtime.store import Obj

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", kind="RayCluster")
POD_SELECTOR = f"{c.LABEL_NODE_TYPE} in (head,worker,redis-cleanup)"
OWNED_SELECTOR = f"{c.LABEL_CREATED_BY}={c.CREATED_BY}"
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet


def find_cached(informers: list[Informer], ns: str, name: str) -> Obj | None:
    """``ns/name`` from the first of ``informers`` (one per watched namespace) that has it.

    Deprecated: kept for the controllers that still hold per-namespace informer lists; the
    others read a ``runtime.cache.ResourceCache`` (``get``), which also returns our own writes
    that the watch has not delivered yet."""
    for inf in informers:
        obj = inf.store.get_by_name(ns, name)
        if obj is not None:
            return obj
    return None


def random_suffix(n: int = 5) -> str:
    return "".join(random.choice(_SUFFIX_ALPHABET) for _ in range(n))


def rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> float | None:
    if not text or not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
