"""Where the OpenShift Route API exists, an ingress-enabled RayCluster gets a Route instead of an
Ingress. A minimal Route CRD stands in for OpenShift; it is removed again so that operators
started by later test modules do not see OpenShift."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from operator_fixture import OperatorProcess, install_crds
from test_raycluster import raycluster, wait_ready

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import install_loose_crd, wait_for, wait_gone
from kuberay.runtime.client import CRDS, KubeClient, Resource
from kuberay.runtime.errors import NotFound

ROUTES = Resource("route.openshift.io", "v1", "routes", kind="Route")
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", kind="Ingress")


@pytest.fixture(scope="module")
async def openshift_operator(
    plane: Plane, kube: KubeClient, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[OperatorProcess]:
    await install_crds(kube)
    await install_loose_crd(kube, ROUTES, "Route")
    op = OperatorProcess(plane, tmp_path_factory.mktemp("openshift-operator"))
    op.start()
    yield op
    op.stop()
    await kube.delete(CRDS, "routes.route.openshift.io")
    await wait_gone(kube, CRDS, "routes.route.openshift.io", None)


async def test_route_instead_of_ingress(
    kube: KubeClient, namespace: str, openshift_operator: OperatorProcess
) -> None:
    rc = raycluster("os", replicas=1)
    rc["spec"]["headGroupSpec"]["enableIngress"] = True
    await kube.create(RAYCLUSTERS, rc, namespace)
    await wait_ready(kube, namespace, "os")
    route = await wait_for(
        kube, ROUTES, "os-head-route", namespace, lambda _: True, what="the Route"
    )
    assert route["spec"]["to"] == {"kind": "Service", "name": "os-head-svc", "weight": 100}
    assert route["spec"]["port"] == {"targetPort": 8265}
    with pytest.raises(NotFound):
        await kube.get(INGRESSES, "os-head-ingress", namespace)
