"""Pure builders for a RayService's children: its RayClusters and the head / serve Services that
point at whichever cluster is active, plus the hashes that decide "same cluster or new one".

Invariants and failure modes:
- No I/O, no clock, no randomness: the cluster name comes from the RayService's *status*
  (persisted before anything is built), so a rebuilt object after a crash is identical.
- The goal hash ignores replica counts, ``workersToDelete`` and ``suspend`` (see
  ``builders.hashing``), so scaling never looks like a new cluster. Appending worker groups is
  recognised through the *partial* hash (the goal's first N groups hash like the cluster's).
- ``rayClusterConfig.suspend`` is what Kueue's RayService integration toggles (admission,
  preemption): a toggle is applied to the existing cluster in place and never prepares a new
  one, as upstream does.
- The Services are named after the RayService (never after a cluster), so promoting a new
  cluster only changes their ``ray.io/cluster`` selector.
- ``build_serve_service`` raises ``BuildError`` when neither the head container nor a custom
  ``serveService`` declares a serve port.
- ``serve_config`` raises ``ValueError`` when ``serveConfigV2`` is not a YAML mapping.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from kuberay.api import constants as c
from kuberay.api.resources import owner_reference as controller_reference
from kuberay.builders.common import JsonDict, as_dict, as_list, spec_of
from kuberay.builders.errors import BuildError
from kuberay.builders.hashing import json_hash, spec_hash
from kuberay.builders.options import BuildOptions
from kuberay.builders.service import build_head_service_for_cr, build_serve_service

DEFAULT_DELETION_DELAY_SECONDS = 60


def service_name(svc: JsonDict) -> str:
    return str(as_dict(svc.get("metadata")).get("name") or "")


def cluster_name_for(svc_name: str, suffix: str) -> str:
    """``<rayservice>-<suffix>``: the name of a new (pending) RayCluster.
    upstream: GenerateRayClusterName."""
    return f"{svc_name}-{suffix}"


def rayservice_head_service_name(svc_name: str) -> str:
    """``<rayservice>-head-svc``, the Service that follows the active cluster's head.

    upstream: GenerateHeadServiceName with the RayService CRD type (the cluster's own head
    Service is ``names.head_service_name``)."""
    return f"{svc_name}-head-svc"


def serve_service_name(svc: JsonDict) -> str:
    """``serveService.metadata.name`` when given, else ``<rayservice>-serve-svc``.
    upstream: GenerateServeServiceName (via BuildServeServiceForRayService)."""
    custom = as_dict(as_dict(spec_of(svc).get("serveService")).get("metadata")).get("name")
    return str(custom) if custom else f"{service_name(svc)}-serve-svc"


def originated_labels(svc_name: str) -> dict[str, str]:
    return {
        c.LABEL_ORIGINATED_FROM_CR_NAME: svc_name,
        c.LABEL_ORIGINATED_FROM_CRD: c.KIND_RAYSERVICE,
    }


def owner_reference(svc: JsonDict) -> JsonDict:
    return controller_reference(svc, c.KIND_RAYSERVICE)


def goal_cluster_spec(svc: JsonDict) -> JsonDict:
    """``spec.rayClusterConfig`` as the hashes see it (``suspend`` dropped)."""
    spec = copy.deepcopy(as_dict(spec_of(svc).get("rayClusterConfig")))
    spec.pop("suspend", None)
    return spec


def goal_hash(svc: JsonDict) -> str:
    return spec_hash(goal_cluster_spec(svc))


def num_worker_groups(cluster_spec: JsonDict) -> int:
    return len(as_list(cluster_spec.get("workerGroupSpecs")))


def partial_hash(svc: JsonDict, groups: int) -> str:
    """The goal hash over only the first ``groups`` worker groups."""
    spec = goal_cluster_spec(svc)
    spec["workerGroupSpecs"] = as_list(spec.get("workerGroupSpecs"))[:groups]
    return spec_hash(spec)


def cluster_hash(cluster: JsonDict) -> str:
    """The spec hash a cluster is compared with the goal by.

    A cluster stamped by another operator (the Go operator, or another version: its
    ``ray.io/kuberay-version`` differs) carries a hash made by another function, which can never
    equal ours; its own spec is hashed instead, so taking over a RayService does not mistake
    its clusters for outdated ones and start a new one. (The in-place update that follows
    re-stamps the cluster, as upstream does after its own upgrades.)
    """
    annotations = as_dict(as_dict(cluster.get("metadata")).get("annotations"))
    if annotations.get(c.ANNOTATION_KUBERAY_VERSION) != c.KUBERAY_VERSION:
        spec = copy.deepcopy(as_dict(cluster.get("spec")))
        spec.pop("suspend", None)
        return spec_hash(spec)
    return str(annotations.get(c.ANNOTATION_HASH_WITHOUT_REPLICAS) or "")


def cluster_worker_groups(cluster: JsonDict) -> int:
    annotations = as_dict(as_dict(cluster.get("metadata")).get("annotations"))
    try:
        return int(annotations.get(c.ANNOTATION_NUM_WORKER_GROUPS) or 0)
    except ValueError:
        return 0


def matches_goal(svc: JsonDict, cluster: JsonDict) -> bool:
    """The cluster already runs the goal spec, up to replicas."""
    return cluster_hash(cluster) == goal_hash(svc)


def only_groups_appended(svc: JsonDict, cluster: JsonDict) -> bool:
    """The goal is the cluster's spec with worker groups appended at the end."""
    have = cluster_worker_groups(cluster)
    want = num_worker_groups(goal_cluster_spec(svc))
    return want > have and cluster_hash(cluster) == partial_hash(svc, have)


