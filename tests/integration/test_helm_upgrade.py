"""``helm upgrade`` of an upstream kuberay-operator (v1.7.0) release to this project's chart.

The move a user makes to switch operators: the release keeps its name, and Helm must be able to
patch every object the upstream chart created. That only works when the identities match: a
Deployment's ``spec.selector`` and a binding's ``roleRef`` are immutable (a mismatch fails the
upgrade), and an object renamed by our chart would be deleted and recreated under the new name
(RBAC briefly missing, or left behind). The custom resources and their pods must come through
untouched: Helm never updates ``crds/`` on upgrade, and nothing in the chart owns them.

Upstream's chart is not available offline and is not copied here. The test writes, in a temp
dir, a minimal chart of its own with only the identity facts of upstream's v1.7.0 release
(``UPSTREAM_OBJECTS``, ``UPSTREAM_SELECTOR``, ``UPSTREAM_LABELS``: names, selector, labels,
roleRefs) and our generated CRDs in ``crds/`` where upstream ships its CRDs. Our operator runs
out-of-cluster in place of upstream's; KWOK runs the pods, so nothing real is started.

Failure modes caught: an immutable-field error or an ownership conflict from ``helm upgrade``;
an object recreated (uid changed) or not relabelled by our chart; a CRD, custom resource or Ray
pod deleted or recreated by the upgrade or by ``helm rollback`` to the upstream revision.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_fixture import CHART, OperatorProcess, run_helm

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from kuberay.devenv.manifests import CRD_DIR
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import has_condition, wait_for, wait_until
from kuberay.runtime.client import CRDS, PODS, KubeClient, Resource
from kuberay.runtime.errors import NotFound

RELEASE = "kuberay-operator"  # the release name upstream's install docs use
UPSTREAM_VERSION = "1.7.0"

# Facts of upstream's chart at v1.7.0 with default values (fullnameOverride and nameOverride
# "kuberay-operator", serviceAccount.name "kuberay-operator", rbacEnable, not
# singleNamespaceInstall), read from ray-project/kuberay helm-chart/kuberay-operator/ (recent
# stored revisions of the templates named below; the defaults from upstream's v1.7.0 values).
# Selector: templates/deployment.yaml (spec.selector.matchLabels), also the Service's selector.
UPSTREAM_SELECTOR = {
    "app.kubernetes.io/name": "kuberay-operator",
    "app.kubernetes.io/instance": RELEASE,
}
# Labels: the "kuberay-operator.labels" helper of templates/_helpers.tpl (the chart label is
# "<chart name>-<chart version>"; Chart.yaml has no appVersion, so no version label).
UPSTREAM_LABELS = {
    **UPSTREAM_SELECTOR,
    "helm.sh/chart": f"kuberay-operator-{UPSTREAM_VERSION}",
    "app.kubernetes.io/managed-by": "Helm",
}
# Pod template labels: deployment.yaml adds app.kubernetes.io/component (componentOverride).
UPSTREAM_POD_LABELS = {**UPSTREAM_SELECTOR, "app.kubernetes.io/component": "kuberay-operator"}
# Our chart's label set includes this one and upstream's does not (both charts' helpers).
OUR_CHART_LABEL = "helm.sh/chart", "kuberay-operator-0.1.0"
OUR_ONLY_LABEL = "app.kubernetes.io/part-of", "kuberay"

RBAC = "rbac.authorization.k8s.io", "v1"


@dataclass(frozen=True)
class Upstream:
    """One object of upstream's default release: where it is and which template renders it."""

    resource: Resource
    name: str
    template: str

    @property
    def api_version(self) -> str:
        group = self.resource.group
        return f"{group}/{self.resource.version}" if group else self.resource.version


def _rbac(plural: str, kind: str, namespaced: bool) -> Resource:
    return Resource(*RBAC, plural, namespaced=namespaced, kind=kind)


