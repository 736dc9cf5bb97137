"""Work queue semantics: dedup, one worker per key, re-add while processing, delays, fairness."""

from __future__ import annotations

import asyncio
import time

from kuberay.runtime.workqueue import RateLimiter, WorkQueue


async def test_duplicate_adds_are_collapsed() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_key_added_while_processing_is_requeued_after_done() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    assert len(q) == 0, "must not be handed to a second worker while processing"
    q.done(key)  # type: ignore[arg-type]
    assert len(q) == 1
    assert await q.get() == "a"


async def test_a_key_is_never_processed_concurrently() -> None:
    q = WorkQueue()
    active: dict[str, int] = {}
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        while (key := await q.get()) is not None:
            active[key] = active.get(key, 0) + 1
            if active[key] > 1:
                overlaps += 1
            await asyncio.sleep(0.001)
            active[key] -= 1
            processed += 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for i in range(400):
        q.add(f"k{i % 5}")
        if i % 10 == 0:
            await asyncio.sleep(0)
    await asyncio.sleep(0.2)
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == 0
    assert processed >= 5


async def test_add_after_and_shutdown_wakes_workers() -> None:
    q = WorkQueue()
    start = time.monotonic()
    q.add_after("late", 0.1)
    q.add_after("late", 0.5)  # a later duplicate does not postpone it
    assert await q.get() == "late"
    assert 0.08 <= time.monotonic() - start < 0.4
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    q.shutdown()
    assert await waiter is None


def test_rate_limiter_backs_off_per_item_and_forgets() -> None:
    rl = RateLimiter(base_delay=0.01, max_delay=1.0, qps=1000, burst=1000)
    assert [round(rl.when("x"), 3) for _ in range(4)] == [0.01, 0.02, 0.04, 0.08]
    assert rl.retries("x") == 4
    assert round(rl.when("y"), 3) == 0.01
    rl.forget("x")
    assert round(rl.when("x"), 3) == 0.01
    assert max(rl.when("z") for _ in range(20)) == 1.0


def test_rate_limiter_bucket_paces_many_items() -> None:
    rl = RateLimiter(base_delay=0.0, qps=10, burst=5)
    delays = [rl.when(f"item{i}") for i in range(10)]
    assert delays[:5] == [0.0] * 5
    assert 0.45 <= delays[-1] <= 0.55


async def test_fairness_a_self_requeueing_key_does_not_starve_others() -> None:
    q = WorkQueue()
    latency: dict[str, float] = {}
    added: dict[str, float] = {}
    heavy_rounds = 0

    async def worker() -> None:
        nonlocal heavy_rounds
        while (key := await q.get()) is not None:
            if key == "heavy":
                heavy_rounds += 1
                await asyncio.sleep(0.002)  # bounded work, then requeue
                if heavy_rounds < 500:
                    q.add("heavy")
            else:
                latency[key] = time.monotonic() - added[key]
            q.done(key)

    q.add("heavy")
    workers = [asyncio.create_task(worker()) for _ in range(2)]
    await asyncio.sleep(0.05)
    for i in range(20):
        added[f"light{i}"] = time.monotonic()
        q.add(f"light{i}")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    q.shutdown()
    await asyncio.gather(*workers)
    assert len(latency) == 20
    assert max(latency.values()) < 0.1, latency


async def test_urgent_keys_go_first_and_are_still_queued_once() -> None:
    q = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("c", urgent=True)  # already queued: moved ahead, not queued twice
    q.add("d", urgent=True)
    q.add("c", urgent=True)
    q.add("a")
    assert len(q) == 4
    assert [await q.get() for _ in range(4)] == ["c", "d", "a", "b"]


async def test_an_urgent_add_while_processing_requeues_the_key_in_the_urgent_lane() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("b")
    q.add("a", urgent=True)
    assert len(q) == 1, "must not be handed to a second worker while processing"
    q.done(key)  # type: ignore[arg-type]
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_plain_add_after_an_urgent_one_keeps_the_key_urgent() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("b", urgent=True)
    q.add("b")
    assert await q.get() == "b"
    q.done("b")
    q.add("b")  # served: a later plain add queues it in the normal lane again
    assert [await q.get(), await q.get()] == ["a", "b"]
