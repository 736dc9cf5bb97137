"""The operator-wide start window: pods are created no faster than the plane starts them.

Ours, not upstream's (the Go operator creates every missing pod at once). A pod the plane has
not started yet is one the scheduler has not looked at, or one bound to a node whose kubelet
has not taken it (no ``status.startTime``). Creating far more of those than the plane can start
only lengthens its queues: on the KWOK plane at 1000x10, 2,000+ bound pods waited for their
kubelet, the apiserver closed KWOK's pod watch as too slow, and every relist replayed work.
So a head or worker group is created only while fewer than ``limit`` of the operator's pods
are unstarted; a cluster that finds the window full waits in a FIFO and is woken when pods
start.

Invariants and failure modes:
- Never a stall of its own: a pod unstarted for longer than ``max_age`` seconds no longer
  counts (a dead node or a kubelet that never reports must not hold other clusters back), and a
  waiting cluster is also requeued on a timer (``requeue_seconds``: 30 s, longer when many
  clusters wait, at most 300 s), so a lost wake-up costs at most that long, never progress.
- The count is taken from the pod cache's index plus the creates granted but not yet seen by
  the watch (``reserve``). A reconcile reserves its whole batch before its first create goes
  out, so concurrent reconciles never take the same room.
- Pods the scheduler has found unschedulable or gated (``PodScheduled`` False), pods being
  deleted, and unbound pods of a custom scheduler (gang schedulers bind nothing until the gang
  is whole) never count: the window paces the plane's work, not the cluster's capacity.
- Creates come in whole batches (``WAKE_BATCH``, or what the group lacks): a new cluster's head
  waits until there is room for it and its first batch, so that a small cluster is created in
  one pass and goes from created to Ready in two status writes, as with upstream.
- A woken cluster is promised the room it was woken for, and a head about to be created holds
  room for its first batch, until the cluster reserves its batch (or ``PROMISE_SECONDS``), so
  the next pod to start does not hand the same room to another waiter. From its reservations
  on, the batch counts instead of the promise: never both, or room counted twice while the
  creates go out keeps other clusters' batches waiting.
- The waiters are only a wake-up list: losing it (a restart) loses nothing, since every
  waiting cluster is on the work queue's timer as well.
"""

from __future__ import annotations

import builtins
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from kuberay.runtime import rfc3339
from kuberay.runtime.informer import Handler
from kuberay.runtime.store import Obj, object_key

INDEX = "unstarted"
DEFAULT_LIMIT = 200
DEFAULT_MAX_AGE = 60.0
# A waiting cluster's timer, should no pod start to wake it (room freed only by unstarted pods
# ageing past max_age sends no event). At 10 s, a thousand clusters waiting a few minutes made
# 17 reconciles each at 1000x10, nearly all of them finding the window still full.
WINDOW_REQUEUE_SECONDS = 30.0
# The longest that timer grows to when many clusters wait (``requeue_seconds``): upstream's own
# periodic requeue.
WINDOW_REQUEUE_MAX_SECONDS = 300.0
# Pods are created in batches of this many (or all a group lacks, if fewer): a cluster waits
# until the window has room for a whole batch, so that wake-ups, passes, events and status
# writes come per batch instead of per started pod.
WAKE_BATCH = 10
# How long room promised to a woken cluster stays set aside for it.
PROMISE_SECONDS = 5.0