def build_cluster(svc: JsonDict, cluster_name: str) -> JsonDict:
    """The RayCluster ``cluster_name`` for the RayService's current goal spec.

    Labels and annotations start from the RayService's; ours (origin labels, hash, number of
    worker groups, operator version) win.

    upstream: constructRayClusterForRayService."""
    meta = as_dict(svc.get("metadata"))
    name = str(meta.get("name") or "")
    spec = copy.deepcopy(as_dict(spec_of(svc).get("rayClusterConfig")))
    labels = {str(k): str(v) for k, v in as_dict(meta.get("labels")).items()}
    labels.update(originated_labels(name))
    annotations = {str(k): str(v) for k, v in as_dict(meta.get("annotations")).items()}
    annotations[c.ANNOTATION_HASH_WITHOUT_REPLICAS] = goal_hash(svc)
    annotations[c.ANNOTATION_NUM_WORKER_GROUPS] = str(num_worker_groups(spec))
    annotations[c.ANNOTATION_KUBERAY_VERSION] = c.KUBERAY_VERSION
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RAYCLUSTER,
        "metadata": {
            "name": cluster_name,
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(svc)],
        },
        "spec": spec,
    }


def updated_cluster(svc: JsonDict, existing: JsonDict) -> JsonDict:
    """``existing`` rebuilt from the goal spec (in-place update: replicas, appended groups,
    operator version, a ``suspend`` toggle); the resourceVersion of ``existing`` is kept, and
    ``spec.suspend`` follows the goal as upstream replaces the whole spec.
    upstream: modifyRayCluster."""
    want = build_cluster(svc, str(as_dict(existing.get("metadata")).get("name") or ""))
    old_meta = as_dict(existing.get("metadata"))
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "finalizers"):
        if key in old_meta:
            want["metadata"][key] = old_meta[key]
    # Annotations the controller keeps on its clusters (applied serve config, deletion time).
    for key, value in as_dict(old_meta.get("annotations")).items():
        want["metadata"]["annotations"].setdefault(str(key), str(value))
    if "status" in existing:
        want["status"] = existing["status"]
    return want


