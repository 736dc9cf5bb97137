"""The memory releaser gives freed heap pages back: measured as resident memory, not mocked."""

from __future__ import annotations

import asyncio
import platform

import pytest

from kuberay.runtime import memory


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_trim_returns_fragmented_free_pages() -> None:
    # 2 KiB blocks come from glibc's heap (not pymalloc's pools, not mmap); keeping one block in
    # 64 alive pins the heap's top, so glibc's automatic trim cannot shrink it and only
    # malloc_trim's release of the free pages in between can.
    blocks = [bytearray(2048) for _ in range(40_000)]
    kept = blocks[::64]
    del blocks
    before = _rss_kib()
    assert memory.trim() is True
    after = _rss_kib()
    freed_kib = 40_000 * 2 * 63 // 64
    assert before - after > freed_kib // 2, (before, after)
    assert len(kept) == 625


def test_release_periodically_disabled_returns_at_once() -> None:
    asyncio.run(asyncio.wait_for(memory.release_periodically(0), 1))


def test_release_periodically_trims_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    async def run() -> None:
        third = asyncio.Event()
        loop = asyncio.get_running_loop()

        def fake_trim() -> bool:
            calls.append(1)
            if len(calls) == 3:
                loop.call_soon_threadsafe(third.set)
            return True

        monkeypatch.setattr(memory, "trim", fake_trim)
        task = asyncio.create_task(memory.release_periodically(0.01))
        await third.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(run(), 5))


def test_release_periodically_stops_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "trim", lambda: False)
    asyncio.run(asyncio.wait_for(memory.release_periodically(0.01), 5))