def unstarted(pod: Obj) -> bool:
    """Whether the plane still owes this pod a start (scheduler or kubelet)."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("startTime") or status.get("phase") not in (None, "", "Pending"):
        return False
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return False
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return True
    return spec.get("schedulerName") in (None, "", "default-scheduler")


def _index(pod: Obj) -> list[str]:
    return ["1"] if unstarted(pod) else []


class PodSource(Protocol):
    def add_indexer(self, name: str, func: Callable[[Obj], list[str]]) -> None: ...

    def add_handler(self, handler: Handler) -> None: ...

    def list(
        self, namespace: str | None = None, *, index: str | None = None, value: str = ""
    ) -> builtins.list[Obj]: ...


class PodStartWindow:
    def __init__(
        self,
        pods: PodSource,
        limit: int = DEFAULT_LIMIT,
        max_age: float = DEFAULT_MAX_AGE,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pods = pods
        self.limit = limit
        self.max_age = max_age
        self.clock = clock
        self.monotonic = monotonic
        # Keys granted a create the watch has not delivered yet -> when granted (monotonic).
        self._granted: dict[str, float] = {}
        # Waiting cluster keys -> how many pods each asked for, oldest first; and their sum.
        self._waiters: OrderedDict[str, int] = OrderedDict()
        self._wanted = 0
        # Woken cluster keys -> (room set aside for them, when woken (monotonic)).
        self._promised: dict[str, tuple[int, float]] = {}
        self.wake: Callable[[str], None] = lambda _key: None
        if limit > 0:
            pods.add_indexer(INDEX, _index)
            pods.add_handler(
                Handler(on_add=self._seen, on_update=self._updated, on_delete=self._deleted)
            )

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def in_flight(self) -> int:
        """Pods created recently enough to count that the plane has not started yet."""
        cutoff = rfc3339.format_time(self.clock() - self.max_age)
        counted = {
            object_key(p)
            for p in self.pods.list(index=INDEX, value="1")
            # RFC 3339 UTC seconds compare as strings.
            if p["metadata"].get("creationTimestamp", "") >= cutoff
        }
        stale = self.monotonic() - self.max_age
        for key, granted in list(self._granted.items()):
            if granted < stale:
                del self._granted[key]
            else:
                counted.add(key)
        return len(counted)

    def room(self, key: str | None = None) -> int:
        """How many more pods cluster ``key`` may create now: the free room less what is
        promised to other woken clusters (effectively unbounded when disabled)."""
        if not self.enabled:
            return 1 << 30
        stale = self.monotonic() - PROMISE_SECONDS
        promised = 0
        for other, (count, woken) in list(self._promised.items()):
            if woken < stale:
                del self._promised[other]
            elif other != key:
                promised += count
        return max(0, self.limit - self.in_flight() - promised)

    def hold(self, key: str, count: int) -> None:
        """Sets ``count`` of the free room aside for cluster ``key``, which is about to create
        that many pods over more than one request (a head, then its first batch): other clusters
        see that much less room until ``claimed`` or ``PROMISE_SECONDS``."""
        if self.enabled and count > 0:
            self._promised[key] = (count, self.monotonic())

    def claimed(self, key: str) -> None:
        """Cluster ``key`` has reserved what it was woken or held for: its creates count
        instead."""
        self._promised.pop(key, None)

    def reserve(self, namespace: str, name: str) -> None:
        """A create about to be sent: it counts until the watch shows the pod."""
        if self.enabled:
            self._granted[f"{namespace}/{name}"] = self.monotonic()

    def release(self, namespace: str, name: str) -> None:
        """A create that surely did not land."""
        self._granted.pop(f"{namespace}/{name}", None)
        self._wake_waiters()

    def wait(self, key: str, wanted: int) -> None:
        """``key`` (a cluster) found no room for the ``wanted`` pods it must create together
        (a whole batch; its head and first batch): wake it once that much room is free."""
        self._promised.pop(key, None)
        before = self._waiters.get(key, 0)
        self._waiters[key] = max(before, wanted)
        self._wanted += self._waiters[key] - before

    def waiting(self) -> int:
        return len(self._waiters)

    def requeue_seconds(self) -> float:
        """How long a waiting cluster's timer runs. The timer only covers a lost wake-up, and
        waiters are woken in order: behind N windows' worth of waiting pods, none gets room in
        less than N starts of a whole window. So the timer is ``WINDOW_REQUEUE_SECONDS`` while
        less than a window's worth waits, one interval more for every further window's worth,
        and at most ``WINDOW_REQUEUE_MAX_SECONDS``. At 10,000 new clusters of one worker a
        fixed 30 s gave every waiting cluster a pass every 30 s that found the window full."""
        windows = self._wanted // max(1, self.limit)
        return min(WINDOW_REQUEUE_MAX_SECONDS, WINDOW_REQUEUE_SECONDS * (1 + windows))

    def _seen(self, pod: Obj) -> None:
        if self._granted.pop(object_key(pod), None) is not None and not unstarted(pod):
            self._wake_waiters()

    def _updated(self, old: Obj, new: Obj) -> None:
        self._granted.pop(object_key(new), None)
        if unstarted(old) and not unstarted(new):
            self._wake_waiters()

    def _deleted(self, pod: Obj) -> None:
        self._granted.pop(object_key(pod), None)
        if unstarted(pod):
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        if not self._waiters:
            return
        room = self.room()
        while self._waiters:
            key, wanted = next(iter(self._waiters.items()))
            # Never more than the window can hold, or a small window would only ever wake
            # its waiters by their timer.
            take = min(wanted, self.limit)
            if room < take:
                return
            del self._waiters[key]
            self._wanted -= wanted
            self._promised[key] = (take, self.monotonic())
            room -= take
            self.wake(key)