def suspend_toggled(svc: JsonDict, cluster: JsonDict) -> bool:
    """The goal's ``suspend`` (absent = false) differs from the cluster's."""
    goal = as_dict(spec_of(svc).get("rayClusterConfig")).get("suspend")
    return bool(goal) != bool(as_dict(cluster.get("spec")).get("suspend"))


def needs_in_place_update(svc: JsonDict, cluster: JsonDict) -> bool:
    """Operator version changed, ``suspend`` toggled, worker groups appended, or only replicas
    differ. upstream: shouldUpdateCluster (its active-cluster-while-upgrading case is the
    caller's)."""
    annotations = as_dict(as_dict(cluster.get("metadata")).get("annotations"))
    if annotations.get(c.ANNOTATION_KUBERAY_VERSION) != c.KUBERAY_VERSION:
        return True
    if suspend_toggled(svc, cluster):
        return True
    if only_groups_appended(svc, cluster):
        return True
    if not matches_goal(svc, cluster):
        return False
    if spec_of(svc).get("rayClusterConfig", {}).get("enableInTreeAutoscaling"):
        return False  # the autoscaler owns the replica counts
    have = copy.deepcopy(as_dict(cluster.get("spec")))
    have.pop("suspend", None)
    return _replicas(have) != _replicas(goal_cluster_spec(svc))


def _replicas(spec: JsonDict) -> list[tuple[Any, ...]]:
    return [
        (g.get("groupName"), g.get("replicas"), g.get("minReplicas"), g.get("maxReplicas"))
        for g in (as_dict(x) for x in as_list(spec.get("workerGroupSpecs")))
    ]


def serve_config(svc: JsonDict) -> dict[str, Any] | None:
    """``serveConfigV2`` parsed (YAML -> the JSON body the dashboard takes); None when unset."""
    text = spec_of(svc).get("serveConfigV2")
    if not text:
        return None
    parsed = yaml.safe_load(str(text))
    if not isinstance(parsed, dict):
        raise ValueError("serveConfigV2 is not a YAML mapping")
    return parsed


def serve_config_hash(svc: JsonDict) -> str:
    """What is recorded on a cluster once its serve config is applied (empty when unset)."""
    text = spec_of(svc).get("serveConfigV2")
    return json_hash(str(text)) if text else ""


