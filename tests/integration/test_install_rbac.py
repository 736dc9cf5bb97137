"""The generated RBAC is enough: the operator runs as the ``kuberay-operator`` ServiceAccount bound
to exactly ``deploy/rbac/`` and still gets a RayCluster (with autoscaler RBAC, which Kubernetes only
lets it create if it holds every permission it grants) and a RayJob's cluster and submitter going,
takes the leader Lease and records Events, with no ``forbidden`` anywhere in its log.

The operator authenticates with a TokenRequest token for the ServiceAccount, as it would in a pod;
the admin client only sets the stage and observes.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_fixture import OperatorProcess, install_crds

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS
from kuberay.cli import manifests
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    create_namespace,
    delete_namespace,
    unique_name,
    wait_for,
    wait_until,
)
from kuberay.runtime.client import (
    JOBS,
    LEASES,
    SERVICEACCOUNTS,
    KubeClient,
    Resource,
    load_kubeconfig,
)
from kuberay.runtime.errors import Forbidden, NotFound
from kuberay.runtime.events import EVENTS_V1

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_RBAC = "rbac.authorization.k8s.io"
CLUSTERROLES = Resource(_RBAC, "v1", "clusterroles", namespaced=False, kind="ClusterRole")
CLUSTERROLEBINDINGS = Resource(
    _RBAC, "v1", "clusterrolebindings", namespaced=False, kind="ClusterRoleBinding"
)
ROLES = Resource(_RBAC, "v1", "roles", kind="Role")
ROLEBINDINGS = Resource(_RBAC, "v1", "rolebindings", kind="RoleBinding")
KINDS = {
    "ServiceAccount": SERVICEACCOUNTS,
    "ClusterRole": CLUSTERROLES,
    "ClusterRoleBinding": CLUSTERROLEBINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLEBINDINGS,
}


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((DEPLOY / "rbac" / name).read_text())
    return doc


async def _install_rbac(kube: KubeClient, ns: str, suffix: str) -> list[tuple[Resource, str]]:
    """Creates the committed deploy/rbac objects for namespace ``ns`` (what kustomize does), with
    cluster-scoped names made unique to this test. Returns what to delete afterwards."""
    created: list[tuple[Resource, str]] = []
    for name in manifests.RBAC_FILES:
        obj = copy.deepcopy(_load(Path(name).name))
        res = KINDS[obj["kind"]]
        if not res.namespaced:
            obj["metadata"]["name"] += f"-{suffix}"
            if "roleRef" in obj:
                obj["roleRef"]["name"] += f"-{suffix}"
        for subject in obj.get("subjects", []):
            subject["namespace"] = ns
        await kube.create(res, obj, ns if res.namespaced else None)
        if not res.namespaced:
            created.append((res, obj["metadata"]["name"]))
    return created


async def _service_account_kubeconfig(
    kube: KubeClient, plane: Plane, ns: str, directory: Path
) -> Path:
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    path = SERVICEACCOUNTS.path(ns, manifests.NAME, "token")
    answer = await kube.request("POST", path, request)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "plane",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority": str(plane.pki.ca_cert),
                },
            }
        ],
        "users": [{"name": "operator", "user": {"token": answer["status"]["token"]}}],
        "contexts": [{"name": "operator", "context": {"cluster": "plane", "user": "operator"}}],
        "current-context": "operator",
    }
    out = directory / "operator.kubeconfig"
    out.write_text(yaml.safe_dump(doc))
    out.chmod(0o600)
    return out


def _cluster_spec(autoscaling: bool) -> dict[str, Any]:
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.52.0",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    }
    worker = copy.deepcopy(head)
    worker["name"] = "ray-worker"
    spec: dict[str, Any] = {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": 1,
                "minReplicas": 0,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def _ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("state") == "ready")


@pytest.fixture
async def install_ns(kube: KubeClient) -> AsyncIterator[str]:
    name = unique_name("kuberay-system")
    await create_namespace(kube, name)
    yield name
    await delete_namespace(kube, name)


async def test_operator_runs_under_the_generated_rbac(
    plane: Plane, kube: KubeClient, namespace: str, install_ns: str, tmp_path: Path
) -> None:
    await install_crds(kube)
    cluster_scoped = await _install_rbac(kube, install_ns, install_ns)
    kubeconfig = await _service_account_kubeconfig(kube, plane, install_ns, tmp_path)
    identity = f"system:serviceaccount:{install_ns}:{manifests.NAME}"
    op = OperatorProcess(
        plane,
        tmp_path,
        f"--kubeconfig={kubeconfig}",
        "--enable-leader-election=true",
        f"--leader-election-namespace={install_ns}",
        "--use-kubernetes-proxy=true",
        "--feature-gates=RayCronJob=true",
    )
    op.start()
    try:
        # The token really is the ServiceAccount, confined to what the rules grant.
        sa_config = load_kubeconfig(kubeconfig)
        async with KubeClient(sa_config, user_agent="rbac-probe") as sa:
            review = await sa.request(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            )
            assert review["status"]["userInfo"]["username"] == identity
            with pytest.raises(Forbidden):
                await sa.list(Resource("", "v1", "configmaps", kind="ConfigMap"), namespace)

        await kube.create(
            RAYCLUSTERS,
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "scaled"},
                "spec": _cluster_spec(autoscaling=True),
            },
            namespace,
        )
        await wait_for(kube, RAYCLUSTERS, "scaled", namespace, _ready, timeout=90, what="ready")
        # Created by the operator under RBAC escalation rules: it must hold what they grant.
        await kube.get(SERVICEACCOUNTS, "scaled", namespace)
        role = await kube.get(ROLES, "scaled", namespace)
        assert {tuple(r["resources"]) for r in role["rules"]} >= {("pods",), ("rayclusters",)}
        await kube.get(ROLEBINDINGS, "scaled", namespace)

        job = {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "job"},
            "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": _cluster_spec(False)},
        }
        await kube.create(RAYJOBS, job, namespace)
        got = await wait_for(
            kube,
            RAYJOBS,
            "job",
            namespace,
            lambda o: bool((o.get("status") or {}).get("rayClusterName")),
            timeout=60,
            what="status.rayClusterName",
        )
        cluster_name = got["status"]["rayClusterName"]
        await wait_for(kube, RAYCLUSTERS, cluster_name, namespace, _ready, timeout=90, what="ready")

        async def submitter_created() -> bool:
            try:
                await kube.get(JOBS, "job", namespace)
            except NotFound:
                return False
            return True

        await wait_until(submitter_created, timeout=60, what="the submitter K8s Job")

        lease = await wait_for(
            kube,
            LEASES,
            "ray-operator-leader",
            install_ns,
            lambda o: bool(o["spec"].get("holderIdentity")),
            timeout=30,
            what="a holder",
        )
        assert lease["spec"]["holderIdentity"]

        async def events_recorded() -> bool:
            items = (await kube.list(EVENTS_V1, namespace))["items"]
            return any(e.get("reportingController") for e in items)

        await wait_until(events_recorded, timeout=30, what="events.k8s.io Events from the operator")
    finally:
        code = op.stop()
        for res, name in cluster_scoped:
            await kube.delete(res, name)
    log = op.log_path.read_text(errors="replace")
    assert code == 0, op.tail()
    # A namespace another test is deleting refuses new events with a 403 too; that is the
    # namespace lifecycle, not a missing permission.
    forbidden = [
        line
        for line in log.splitlines()
        if "forbidden" in line.lower() and "because it is being terminated" not in line
    ]
    assert forbidden == [], "\n".join(forbidden[:20])


# What docs/threat-model.md says the operator's identity may and may not do, asked of the real
# authorizer (SubjectAccessReview, with the groups a ServiceAccount token carries) in a namespace
# the operator watches, so that no default or aggregated binding widens the generated role.
ALLOWED = [
    ("", "secrets", "get", ""),
    ("", "secrets", "create", ""),
    ("", "secrets", "update", ""),  # mTLS: owner references on cert-manager's Secrets
    ("", "pods", "create", ""),
    ("rbac.authorization.k8s.io", "roles", "create", ""),
    ("ray.io", "rayclusters", "update", "status"),
]
DENIED = [
    ("", "secrets", "list", ""),
    ("", "secrets", "watch", ""),
    ("", "secrets", "delete", ""),
    ("", "secrets", "patch", ""),
    ("", "pods", "create", "exec"),
    ("", "pods", "get", "log"),
    ("", "pods", "deletecollection", ""),
    ("", "configmaps", "get", ""),
    ("", "serviceaccounts", "create", "token"),
    ("rbac.authorization.k8s.io", "roles", "bind", ""),
    ("rbac.authorization.k8s.io", "roles", "escalate", ""),
    ("rbac.authorization.k8s.io", "clusterroles", "create", ""),
    ("", "users", "impersonate", ""),
    ("", "serviceaccounts", "impersonate", ""),
    ("coordination.k8s.io", "leases", "update", ""),
    ("apiextensions.k8s.io", "customresourcedefinitions", "update", ""),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "create", ""),
]


async def _allowed(
    kube: KubeClient, install_ns: str, ns: str | None, attrs: tuple[str, str, str, str]
) -> bool:
    group, resource, verb, subresource = attrs
    resource_attributes: dict[str, str] = {"group": group, "resource": resource, "verb": verb}
    if subresource:
        resource_attributes["subresource"] = subresource
    if ns is not None:
        resource_attributes["namespace"] = ns
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{install_ns}:{manifests.NAME}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{install_ns}",
                "system:authenticated",
            ],
            "resourceAttributes": resource_attributes,
        },
    }
    answer = await kube.request(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
    )
    return bool(answer["status"].get("allowed"))


async def test_threat_model_claims_hold_on_the_real_authorizer(
    kube: KubeClient, namespace: str, install_ns: str
) -> None:
    cluster_scoped = await _install_rbac(kube, install_ns, install_ns)
    try:
        for ns in (namespace, None):  # a watched namespace, and cluster-wide
            allowed = [a for a in ALLOWED if await _allowed(kube, install_ns, ns, a)]
            assert allowed == ALLOWED, ns
            denied = [a for a in DENIED if await _allowed(kube, install_ns, ns, a)]
            assert denied == [], f"granted but documented as absent ({ns or 'cluster-wide'})"
        # The Lease permissions are the leader-election Role's, in the operator's namespace only.
        lease = ("coordination.k8s.io", "leases", "update", "")
        assert await _allowed(kube, install_ns, install_ns, lease)
    finally:
        for res, name in cluster_scoped:
            await kube.delete(res, name)
