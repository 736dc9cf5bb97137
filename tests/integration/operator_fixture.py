"""Runs the operator as a real subprocess against the session's plane, with the CRDs installed.

A subprocess (not an in-process task) so that tests exercise the real entry point and flags, and
can SIGKILL it. Its log is kept beside the plane's logs and printed when a test fails to start.
"""

from __future__ import annotations

from kuberay.devenv.manifests import install_crds as install
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.runtime.client import KubeClient

__all__ = ["OperatorProcess", "install_crds"]


async def install_crds(kube: KubeClient) -> None:
    await install(kube)