CLUSTERROLES = _rbac("clusterroles", "ClusterRole", False)
CLUSTERROLEBINDINGS = _rbac("clusterrolebindings", "ClusterRoleBinding", False)
ROLES = _rbac("roles", "Role", True)
ROLEBINDINGS = _rbac("rolebindings", "RoleBinding", True)

UPSTREAM_OBJECTS: tuple[Upstream, ...] = (
    Upstream(Resource("apps", "v1", "deployments", kind="Deployment"), RELEASE, "deployment.yaml"),
    Upstream(
        Resource("", "v1", "serviceaccounts", kind="ServiceAccount"),
        "kuberay-operator",
        "serviceaccount.yaml",
    ),
    Upstream(Resource("", "v1", "services", kind="Service"), "kuberay-operator", "service.yaml"),
    Upstream(CLUSTERROLES, "kuberay-operator", "role.yaml"),
    Upstream(CLUSTERROLEBINDINGS, "kuberay-operator", "rolebinding.yaml"),
    Upstream(ROLES, "kuberay-operator-leader-election", "leader_election_role.yaml"),
    Upstream(ROLEBINDINGS, "kuberay-operator-leader-election", "leader_election_role_binding.yaml"),
    # The user-facing roles: fixed names, not derived from the release.
    *(
        Upstream(CLUSTERROLES, f"{kind}-{role}-role", f"ray_{kind}_{role}_role.yaml")
        for kind in ("raycluster", "rayjob", "rayservice", "raycronjob")
        for role in ("editor", "viewer")
    ),
)
# roleRef of each binding (immutable): the binding's own name, kind Role/ClusterRole.
ROLE_REFS = {
    "kuberay-operator": "ClusterRole",
    "kuberay-operator-leader-election": "Role",
}


def _manifest(obj: Upstream, namespace: str) -> dict[str, Any]:
    """Our own minimal rendering of one upstream object: identity, labels, and the few fields the
    apiserver requires (contents beyond identity do not decide whether an upgrade works)."""
    meta: dict[str, Any] = {"name": obj.name, "labels": dict(UPSTREAM_LABELS)}
    if obj.resource.namespaced:
        meta["namespace"] = namespace
    doc: dict[str, Any] = {"apiVersion": obj.api_version, "kind": obj.resource.kind}
    doc["metadata"] = meta
    kind = obj.resource.kind
    subject = {"kind": "ServiceAccount", "name": "kuberay-operator", "namespace": namespace}
    if kind == "Deployment":
        doc["spec"] = {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(UPSTREAM_SELECTOR)},
            "template": {
                "metadata": {"labels": dict(UPSTREAM_POD_LABELS)},
                "spec": {
                    "serviceAccountName": "kuberay-operator",
                    "containers": [
                        {
                            "name": "kuberay-operator",
                            "image": f"quay.io/kuberay/operator:v{UPSTREAM_VERSION}",
                            "ports": [{"name": "http", "containerPort": 8080}],
                        }
                    ],
                },
            },
        }
    elif kind == "Service":
        doc["spec"] = {
            "type": "ClusterIP",
            "selector": dict(UPSTREAM_SELECTOR),
            "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
        }
    elif kind in ("ClusterRole", "Role"):
        doc["rules"] = [{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]}]
    elif kind in ("ClusterRoleBinding", "RoleBinding"):
        ref_kind = ROLE_REFS[obj.name]
        doc["roleRef"] = {"apiGroup": RBAC[0], "kind": ref_kind, "name": obj.name}
        doc["subjects"] = [subject]
    return doc