def build_head_service_for(svc: JsonDict, cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """``<rayservice>-head-svc``: the target cluster's head Service under the RayService.
    upstream: BuildHeadServiceForRayService."""
    return build_head_service_for_cr(
        cluster, options, service_name(svc), c.KIND_RAYSERVICE, owner_reference(svc)
    )


def build_serve_service_for(svc: JsonDict, cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """The RayService's serve Service: pods of ``cluster`` labelled ``ray.io/serve=true``.

    A custom ``serveService`` is the base (its name honoured, namespace forced, selector
    replaced); its ports replace same-named ports from the head container.

    upstream: BuildServeServiceForRayService."""
    name = service_name(svc)
    custom = copy.deepcopy(as_dict(spec_of(svc).get("serveService")))
    custom_spec = as_dict(custom.get("spec"))
    custom_ports = [as_dict(p) for p in as_list(custom_spec.get("ports"))]
    try:
        auto = build_serve_service(cluster, options)
        ports = [as_dict(p) for p in as_list(as_dict(auto.get("spec")).get("ports"))]
        service_type = as_dict(auto.get("spec")).get("type")
    except BuildError:
        if not custom_ports:
            raise
        ports, service_type = [], None
    names_given = {p.get("name") for p in custom_ports}
    ports = [p for p in ports if p.get("name") not in names_given] + custom_ports
    cluster_name = str(as_dict(cluster.get("metadata")).get("name") or "")
    custom_meta = as_dict(custom.get("metadata"))
    labels = {str(k): str(v) for k, v in as_dict(custom_meta.get("labels")).items()}
    labels.update(originated_labels(name))
    labels[c.LABEL_SERVE] = f"{name}-serve"
    labels[c.LABEL_CREATED_BY] = c.CREATED_BY
    spec = dict(custom_spec)
    spec["ports"] = ports
    spec["selector"] = {c.LABEL_CLUSTER: cluster_name, c.LABEL_SERVE: "true"}
    if service_type and not spec.get("type"):
        spec["type"] = service_type
    out_meta: JsonDict = {
        "name": serve_service_name(svc),
        "namespace": as_dict(svc.get("metadata")).get("namespace"),
        "labels": labels,
        "ownerReferences": [owner_reference(svc)],
    }
    if custom_meta.get("annotations"):
        out_meta["annotations"] = dict(as_dict(custom_meta.get("annotations")))
    return {"apiVersion": "v1", "kind": "Service", "metadata": out_meta, "spec": spec}


def deletion_delay_seconds(svc: JsonDict) -> int:
    value = spec_of(svc).get("rayClusterDeletionDelaySeconds")
    return DEFAULT_DELETION_DELAY_SECONDS if value is None else max(0, int(value))


def count_ready_endpoints(slices: list[JsonDict]) -> int:
    """Ready endpoints over EndpointSlices, each pod counted once (by targetRef UID).
    upstream: calculateNumServeEndpointsFromSlices."""
    seen: set[str] = set()
    anonymous = 0
    for item in slices:
        for endpoint in as_list(item.get("endpoints")):
            endpoint = as_dict(endpoint)
            if as_dict(endpoint.get("conditions")).get("ready") is not True:
                continue
            uid = as_dict(endpoint.get("targetRef")).get("uid")
            if uid:
                seen.add(str(uid))
            else:
                anonymous += 1
    return len(seen) + anonymous


def app_statuses(details: JsonDict) -> dict[str, JsonDict]:
    """``status.*ServiceStatus.applicationStatuses`` from the dashboard's serve details
    (app name ``""`` reported as ``default``)."""
    out: dict[str, JsonDict] = {}
    for app_name, app in as_dict(details.get("applications")).items():
        app = as_dict(app)
        deployments: dict[str, JsonDict] = {}
        for dep_name, dep in as_dict(app.get("deployments")).items():
            dep = as_dict(dep)
            entry: JsonDict = {"status": dep.get("status")}
            if dep.get("message"):
                entry["message"] = dep.get("message")
            deployments[str(dep_name)] = entry
        status: JsonDict = {"status": app.get("status")}
        if app.get("message"):
            status["message"] = app.get("message")
        if deployments:
            status["serveDeploymentStatuses"] = deployments
        out[str(app_name) or c.DEFAULT_SERVE_APP_NAME] = status
    return out


def all_apps_running(apps: dict[str, JsonDict]) -> bool:
    return bool(apps) and all(a.get("status") == c.APP_RUNNING for a in apps.values())


def deployed_serve_config(details: JsonDict) -> dict[str, Any]:
    """The Serve config a cluster runs, rebuilt from its dashboard's serve details (what a
    ``target_capacity``-only change must PUT back unchanged); empty when nothing is deployed."""
    apps = [
        copy.deepcopy(as_dict(as_dict(app).get("deployed_app_config")))
        for app in as_dict(details.get("applications")).values()
    ]
    if not apps or not all(apps):
        return {}
    config: dict[str, Any] = {"applications": apps}
    for key in ("proxy_location", "http_options", "grpc_options"):
        if details.get(key):
            config[key] = copy.deepcopy(details[key])
    return config


def runs_serve_config(details: JsonDict, goal: dict[str, Any]) -> bool:
    """Serve already runs ``goal`` (what it reports as deployed equals it, for every key the
    goal sets; ``target_capacity`` aside). False whenever in doubt, which costs one PUT."""
    deployed = deployed_serve_config(details)
    if not deployed:
        return False
    return all(deployed.get(k) == v for k, v in goal.items() if k != "target_capacity")
