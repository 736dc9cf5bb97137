"""Fixtures of the differential suite: one plane, the Go operator and ours side by side.

Each operator watches only its own namespace (``--watch-namespace``), so they never touch each
other's objects; both get the same inputs. The Go operator is upstream's v1.6.1, built from its
Go module into the control-plane cache on first use (a few minutes cold); a missing Go
toolchain fails the suite, it does not skip it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, PlaneConfig, running_plane
from kuberay.runtime.client import NAMESPACES, KubeClient, load_kubeconfig

GO_NS = "conf-go"
PY_NS = "conf-py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "conformance" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.conformance)


class GoOperatorProcess(OperatorProcess):
    """Upstream's operator as a subprocess (leader election off, ports of its own); stopping
    and logging as for ours."""

    def __init__(self, plane: Plane, binary: Path, log_dir: Path, *extra: str) -> None:
        super().__init__(plane, log_dir, *extra)
        self.binary = binary
        self.log_path = log_dir / "go-operator.log"

    def start(self, *namespaces: str) -> None:
        argv = [
            str(self.binary),
            f"--kubeconfig={self.plane.kubeconfig}",
            f"--watch-namespace={','.join(namespaces)}",
            "--enable-leader-election=false",
            "--metrics-addr=0",
            "--health-probe-bind-address=0",
            "--log-stdout-encoder=console",
            *self.extra,
        ]
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture(scope="session")
def conf_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """Nodes large enough for every input to be scheduled: a pod left Pending on one side and
    bound on the other would be a difference of the scheduler, not of the operators."""
    directory = tmp_path_factory.mktemp("conf-plane")
    config = PlaneConfig(
        directory=directory, nodes=4, node_cpu="4000", node_memory="40000Gi", node_gpus=64
    )
    with running_plane(config) as p:
        yield p


@pytest.fixture(scope="session")
async def conf_kube(conf_plane: Plane) -> AsyncIterator[KubeClient]:
    config = load_kubeconfig(conf_plane.kubeconfig)
    config.qps = 0
    async with KubeClient(config, user_agent="kuberay-conformance") as client:
        await install_crds(client)
        for ns in (GO_NS, PY_NS):
            await client.create(NAMESPACES, {"metadata": {"name": ns}})
        yield client


@pytest.fixture(scope="session")
def go_binary() -> Path:
    return binaries.go_operator_binary()


@pytest.fixture(scope="session")
def go_operator(
    conf_plane: Plane, go_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GoOperatorProcess]:
    op = GoOperatorProcess(conf_plane, go_binary, tmp_path_factory.mktemp("go-operator"))
    yield op
    op.stop()


@pytest.fixture(scope="session")
def py_operator(
    conf_plane: Plane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(conf_plane, tmp_path_factory.mktemp("py-operator"))
    yield op
    op.stop()


@pytest.fixture(scope="session")
async def pair(
    conf_kube: KubeClient, go_operator: GoOperatorProcess, py_operator: OperatorProcess
) -> AsyncIterator[tuple[GoOperatorProcess, OperatorProcess]]:
    """Both operators running, each on its namespace."""
    go_operator.start(GO_NS)
    py_operator.extra = (f"--watch-namespace={PY_NS}",)
    py_operator.start()
    yield go_operator, py_operator
    go_operator.stop()
    py_operator.stop()
