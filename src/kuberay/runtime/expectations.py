"""Create/delete expectations: never act on a cache that has not yet seen our own writes.

After a controller creates or deletes an object, its informer cache lags for a moment. A
reconcile in that window would count too few (or too many) objects and create duplicates (or
delete twice). So every write is recorded here, grouped (for example by cluster and worker
group), and a group may be acted on only when the cache reflects every recorded write.

Invariants and failure modes:
- A create is satisfied when the object is in the cache; a delete when it is gone from the cache
  or marked for deletion (a ``deletionTimestamp`` is the cache having seen our delete).
- An expectation older than ``timeout`` (30 s, as upstream) is dropped so that a lost event can
  only delay, never wedge, a group.
- The state is in memory on purpose: after a restart the informers start from a fresh list,
  which already reflects every earlier write, so there is nothing to remember.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Lookup = Callable[[str, str], dict[str, Any] | None]  # (namespace, name) -> cached object

EXPECTATIONS_TIMEOUT = 30.0


@dataclass
class _Entry:
    kind: str  # "create" or "delete"
    since: float


class Expectations:
    def __init__(
        self,
        lookup: Lookup,
        timeout: float = EXPECTATIONS_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lookup = lookup
        self.timeout = timeout
        self.clock = clock
        # group -> {(namespace, name): entry}
        self._groups: dict[str, dict[tuple[str, str], _Entry]] = {}

    def expect_create(self, group: str, namespace: str, name: str) -> None:
        self._groups.setdefault(group, {})[(namespace, name)] = _Entry("create", self.clock())

    def expect_delete(self, group: str, namespace: str, name: str) -> None:
        self._groups.setdefault(group, {})[(namespace, name)] = _Entry("delete", self.clock())

    def observe_failure(self, group: str, namespace: str, name: str) -> None:
        """The write failed, so the cache will never show it: forget the expectation."""
        entries = self._groups.get(group)
        if entries is not None:
            entries.pop((namespace, name), None)
            if not entries:
                del self._groups[group]

    def satisfied(self, group: str) -> bool:
        """True when the cache reflects every write recorded for ``group``; met entries are
        removed as a side effect."""
        entries = self._groups.get(group)
        if not entries:
            return True
        now = self.clock()
        for (ns, name), entry in list(entries.items()):
            obj = self.lookup(ns, name)
            if entry.kind == "create":
                met = obj is not None
            else:
                met = obj is None or bool(obj.get("metadata", {}).get("deletionTimestamp"))
            if met or now - entry.since > self.timeout:
                del entries[(ns, name)]
        if not entries:
            del self._groups[group]
            return True
        return False

    def pending(self, group: str) -> int:
        return len(self._groups.get(group, {}))

    def drop_prefix(self, prefix: str) -> None:
        """Forgets every group starting with ``prefix`` (an owner deleted or recreated)."""
        for group in [g for g in self._groups if g.startswith(prefix)]:
            del self._groups[group]
