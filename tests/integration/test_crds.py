"""The generated CRDs on the real apiserver (pinned Kubernetes v1.36.3).

Checks what only the apiserver can: the schemas are structural and install with server-side
apply, unknown fields are pruned, CRD defaults are applied, the CEL rules reject what upstream's
CRDs reject, v1alpha1 is served, hypothesis-generated specs survive a round trip unchanged, and
the committed OpenAPI snapshot still equals what the apiserver serves.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuberay.api import crdgen, openapi
from kuberay.devenv import manifests
from kuberay.devenv.crds import apply_crds
from kuberay.runtime.client import CRDS, KubeClient, Resource
from kuberay.runtime.errors import Invalid


def _load_strategies() -> Any:
    # The strategies live with the unit tests; integration tests are not a package.
    path = Path(__file__).resolve().parents[1] / "unit" / "api" / "strategies.py"
    spec = importlib.util.spec_from_file_location("kuberay_test_api_strategies", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_strategies = _load_strategies()
specs = _strategies.specs
statuses = _strategies.statuses

FIELD_MANAGER = "kuberay-crd-tests"
KINDS = {k.kind: k for k in crdgen.KINDS}


def resource(kind: str, version: str = "v1") -> Resource:
    return Resource("ray.io", version, KINDS[kind].plural, kind=kind)


async def install_crds(kube: KubeClient) -> None:
    await apply_crds(kube, field_manager=FIELD_MANAGER)


@pytest.fixture(scope="module")
async def crds(kube: KubeClient) -> None:
    await install_crds(kube)


def template(name: str = "ray") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, "image": "rayproject/ray:2.52.0"}]}}


def cluster_spec(**extra: Any) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": template()},
        "workerGroupSpecs": [
            {"groupName": "small", "minReplicas": 0, "maxReplicas": 2, "template": template()}
        ],
        **extra,
    }


def obj(kind: str, name: str, spec: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"ray.io/{version}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def job_spec(**extra: Any) -> dict[str, Any]:
    return {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": cluster_spec(), **extra}


async def test_crds_install_and_are_structural(kube: KubeClient, crds: None) -> None:
    for kind in crdgen.KINDS:
        got = await kube.get(CRDS, kind.name)
        conditions = {c["type"]: c for c in got["status"]["conditions"]}
        assert conditions["Established"]["status"] == "True"
        assert conditions["NamesAccepted"]["status"] == "True"
        assert "NonStructuralSchema" not in conditions
        managers = {m["manager"] for m in got["metadata"]["managedFields"]}
        assert FIELD_MANAGER in managers
        versions = {v["name"]: v for v in got["spec"]["versions"]}
        assert versions["v1"]["storage"] is True
        if kind.v1alpha1:
            assert versions["v1alpha1"]["deprecated"] is True
    # Re-applying the same CRDs is a no-op (idempotent install).
    before = await kube.get(CRDS, "rayclusters.ray.io")
    await install_crds(kube)
    after = await kube.get(CRDS, "rayclusters.ray.io")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


async def test_dev_install_writes_only_what_differs_from_the_served_crd(
    kube: KubeClient, crds: None
) -> None:
    """The dev tools' install (every operator fixture runs it) skips a CRD already served as
    applied, and re-applies one whose spec someone else changed."""
    name = "raycronjobs.ray.io"
    await manifests.install_crds(kube)
    before = await kube.get(CRDS, name)
    notes = before["metadata"]["annotations"]
    assert notes[manifests.APPLIED_GENERATION] == str(before["metadata"]["generation"])
    patches = kube.request_counts.get(("PATCH", 200), 0)
    await manifests.install_crds(kube)
    assert kube.request_counts.get(("PATCH", 200), 0) == patches  # nothing written

    changed = await kube.patch(CRDS, name, {"spec": {"names": {"categories": ["all", "zz"]}}})
    assert changed["metadata"]["generation"] == before["metadata"]["generation"] + 1
    patches = kube.request_counts.get(("PATCH", 200), 0)
    await manifests.install_crds(kube)
    # The one changed CRD: its apply, then the note of the generation that produced.
    assert kube.request_counts.get(("PATCH", 200), 0) == patches + 2
    repaired = await kube.get(CRDS, name)
    assert repaired["spec"]["names"]["categories"] == ["all"]
    assert repaired["metadata"]["annotations"][manifests.APPLIED_GENERATION] == str(
        repaired["metadata"]["generation"]
    )
    assert (
        repaired["metadata"]["annotations"][manifests.APPLIED_DIGEST]
        == (notes[manifests.APPLIED_DIGEST])
    )


async def test_defaults_and_pruning(kube: KubeClient, crds: None, namespace: str) -> None:
    spec = cluster_spec()
    spec["unknownTopLevel"] = {"a": 1}
    spec["headGroupSpec"]["bogus"] = True
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["notAField"] = "x"
    spec["workerGroupSpecs"][0]["extra"] = 1
    created = await kube.create(resource("RayCluster"), obj("RayCluster", "prune", spec), namespace)
    got = created["spec"]
    assert "unknownTopLevel" not in got
    assert "bogus" not in got["headGroupSpec"]
    assert "notAField" not in got["headGroupSpec"]["template"]["spec"]["containers"][0]
    worker = got["workerGroupSpecs"][0]
    assert "extra" not in worker
    assert (worker["replicas"], worker["numOfHosts"], worker["priority"]) == (0, 1, 0)
    job = await kube.create(resource("RayJob"), obj("RayJob", "defaults", job_spec()), namespace)
    assert job["spec"]["submissionMode"] == "K8sJobMode"
    assert (job["spec"]["backoffLimit"], job["spec"]["ttlSecondsAfterFinished"]) == (0, 0)


async def _rejected(kube: KubeClient, namespace: str, body: dict[str, Any]) -> str:
    with pytest.raises(Invalid) as info:
        await kube.create(resource(body["kind"]), body, namespace)
    return str(info.value)


REJECTED: list[tuple[str, Callable[[], dict[str, Any]], str]] = [
    (
        "managedBy-value",
        lambda: obj("RayCluster", "mb", cluster_spec(managedBy="someone-else")),
        "the managedBy field value must be either 'ray.io/kuberay-operator' or "
        "'kueue.x-k8s.io/multikueue'",
    ),
    (
        "job-managedBy-value",
        lambda: obj("RayJob", "mb", job_spec(managedBy="x")),
        "the managedBy field value must be either",
    ),
    (
        "service-managedBy-value",
        lambda: obj("RayService", "mb", {"rayClusterConfig": cluster_spec(), "managedBy": "x"}),
        "the managedBy field value must be either",
    ),
    (
        "deletion-mixed",
        lambda: obj(
            "RayJob",
            "del",
            job_spec(
                deletionStrategy={
                    "onSuccess": {"policy": "DeleteCluster"},
                    "deletionRules": [
                        {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}
                    ],
                }
            ),
        ),
        "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within "
        "the same deletionStrategy",
    ),
    (
        "deletion-half-legacy",
        lambda: obj(
            "RayJob", "del", job_spec(deletionStrategy={"onSuccess": {"policy": "DeleteSelf"}})
        ),
        "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
        "(cannot be empty)",
    ),
    (
        "deletion-rules-empty",
        lambda: obj("RayJob", "del", job_spec(deletionStrategy={"deletionRules": []})),
        "spec.deletionStrategy.deletionRules: Invalid value: 0",
    ),
    (
        "condition-both",
        lambda: obj(
            "RayJob",
            "del",
            job_spec(
                deletionStrategy={
                    "deletionRules": [
                        {
                            "policy": "DeleteSelf",
                            "condition": {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"},
                        }
                    ]
                }
            ),
        ),
        "JobStatus and JobDeploymentStatus cannot be used together within the same deletion "
        "condition.",
    ),
    (
        "condition-none",
        lambda: obj(
            "RayJob",
            "del",
            job_spec(
                deletionStrategy={"deletionRules": [{"policy": "DeleteSelf", "condition": {}}]}
            ),
        ),
        "the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
    ),
    (
        "policy-enum",
        lambda: obj(
            "RayJob",
            "del",
            job_spec(
                deletionStrategy={
                    "deletionRules": [{"policy": "Explode", "condition": {"jobStatus": "FAILED"}}]
                }
            ),
        ),
        'Unsupported value: "Explode"',
    ),
    (
        "ttl-minimum",
        lambda: obj(
            "RayJob",
            "del",
            job_spec(
                deletionStrategy={
                    "deletionRules": [
                        {
                            "policy": "DeleteSelf",
                            "condition": {"jobStatus": "FAILED", "ttlSeconds": -1},
                        }
                    ]
                }
            ),
        ),
        "should be greater than or equal to 0",
    ),
    (
        "prerunning-minimum",
        lambda: obj("RayJob", "pre", job_spec(preRunningDeadlineSeconds=0)),
        "should be greater than or equal to 1",
    ),
    (
        "deletion-delay-minimum",
        lambda: obj(
            "RayService",
            "svc",
            {"rayClusterConfig": cluster_spec(), "rayClusterDeletionDelaySeconds": -1},
        ),
        "should be greater than or equal to 0",
    ),
    (
        "upgrade-enum",
        lambda: obj("RayCluster", "up", cluster_spec(upgradeStrategy={"type": "Rolling"})),
        'Unsupported value: "Rolling"',
    ),
    (
        "auth-enum",
        lambda: obj("RayCluster", "auth", cluster_spec(authOptions={"mode": "password"})),
        'Unsupported value: "password"',
    ),
    (
        "backend-enum",
        lambda: obj("RayCluster", "ft", cluster_spec(gcsFaultToleranceOptions={"backend": "etcd"})),
        'Unsupported value: "etcd"',
    ),
    (
        "head-required",
        lambda: obj("RayCluster", "nohead", {}),
        "spec.headGroupSpec: Required value",
    ),
    (
        "worker-group-required",
        lambda: obj(
            "RayCluster", "nogroup", cluster_spec(workerGroupSpecs=[{"template": template()}])
        ),
        "spec.workerGroupSpecs[0].groupName: Required value",
    ),
    (
        "quantity-pattern",
        lambda: obj(
            "RayCluster",
            "size",
            cluster_spec(
                gcsFaultToleranceOptions={"backend": "rocksdb", "storage": {"size": "lots"}}
            ),
        ),
        "spec.gcsFaultToleranceOptions.storage.size",
    ),
    (
        "network-policy-groups-unique",
        lambda: obj(
            "RayCluster",
            "np",
            cluster_spec(networkPolicy={"workerGroups": [{"groupName": "a"}, {"groupName": "a"}]}),
        ),
        "Duplicate value",
    ),
    (
        "timezone-min-length",
        lambda: obj(
            "RayCronJob",
            "cron",
            {"schedule": "* * * * *", "timeZone": "", "jobTemplate": job_spec()},
        ),
        "spec.timeZone",
    ),
    (
        "cron-required",
        lambda: obj("RayCronJob", "cron", {"jobTemplate": job_spec()}),
        "spec.schedule: Required value",
    ),
    (
        "cron-template-managedBy",
        lambda: obj(
            "RayCronJob", "cron", {"schedule": "* * * * *", "jobTemplate": job_spec(managedBy="x")}
        ),
        "the managedBy field value must be either",
    ),
]


@pytest.mark.parametrize(
    ("build", "message"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED]
)
async def test_schema_and_cel_reject(
    kube: KubeClient, crds: None, namespace: str, build: Callable[[], dict[str, Any]], message: str
) -> None:
    assert message in await _rejected(kube, namespace, build())


async def test_immutability_rules(kube: KubeClient, crds: None, namespace: str) -> None:
    res = resource("RayCluster")
    spec = cluster_spec(
        managedBy="ray.io/kuberay-operator", gcsFaultToleranceOptions={"backend": "redis"}
    )
    created = await kube.create(res, obj("RayCluster", "immutable", spec), namespace)
    changed = copy.deepcopy(created)
    changed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    with pytest.raises(Invalid, match="the managedBy field is immutable"):
        await kube.update(res, changed)
    changed = copy.deepcopy(created)
    changed["spec"]["gcsFaultToleranceOptions"]["backend"] = "rocksdb"
    with pytest.raises(Invalid, match=re.escape("gcsFaultToleranceOptions.backend is immutable")):
        await kube.update(res, changed)
    # Other fields stay mutable.
    changed = copy.deepcopy(created)
    changed["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    updated = await kube.update(res, changed)
    assert updated["spec"]["workerGroupSpecs"][0]["replicas"] == 2


async def test_v1alpha1_is_served_from_v1_storage(
    kube: KubeClient, crds: None, namespace: str
) -> None:
    spec = cluster_spec()
    spec["workerGroupSpecs"][0]["rayStartParams"] = {}  # required in v1alpha1
    created = await kube.create(
        resource("RayCluster", "v1alpha1"), obj("RayCluster", "old", spec, "v1alpha1"), namespace
    )
    assert created["apiVersion"] == "ray.io/v1alpha1"
    as_v1 = await kube.get(resource("RayCluster"), "old", namespace)
    assert as_v1["apiVersion"] == "ray.io/v1"
    assert as_v1["spec"]["headGroupSpec"]["template"] == spec["headGroupSpec"]["template"]
    # Fields v1alpha1 never had are pruned from v1alpha1 requests.
    newer = obj("RayCluster", "old-auth", {**spec, "authOptions": {"mode": "token"}}, "v1alpha1")
    created = await kube.create(resource("RayCluster", "v1alpha1"), newer, namespace)
    assert "authOptions" not in created["spec"]


async def test_status_subresource_and_printer_columns(
    kube: KubeClient, crds: None, namespace: str
) -> None:
    res = resource("RayCluster")
    created = await kube.create(res, obj("RayCluster", "status", cluster_spec()), namespace)
    created["status"] = {"state": "ready", "desiredWorkerReplicas": 2, "desiredCPU": "3"}
    updated = await kube.update_status(res, created)
    assert updated["status"]["state"] == "ready"
    table = await kube.request(
        "GET",
        res.path(namespace, "status"),
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:4] == ["Name", "desired workers", "available workers", "cpus"]
    cells = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert (cells["desired workers"], cells["cpus"], cells["status"]) == (2, "3", "ready")


def draw(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` hypothesis examples, collected synchronously (the apiserver calls are async)."""
    out: list[Any] = []

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_generated_specs_round_trip_through_the_apiserver(
    kube: KubeClient, crds: None, namespace: str, kind: str
) -> None:
    res = resource(kind)
    examples = draw(specs(kind), 25)
    assert len(examples) >= 10
    for i, spec in enumerate(examples):
        body = obj(kind, f"{kind.lower()}-{i}", spec)
        created = await kube.create(res, body, namespace)
        assert created["spec"] == json.loads(json.dumps(spec)), f"example {i} changed"


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
async def test_generated_statuses_round_trip_through_the_status_subresource(
    kube: KubeClient, crds: None, namespace: str, kind: str
) -> None:
    res = resource(kind)
    spec = cluster_spec() if kind == "RayCluster" else job_spec()
    for i, status in enumerate(draw(statuses(kind), 10)):
        created = await kube.create(res, obj(kind, f"status-{i}", spec), namespace)
        created["status"] = status
        updated = await kube.update_status(res, created)
        assert updated["status"] == json.loads(json.dumps(status)), f"example {i} changed"


