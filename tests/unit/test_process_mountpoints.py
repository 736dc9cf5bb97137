"""Mount points made by the process runtime's launcher when containers start at the same time.

Every container of every pod creates its missing mount points on the shared host file system
(``/var/run/secrets/kubernetes.io/serviceaccount`` for the service-account token), and the
containers of a RayCluster start together: creating a directory another launcher made a moment
earlier must succeed, and only the creator reports it for removal.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from kuberay.devenv.nodeagent import launcher, network


@pytest.fixture(autouse=True)
def _fresh_created() -> None:
    launcher.CREATED.clear()


def test_a_directory_made_by_another_launcher_meanwhile_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
    contested = str(tmp_path / "var" / "run" / "secrets")
    real_mkdir = os.mkdir

    def other_launcher_first(path: str, mode: int = 0o777) -> None:
        # The interleaving of the bug: this launcher saw the path missing, then another
        # launcher created it before this mkdir ran.
        if path == contested and not os.path.exists(path):
            real_mkdir(path)
        real_mkdir(path, mode)

    monkeypatch.setattr(os, "mkdir", other_launcher_first)
    launcher.make_target(str(target), is_dir=True)
    assert target.is_dir()
    var = tmp_path / "var"
    # Not the contested directory: its creator reports it.
    assert [str(var), str(var / "run"), str(target.parent), str(target)] == launcher.CREATED


def test_a_file_made_by_another_launcher_meanwhile_is_not_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "etc" / "resolv.conf"
    real_exists = os.path.exists

    def made_meanwhile(path: str) -> bool:
        if path == str(target) and not real_exists(path):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
            return False  # checked before the other launcher created it
        return real_exists(path)

    monkeypatch.setattr(os.path, "exists", made_meanwhile)
    launcher.make_target(str(target), is_dir=False)
    assert target.is_file()
    assert str(target) not in launcher.CREATED


def _racer(target: str, barrier: Any, out: Any) -> None:
    barrier.wait(timeout=30)
    try:
        launcher.make_target(target, is_dir=True)
        out.put(("ok", list(launcher.CREATED)))
    except OSError as exc:
        out.put(("error", repr(exc)))


def test_concurrent_launchers_all_succeed_and_each_path_is_reported_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    racers = 6
    for round_ in range(15):
        root = tmp_path / f"round{round_}"
        root.mkdir()
        target = str(root / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount")
        barrier = ctx.Barrier(racers)
        out: Any = ctx.Queue()
        procs = [ctx.Process(target=_racer, args=(target, barrier, out)) for _ in range(racers)]
        for p in procs:
            p.start()
        results = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        errors = [detail for kind, detail in results if kind == "error"]
        assert errors == [], f"round {round_}: {errors}"
        reported = [path for _, created in results for path in created]
        assert sorted(reported) == sorted(set(reported))
        assert set(reported) == {
            str(root / "var"),
            str(root / "var" / "run"),
            str(root / "var" / "run" / "secrets"),
            str(root / "var" / "run" / "secrets" / "kubernetes.io"),
            target,
        }


def test_a_plane_leaves_mount_points_to_a_live_plane_and_the_last_removes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing a mount point on the host would detach the same path's mounts in the running
    containers of another plane (rmdir works across mount namespaces)."""
    monkeypatch.setattr(network, "RUN_ROOT", tmp_path / "run")
    monkeypatch.setattr(network, "DATA_ROOT", tmp_path / "data")
    (tmp_path / "run" / "nets").mkdir(parents=True)
    me = os.getpid()
    for net_id in ("first", "second"):
        record = {"id": net_id, "owner_pid": str(me), "owner_start": network._start_time(me)}
        (tmp_path / "run" / "nets" / f"{net_id}.json").write_text(json.dumps(record))
        (tmp_path / "data" / net_id).mkdir(parents=True)
    token = tmp_path / "host" / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
    token.mkdir(parents=True)
    shared = [token.parent.parent, token.parent, token]
    (tmp_path / "data" / "first" / "mountpoints").write_text("".join(f"{p}\n" for p in shared))
    (tmp_path / "data" / "second" / "mountpoints").write_text(f"{token}\n")

    network.release_mountpoints("first")  # as network.release does: its record is still there
    assert token.is_dir(), "removed while the second plane may still use it"
    inherited = (tmp_path / "data" / "second" / "mountpoints").read_text().split()
    assert set(inherited) == {str(p) for p in shared}
    (tmp_path / "run" / "nets" / "first.json").unlink()

    network.release_mountpoints("second")
    assert not token.parent.parent.exists()
    assert (tmp_path / "host" / "var" / "run").is_dir()  # not created by a pod: kept
