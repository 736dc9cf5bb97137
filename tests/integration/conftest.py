"""Fixtures shared by the integration modules that drive the operator as a subprocess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from operator_fixture import OperatorProcess, install_crds

from kuberay.devenv.plane import Plane
from kuberay.runtime.client import KubeClient


@pytest.fixture(scope="module")
def operator_proc(
    plane: Plane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """One operator subprocess per test module (all namespaces), with its reconcile trace."""
    op = OperatorProcess(plane, tmp_path_factory.mktemp("operator"), trace=True)
    yield op
    op.stop()


@pytest.fixture(scope="module")
async def ray_operator(kube: KubeClient, operator_proc: OperatorProcess) -> OperatorProcess:
    """The module's operator, started with the CRDs installed."""
    await install_crds(kube)
    operator_proc.start()
    return operator_proc