def write_upstream_shaped_chart(directory: Path, namespace: str) -> Path:
    """A chart named and versioned as upstream's v1.7.0, with one template per upstream template
    (already rendered for ``namespace``) and our CRDs in ``crds/``."""
    chart = directory / "upstream-kuberay-operator"
    (chart / "templates").mkdir(parents=True)
    (chart / "crds").mkdir()
    meta = {"apiVersion": "v2", "name": "kuberay-operator", "version": UPSTREAM_VERSION}
    (chart / "Chart.yaml").write_text(yaml.safe_dump({**meta, "type": "application"}))
    for obj in UPSTREAM_OBJECTS:
        (chart / "templates" / obj.template).write_text(yaml.safe_dump(_manifest(obj, namespace)))
    for crd in sorted(CRD_DIR.glob("*.yaml")):
        shutil.copy(crd, chart / "crds" / crd.name)
    return chart


def _container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "rayproject/ray:2.52.0",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    }


CLUSTER_SPEC: dict[str, Any] = {
    "rayVersion": "2.52.0",
    "headGroupSpec": {
        "rayStartParams": {},
        "template": {"spec": {"containers": [_container("ray-head")]}},
    },
    "workerGroupSpecs": [
        {
            "groupName": "workers",
            "replicas": 1,
            "minReplicas": 0,
            "maxReplicas": 4,
            "rayStartParams": {},
            "template": {"spec": {"containers": [_container("ray-worker")]}},
        }
    ],
}


def custom_resources() -> list[tuple[Resource, dict[str, Any]]]:
    """A RayCluster, a RayJob and a RayService, each of which makes one head and one worker."""
    spec = copy.deepcopy
    return [
        (
            RAYCLUSTERS,
            {"kind": "RayCluster", "metadata": {"name": "rc"}, "spec": spec(CLUSTER_SPEC)},
        ),
        (
            RAYJOBS,
            {
                "kind": "RayJob",
                "metadata": {"name": "rj"},
                "spec": {"entrypoint": "python -c 'pass'", "rayClusterSpec": spec(CLUSTER_SPEC)},
            },
        ),
        (
            RAYSERVICES,
            {
                "kind": "RayService",
                "metadata": {"name": "rs"},
                "spec": {
                    "serveConfigV2": "applications: []\n",
                    "rayClusterConfig": spec(CLUSTER_SPEC),
                },
            },
        ),
    ]


async def ray_pods(
    kube: KubeClient, namespace: str, res: Resource, obj: dict[str, Any]
) -> dict[str, list[str]]:
    """uids of the RayClusters a custom resource brought about (itself, or the ones it created,
    which carry its kind and name as labels), each with the uids of its pods."""
    name = obj["metadata"]["name"]
    if res is RAYCLUSTERS:
        clusters = [await kube.get(RAYCLUSTERS, name, namespace)]
    else:
        origin = f"ray.io/originated-from-crd={obj['kind']},ray.io/originated-from-cr-name={name}"
        clusters = (await kube.list(RAYCLUSTERS, namespace, label_selector=origin))["items"]
    out: dict[str, list[str]] = {}
    for cluster in clusters:
        meta = cluster["metadata"]
        selector = f"ray.io/cluster={meta['name']}"
        pods = (await kube.list(PODS, namespace, label_selector=selector))["items"]
        out[f"{meta['name']} {meta['uid']}"] = sorted(p["metadata"]["uid"] for p in pods)
    return out


def crd_names() -> list[str]:
    """``ray.io_rayclusters.yaml`` -> ``rayclusters.ray.io`` (the files are megabytes of YAML:
    too slow to parse for their names on a busy machine)."""
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        group, _, plural = path.stem.partition("_")
        names.append(f"{plural}.{group}")
    return names


async def snapshot(kube: KubeClient, namespace: str) -> dict[str, object]:
    """uids of everything that must survive: CRDs, custom resources, Ray pods, release objects."""
    uids: dict[str, object] = {}
    for name in crd_names():
        uids[f"crd/{name}"] = (await kube.get(CRDS, name, None))["metadata"]["uid"]
    for res, obj in custom_resources():
        name = obj["metadata"]["name"]
        uids[f"{res.plural}/{name}"] = (await kube.get(res, name, namespace))["metadata"]["uid"]
        uids[f"pods of {res.plural}/{name}"] = await ray_pods(kube, namespace, res, obj)
    for up in UPSTREAM_OBJECTS:
        ns = namespace if up.resource.namespaced else None
        uids[f"{up.resource.plural}/{up.name}"] = (await kube.get(up.resource, up.name, ns))[
            "metadata"
        ]["uid"]
    return uids


