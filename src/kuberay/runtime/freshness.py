"""Read-your-writes for an informer: the minimum resourceVersion each key must reach.

After the operator writes an object, its informer still holds the version from before the
write until the watch delivers the write's event. A reconcile that reads that old version acts
on stale data: its next write fails with Conflict (a 409 storm on status), or worse, it decides
something the write already changed. The tracker remembers, per key, the resourceVersion and
body of our newest write until the informer has delivered a version at least as new; until then
the key is "not fresh" and a read returns our write instead of the older cached copy.

Invariants and failure modes:
- A pending write is cleared only by what the informer delivered: an event for the key at a
  version at least as new, any event, bookmark or list whose resourceVersion passes it (the
  watch delivers in resourceVersion order, so everything up to that point has been applied),
  or, when versions cannot be compared, the deletion of the key or a relist.
- Out-of-order answers are harmless: recording a version the informer has already passed, or
  one older than a write already pending for the key, changes nothing.
- A write whose event never comes because the object was deleted right after is cleared by the
  DELETED event (its resourceVersion is the deletion's, which is newer) or by the relist after
  a 410 Gone (the list's resourceVersion passes it and the key is simply absent).
- resourceVersions are opaque strings in the Kubernetes API, but etcd's are increasing
  integers: two versions are compared as integers when both parse, and otherwise one is "at
  least as new" as the other only when they are equal. That errs towards "not fresh", i.e.
  towards waiting for the informer, never towards acting on an older copy.
- State is in memory only and that is safe: it never decides anything by itself, it only holds
  back old data. A restart starts from a fresh list, which is newer than every earlier write.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from kuberay.runtime.store import Obj


def version_int(rv: str | None) -> int | None:
    """The resourceVersion as an integer (etcd's form), or None when it is not one."""
    if rv and rv.isascii() and rv.isdigit():
        return int(rv)
    return None


def at_least(rv: str | None, minimum: str) -> bool:
    """Whether ``rv`` is at least as new as ``minimum``: integer comparison when both parse,
    equality otherwise (an opaque version is never assumed newer)."""
    if rv is None:
        return False
    a, b = version_int(rv), version_int(minimum)
    if a is not None and b is not None:
        return a >= b
    return rv == minimum


def resource_version(obj: Obj) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


@dataclass(frozen=True)
class PendingWrite:
    """Our newest write of one key that the informer has not delivered yet."""

    resource_version: str
    obj: Obj


class MinResourceVersionTracker:
    """Per key, the minimum resourceVersion the informer must deliver before its copy is fresh.

    The informer reports what it applies (``observe``, ``observe_bookmark``, ``observe_list``);
    writers report what they wrote (``record``). Reads ask ``pending``/``is_fresh``.
    """

    def __init__(self) -> None:
        self._pending: dict[str, PendingWrite] = {}
        # (integer version, key) of pending writes, so that passing a resourceVersion clears
        # every write up to it without scanning all keys on every event.
        self._heap: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def record(self, key: str, obj: Obj, delivered: str | None) -> bool:
        """Records our write of ``key`` (the server's answer, ``obj``); ``delivered`` is the
        resourceVersion the informer has applied up to. Returns True when the key now waits
        for the informer (for this write, or for a newer one already pending), False when
        there is nothing to wait for (no version, or the informer is already past it)."""
        rv = resource_version(obj)
        if rv is None or (delivered is not None and at_least(delivered, rv)):
            return False
        current = self._pending.get(key)
        if current is not None and at_least(current.resource_version, rv):
            return True
        self._pending[key] = PendingWrite(rv, obj)
        number = version_int(rv)
        if number is not None:
            heapq.heappush(self._heap, (number, key))
        return True

    def observe(self, key: str, rv: str | None, deleted: bool) -> None:
        """The informer applied an event for ``key`` at ``rv``."""
        pending = self._pending.get(key)
        if pending is not None:
            opaque = version_int(rv) is None or version_int(pending.resource_version) is None
            if at_least(rv, pending.resource_version) or (deleted and opaque):
                del self._pending[key]
        self.observe_bookmark(rv)

    def observe_bookmark(self, rv: str | None) -> None:
        """Every event up to ``rv`` has been applied: writes up to it are delivered."""
        passed = version_int(rv)
        if passed is None:
            return
        while self._heap and self._heap[0][0] <= passed:
            _, key = heapq.heappop(self._heap)
            pending = self._pending.get(key)
            if pending is not None and at_least(rv, pending.resource_version):
                del self._pending[key]

    def observe_list(self, rv: str | None) -> None:
        """A (re)list replaced the store. Integer versions are cleared up to the list's
        version. Writes with opaque versions are dropped: the list is a consistent read of the
        current state, and an opaque version cannot tell whether it already includes them (a
        write racing the list may thus read as its listed predecessor until its own event)."""
        self.observe_bookmark(rv)
        for key in [k for k, p in self._pending.items() if version_int(p.resource_version) is None]:
            del self._pending[key]

    def pending(self, key: str) -> Obj | None:
        """Our write of ``key`` while the informer has not delivered it, else None."""
        pending = self._pending.get(key)
        return pending.obj if pending is not None else None

    def is_fresh(self, key: str) -> bool:
        return key not in self._pending

    def items(self) -> list[tuple[str, Obj]]:
        """(key, our write) of every pending write."""
        return [(key, pending.obj) for key, pending in self._pending.items()]
