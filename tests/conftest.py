"""Shared fixtures: one real control plane per test session, a fresh namespace per test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.plane import Plane, PlaneConfig, running_plane
from kuberay.devenv.testing import (
    create_namespace,
    delete_namespace,
    skip_unless_strict,
    unique_name,
)
from kuberay.runtime.client import KubeClient, load_kubeconfig

_NEEDS_PLANE = ("integration", "e2e", "bench")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-image",
        action="store_true",
        help="collect tests/image, which runs the image scripts/build-image.sh built (as root)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/image is left out unless --run-image: it needs a built image and root."""
    if collection_path == Path(__file__).parent / "image" and not config.getoption("--run-image"):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for marker in ("integration", "e2e"):
            if marker in parts:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def helm() -> Path:
    """helm (v3.22.0) for the chart tests, built on demand; a missing one fails in CI and skips
    elsewhere."""
    try:
        return binaries.helm_binary(log=lambda _line: None)
    except binaries.BuildError as exc:
        skip_unless_strict(f"helm is not available: {exc}")


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """The session's control plane: real etcd, apiserver, controller-manager, scheduler, KWOK.

    Binaries are built on first use (minutes, cold) and cached; set KUBERAY_CONTROLPLANE_BINDIR
    to use prebuilt ones.
    """
    directory = tmp_path_factory.mktemp("plane")
    nodes = int(os.environ.get("KUBERAY_TEST_NODES", "4"))
    config = PlaneConfig(directory=directory, nodes=nodes, node_gpus=4)
    with running_plane(config) as p:
        yield p


@pytest.fixture(scope="session")
async def kube(plane: Plane) -> AsyncIterator[KubeClient]:
    config = load_kubeconfig(plane.kubeconfig)
    config.qps = 0  # tests measure nothing through this client; do not pace it
    async with KubeClient(config, user_agent="kuberay-tests") as client:
        yield client


@pytest.fixture
async def namespace(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = unique_name(f"t-{request.node.name}")
    await create_namespace(kube, name)
    yield name
    await delete_namespace(kube, name)


@pytest.fixture(scope="session")
def process_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """A plane whose pods really run, as Linux processes (``runtime="process"``).

    Skips when the machine cannot run it (needs root, ``ip`` and ``nsenter``). Container logs:
    ``process_plane.container_log(namespace, pod, container)``. Hermetic (``egress=False``):
    tests never reach outside this machine, and a Ray or pip inside a pod that tries to fails
    at once instead of leaking traffic; tests of egress start their own plane.
    """
    from kuberay.devenv.nodeagent import supported

    why = supported()
    if why is not None:
        skip_unless_strict(why)
    directory = tmp_path_factory.mktemp("process-plane")
    nodes = int(os.environ.get("KUBERAY_TEST_PROCESS_NODES", "1"))
    config = PlaneConfig(directory=directory, runtime="process", process_nodes=nodes, egress=False)
    with running_plane(config) as p:
        yield p


@pytest.fixture(scope="session")
async def process_kube(process_plane: Plane) -> AsyncIterator[KubeClient]:
    config = load_kubeconfig(process_plane.kubeconfig)
    config.qps = 0
    async with KubeClient(config, user_agent="kuberay-tests") as client:
        yield client


@pytest.fixture
async def process_namespace(
    process_kube: KubeClient, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    name = unique_name(f"p-{request.node.name}")
    await create_namespace(process_kube, name)
    yield name
    await delete_namespace(process_kube, name)