async def release_labels(kube: KubeClient, namespace: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for up in UPSTREAM_OBJECTS:
        ns = namespace if up.resource.namespaced else None
        obj = await kube.get(up.resource, up.name, ns)
        out[f"{up.resource.plural}/{up.name}"] = obj["metadata"].get("labels", {})
    return out


async def test_upgrade_from_upstream_release_keeps_everything(
    helm: Path,
    plane: Plane,
    kube: KubeClient,
    namespace: str,
    operator_proc: OperatorProcess,
    tmp_path: Path,
) -> None:
    def run(*args: str) -> str:
        out: str = run_helm(helm, plane.kubeconfig, tmp_path, *args, "-n", namespace)
        return out

    upstream = write_upstream_shaped_chart(tmp_path, namespace)
    run("install", RELEASE, str(upstream), "--wait=false")
    try:
        await _upgrade_and_roll_back(run, kube, namespace, operator_proc)
    finally:
        # The release's ClusterRoles are cluster-wide: leaving them would clash with the next
        # release that renders them (test_helm_install.py).
        run("uninstall", RELEASE)
    with pytest.raises(NotFound):
        await kube.get(CLUSTERROLES, "kuberay-operator")


async def _upgrade_and_roll_back(
    run: Callable[..., str], kube: KubeClient, namespace: str, operator_proc: OperatorProcess
) -> None:
    for name in crd_names():
        await wait_for(kube, CRDS, name, None, lambda o: has_condition(o, "Established"))
    operator_proc.start()

    for res, obj in custom_resources():
        await kube.create(res, {"apiVersion": "ray.io/v1", **obj}, namespace)
    for res, obj in custom_resources():

        async def one_cluster_two_pods(res: Resource = res, obj: dict[str, Any] = obj) -> bool:
            clusters = await ray_pods(kube, namespace, res, obj)
            return [len(pods) for pods in clusters.values()] == [2]

        what = (
            f"one RayCluster with head and worker pods from {res.plural}/{obj['metadata']['name']}"
        )
        await wait_until(one_cluster_two_pods, timeout=90, what=what)

    before = await snapshot(kube, namespace)
    assert all(v for v in before.values()), before
    labels = await release_labels(kube, namespace)
    assert all(
        lbl.get("helm.sh/chart") == UPSTREAM_LABELS["helm.sh/chart"] for lbl in labels.values()
    )

    # Our chart, default values: no immutable-field error, no ownership conflict.
    run("upgrade", RELEASE, str(CHART))
    assert await snapshot(kube, namespace) == before
    for key, lbl in (await release_labels(kube, namespace)).items():
        assert lbl.get(OUR_CHART_LABEL[0]) == OUR_CHART_LABEL[1], (key, lbl)
        assert lbl.get(OUR_ONLY_LABEL[0]) == OUR_ONLY_LABEL[1], (key, lbl)
        assert lbl.get("app.kubernetes.io/instance") == RELEASE, (key, lbl)
    history = yaml.safe_load(run("history", RELEASE, "-o", "yaml"))
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "deployed")]

    # Back to the upstream revision: same objects again, upstream's labels, nothing recreated.
    run("rollback", RELEASE, "1")
    assert await snapshot(kube, namespace) == before
    for key, lbl in (await release_labels(kube, namespace)).items():
        assert lbl.get("helm.sh/chart") == UPSTREAM_LABELS["helm.sh/chart"], (key, lbl)
        assert OUR_ONLY_LABEL[0] not in lbl, (key, lbl)
    # The operator was never disturbed by the chart changes around it.
    assert operator_proc.proc is not None
    assert operator_proc.proc.poll() is None