@pytest.mark.slow
async def test_openapi_snapshot_matches_the_apiserver(kube: KubeClient) -> None:
    documents = [await kube.request("GET", f"/openapi/v3/{path}") for path in openapi.GROUP_PATHS]
    live = openapi.trim(documents)
    assert live == openapi.snapshot(), (
        "the apiserver's core schemas changed: refresh with "
        "`python -m kuberay.cli.snapshot --kubeconfig ...` and regenerate the CRDs"
    )


async def test_deletion_strategy_cel_matrix(kube: KubeClient, crds: None, namespace: str) -> None:
    """Every combination of strategy fields and condition fields: accepted iff upstream's
    rules say so (legacy xor rules; legacy needs both; a condition needs exactly one field)."""
    res = resource("RayJob")
    i = 0
    for legacy in ([], ["onSuccess"], ["onFailure"], ["onSuccess", "onFailure"]):
        for rules in (False, True):
            for cond in (
                {},
                {"jobStatus": "FAILED"},
                {"jobDeploymentStatus": "Failed"},
                {
                    "jobStatus": "FAILED",
                    "jobDeploymentStatus": "Failed",
                },
            ):
                if not rules and cond:
                    continue  # the condition only exists inside rules
                strategy: dict[str, Any] = {k: {"policy": "DeleteCluster"} for k in legacy}
                if rules:
                    strategy["deletionRules"] = [{"policy": "DeleteSelf", "condition": cond}]
                expected = (
                    not (legacy and rules)
                    and (len(legacy) == 2 or rules)
                    and (not rules or len(cond) == 1)
                )
                body = obj("RayJob", f"matrix-{i}", job_spec(deletionStrategy=strategy))
                i += 1
                try:
                    await kube.create(res, body, namespace)
                    accepted = True
                except Invalid:
                    accepted = False
                assert accepted == expected, strategy
    assert i == 20
