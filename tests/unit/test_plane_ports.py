"""The local plane's port choice (``plane.free_port``): listening ports come from below the
kernel's ephemeral range, where outgoing connections cannot take them before the component
binds them."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from kuberay.devenv.plane import LISTEN_PORTS_FROM, ephemeral_floor, free_port


def test_ports_come_from_below_the_ephemeral_range() -> None:
    ports = {free_port(floor=32_768) for _ in range(20)}
    assert all(LISTEN_PORTS_FROM <= p < 32_768 for p in ports), ports
    assert len(ports) > 1, "picked at random, not one fixed port"
    port = ports.pop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))  # free, as promised


def test_a_taken_port_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        busy = free_port(floor=32_768)
        taken.bind(("127.0.0.1", busy))
        taken.listen()
        other = free_port(floor=32_768)
        picks = iter([busy, other])
        monkeypatch.setattr(random, "randrange", lambda _lo, _hi: next(picks))
        assert free_port(floor=32_768) == other


def test_without_room_below_the_range_the_kernel_picks(tmp_path: Path) -> None:
    assert ephemeral_floor(tmp_path / "missing") == 0
    narrow = tmp_path / "range"
    narrow.write_text("1024\t65535\n")
    assert ephemeral_floor(narrow) == 1024
    port = free_port(floor=ephemeral_floor(narrow))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
