"""Rate-limited work queue with controller-runtime semantics, on asyncio.

Invariants and failure modes:
- A key is queued at most once (adding a queued key is a no-op) and is never handed to two
  workers at once: a key added while it is being processed is parked and queued again when the
  worker calls ``done``, so the newest state is always reconciled once more.
- FIFO order is what keeps the queue fair: a key that requeues itself goes to the back, behind
  every key that arrived meanwhile, so one object with a lot of work cannot starve the others as
  long as each reconcile does a bounded amount of work.
- A second, urgent lane is served first (``add(key, urgent=True)``): it is for events that can
  finish an object's work already under way (a pod turning Ready lets its cluster report
  ``ready``), which in a burst would otherwise wait behind every object not yet started. An
  urgent add of a key already queued moves it to the urgent lane; it is still queued once. Its
  callers must keep it bounded: it can delay, and with a steady flood starve, the normal lane.
- Retries back off per key (exponential, ``base * 2**failures`` capped at ``max_delay``) and
  all retries together are paced by a token bucket, like client-go's default controller rate
  limiter; ``forget`` resets a key's backoff after a success.
- ``shutdown`` wakes every waiting worker; ``get`` then returns None.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable


class RateLimiter:
    """Per-item exponential backoff combined with an overall token bucket (the larger wins)."""

    def __init__(
        self,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        qps: float = 10.0,
        burst: int = 100,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.qps = qps
        self.burst = burst
        self._failures: dict[Hashable, int] = {}
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._next_free = 0.0

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        backoff: float = min(self.max_delay, self.base_delay * 2.0 ** min(failures, 64))
        return max(backoff, self._bucket_delay())

    def _bucket_delay(self) -> float:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        # Reserve the next free slot, as a reservation-based limiter does.
        self._next_free = max(self._next_free, now) + 1.0 / self.qps
        return self._next_free - now

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def retries(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class WorkQueue:
    def __init__(
        self,
        name: str = "queue",
        rate_limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.rate_limiter = rate_limiter or RateLimiter()
        self._clock = clock
        self._queue: deque[str] = deque()
        self._urgent: deque[str] = deque()
        # Dirty keys to be served from the urgent lane (queued there, or parked while processed).
        self._urgent_keys: set[str] = set()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._added_at: dict[str, float] = {}
        self._started_at: dict[str, float] = {}
        self._waiting: list[tuple[float, int, str]] = []
        self._waiting_due: dict[str, float] = {}
        self._seq = itertools.count()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutdown = False
        self._waker: asyncio.TimerHandle | None = None
        # Metrics hooks, called synchronously.
        self.on_add: Callable[[str], None] | None = None
        self.on_get: Callable[[str, float], None] | None = None  # key, seconds queued
        self.on_done: Callable[[str, float], None] | None = None  # key, seconds processing
        self.on_retry: Callable[[str], None] | None = None

    def __len__(self) -> int:
        return len(self._queue) + len(self._urgent)

    @property
    def depth(self) -> int:
        return len(self._queue) + len(self._urgent)

    def unfinished_work_seconds(self) -> float:
        """Seconds of work in progress that ``done`` has not seen yet, summed over items: a
        reconcile that hangs makes this grow while the rate of finished work shows nothing."""
        now = self._clock()
        return sum(now - started for started in self._started_at.values())

    def longest_running_processor_seconds(self) -> float:
        """How long the oldest item now being processed has been running (0 when idle)."""
        if not self._started_at:
            return 0.0
        return self._clock() - min(self._started_at.values())

    @property
    def delayed(self) -> int:
        return len(self._waiting_due)

    def add(self, key: str, urgent: bool = False) -> None:
        if self._shutdown:
            return
        if key in self._dirty:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                if key not in self._processing:
                    self._queue.remove(key)
                    self._urgent.append(key)
            return
        self._dirty.add(key)
        self._added_at.setdefault(key, self._clock())
        if urgent:
            self._urgent_keys.add(key)
        if self.on_add:
            self.on_add(key)
        if key in self._processing:
            return  # requeued by done()
        (self._urgent if urgent else self._queue).append(key)
        self._notify()

    def add_after(self, key: str, delay: float) -> None:
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock() + delay
        current = self._waiting_due.get(key)
        if current is not None and current <= due:
            return  # an earlier wake-up is already scheduled
        self._waiting_due[key] = due
        heapq.heappush(self._waiting, (due, next(self._seq), key))
        self._arm()

    def add_rate_limited(self, key: str) -> None:
        if self.on_retry:
            self.on_retry(key)
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    def retries(self, key: str) -> int:
        return self.rate_limiter.retries(key)

    async def get(self) -> str | None:
        while not self._queue and not self._urgent and not self._shutdown:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._notify()  # pass the wake-up on to another worker
                raise
        if self._urgent:
            key = self._urgent.popleft()
            self._urgent_keys.discard(key)
        elif self._queue:
            key = self._queue.popleft()
        else:
            return None
        self._dirty.discard(key)
        self._processing.add(key)
        now = self._clock()
        added = self._added_at.pop(key, now)
        self._started_at[key] = now
        if self.on_get:
            self.on_get(key, now - added)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if self.on_done and started is not None:
            self.on_done(key, self._clock() - started)
        if key in self._dirty:
            (self._urgent if key in self._urgent_keys else self._queue).append(key)
            self._notify()

    def shutdown(self) -> None:
        self._shutdown = True
        if self._waker is not None:
            self._waker.cancel()
        self._notify()

    # ------------------------------------------------------------------ internals
    def _notify(self) -> None:
        """Wakes one waiting worker (all of them on shutdown)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not self._shutdown:
                    return

    def _arm(self) -> None:
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        due = self._waiting[0][0]
        if self._waker is not None:
            self._waker.cancel()
        self._waker = loop.call_later(max(0.0, due - self._clock()), self._release_due)

    def _release_due(self) -> None:
        self._waker = None
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            due, _, key = heapq.heappop(self._waiting)
            if self._waiting_due.get(key) == due:
                del self._waiting_due[key]
                self.add(key)
        self._arm()
