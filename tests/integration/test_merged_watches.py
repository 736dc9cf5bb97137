"""Many watched namespaces through one watch per resource (issue 19: connections must not grow
with the namespace count).

- The filtered cluster-wide informer keeps exactly the watched namespaces' objects, and a write
  recorded for another namespace is ignored.
- Access reviews: the admin may list and watch everything cluster-wide; a ServiceAccount with no
  binding may not, so an operator under a namespaced install keeps per-namespace watches.
- The operator started with 40 namespaces in ``--watch-namespace`` reconciles clusters in the
  watched ones, leaves the unwatched one alone, and holds one connection to the apiserver
  (per-namespace watches would need at least five: kube-apiserver allows 100 streams per
  HTTP/2 connection and the operator keeps about a dozen informers per namespace).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from operator_fixture import OperatorProcess, install_crds

from kuberay.api import rbac_rules
from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    create_namespace,
    delete_namespace,
    small_raycluster,
    tcp_connections,
    unique_name,
    wait_until,
)
from kuberay.runtime.access import watchable_cluster_wide
from kuberay.runtime.client import (
    CONFIGMAPS,
    PODS,
    SERVICEACCOUNTS,
    KubeClient,
    load_kubeconfig,
)
from kuberay.runtime.informer import Handler, Informer


@pytest.fixture
async def namespaces(kube: KubeClient) -> AsyncIterator[list[str]]:
    """Four fresh namespaces: three to watch, the last one not."""
    names = [unique_name(f"mw-{i}") for i in range(4)]
    for name in names:
        await create_namespace(kube, name)
    yield names
    for name in names:
        await delete_namespace(kube, name)


def _cm(name: str) -> dict[str, Any]:
    labels = {"merged-watch-test": "1"}  # every namespace has its own kube-root-ca.crt
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


async def test_filtered_cluster_wide_informer_keeps_only_its_namespaces(
    kube: KubeClient, namespaces: list[str]
) -> None:
    watched, outside = namespaces[:3], namespaces[3]
    await kube.create(CONFIGMAPS, _cm("before"), watched[0])
    await kube.create(CONFIGMAPS, _cm("before"), outside)
    seen: list[str] = []
    inf = Informer(
        kube, CONFIGMAPS, namespaces=frozenset(watched), label_selector="merged-watch-test"
    )
    inf.add_handler(Handler(on_add=lambda o: seen.append(o["metadata"]["namespace"])))
    inf.start()
    try:
        await inf.wait_synced(30)
        assert seen == [watched[0]]
        for ns in (outside, *watched):
            await kube.create(CONFIGMAPS, _cm("after"), ns)

        async def all_watched_seen() -> bool:
            return seen.count(watched[2]) == 1

        await wait_until(all_watched_seen, timeout=30, what="the last watched namespace's add")
        # The outside namespace's object came first on the same watch, so it was dropped,
        # not merely late.
        assert sorted(seen) == sorted([watched[0], *watched])
        assert inf.get(outside, "after") is None
        assert inf.get(watched[1], "after") is not None
        written = await kube.patch(CONFIGMAPS, "after", {"data": {"k": "v"}}, outside)
        assert inf.record_write(written) is False
        assert inf.get(outside, "after") is None
    finally:
        await inf.stop()


async def test_access_review_tells_cluster_wide_watch_rights(
    plane: Plane, kube: KubeClient, namespaces: list[str], tmp_path: Path
) -> None:
    wanted = rbac_rules.watched_resources()
    assert await watchable_cluster_wide(kube, wanted) == frozenset(wanted)
    ns = namespaces[0]
    await kube.create(SERVICEACCOUNTS, {"metadata": {"name": "nobody"}}, ns)
    answer = await kube.request(
        "POST",
        SERVICEACCOUNTS.path(ns, "nobody", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    config = load_kubeconfig(plane.kubeconfig)
    config.token = answer["status"]["token"]
    config.cert_file = config.key_file = None
    async with KubeClient(config, user_agent="access-probe") as nobody:
        assert await watchable_cluster_wide(nobody, wanted) == frozenset()


async def test_operator_watching_forty_namespaces_holds_one_connection(
    plane: Plane, kube: KubeClient, namespaces: list[str], tmp_path: Path
) -> None:
    await install_crds(kube)
    watched, outside = namespaces[:3], namespaces[3]
    # 37 more names that need not exist: a watch of a missing namespace is simply empty.
    names = [*watched, *(unique_name(f"mw-absent-{i}") for i in range(37))]
    op = OperatorProcess(plane, tmp_path, f"--watch-namespace={','.join(names)}")
    op.start()
    try:
        for ns in (*watched, outside):
            await kube.create(RAYCLUSTERS, small_raycluster("rc", 0), ns)

        async def heads_in_watched() -> bool:
            for ns in watched:
                pods = await kube.list(PODS, ns, label_selector="ray.io/node-type=head")
                if not pods["items"]:
                    return False
            return True

        await wait_until(heads_in_watched, timeout=120, what="a head pod in every watched ns")
        assert op.proc is not None
        port = int(plane.server.rsplit(":", 1)[1])
        assert tcp_connections(op.proc.pid, port) == 1, op.tail()
        log = op.tail(400)
        merged = len(rbac_rules.watched_resources())
        assert f"one cluster-wide watch for {merged} resource(s)" in log, log
        # The clusters of the watched namespaces converged, so the operator has long seen
        # the outside one's (created in the same loop): it made nothing for it.
        outside_pods = await kube.list(PODS, outside)
        assert outside_pods["items"] == []
        rc = await kube.get(RAYCLUSTERS, "rc", outside)
        assert not rc.get("status"), rc.get("status")
    finally:
        op.stop()
