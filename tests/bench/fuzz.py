"""Fuzzing through the real stack: hypothesis-generated RayCluster, RayJob and RayService specs,
valid and invalid, applied to a real apiserver with the real operator running.

    .venv/bin/python tests/bench/fuzz.py --count 10000 [--seed N] [--timeout S]
    .venv/bin/python tests/bench/fuzz.py --count 150 --seed 1     # the CI slice's size

What it does: starts a KWOK plane (a few small nodes: most pods stay Pending, which is what an
operator sees on a full cluster), installs the CRDs, starts ``kuberay operator`` as a
subprocess (log kept beside the JSON), reads its idle RSS, then creates the generated objects
across a handful of namespaces with at most ``--max-live`` of them alive at once. The cases
are drawn from a hypothesis pool round-robin over (kind, class): ``valid`` (near-valid specs
with random replicas, hosts, start parameters, resources, labels, envs, autoscaling, suspend,
RayJob modes/TTL/backoff/deadlines/deletion strategies, RayService serve configs/upgrade
strategies) and ~45 mutation classes (wrong types, bad enums, negative numbers, min > max,
missing containers or head, bad names, huge strings, unicode, conflicting fields, ...). Each
object is either rejected by the apiserver (schema, CEL; HTTP status and message recorded by
class) or accepted; an accepted object must reach a decision within ``--settle`` seconds:

- reconciled: the operator wrote a status (RayCluster: ``state``/conditions, with
  ``desiredWorkerReplicas`` matching the spec when written; RayJob: a ``jobDeploymentStatus``;
  RayService: conditions), judged ``--min-age`` seconds after creation at the earliest, or
- reported invalid: a Warning event whose reason starts with ``Invalid`` (or is
  ``ValidationFailed``) on the object, AND a status condition or reason that explains it
  (``--condition-grace`` seconds after the event, once a status has been written;
  ``--event-grace`` seconds after creation for the event when the status already explains;
  events are looked for again at the end, so a late event is told apart from a missing one).

Then the object is deleted. Figures (by class and kind; decision and event latencies; the
operator's tracebacks, ERROR lines, restarts; RSS at idle, peak and after clean-up) go to
bench-results/fuzz.json and a Markdown table.

Failures (exit code 1): a Traceback in the operator log, an object with no decision in time
(hang), an invalid object reported without a status condition/reason (unless its kind is
passed to ``--tolerate-event-only``, for known defects) or without any event, a reconciled
RayCluster whose desired worker count disagrees with its spec, the operator process exiting
(it is restarted and counted), objects left after clean-up, or RSS after clean-up further than
``--max-rss-growth-mib`` above the idle baseline. ERROR lines are counted and sampled only.

Every loop is bounded: creation stops at ``--timeout`` seconds (the specs not applied are
reported), each wait has its own deadline, the plane only listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime as dt
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kuberay.api import validation as v
from kuberay.api.constants import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from kuberay.api.raycluster import RayCluster
from kuberay.api.rayjob import RayJob
from kuberay.api.rayservice import RayService
from kuberay.builders import rayservice as rsb
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, PlaneConfig
from kuberay.devenv.testing import create_namespace
from kuberay.runtime.client import EVENTS, NAMESPACES, KubeClient, Resource, load_kubeconfig
from kuberay.runtime.errors import ApiError, NotFound

Obj = dict[str, Any]

BY_KIND = {"RayCluster": RAYCLUSTERS, "RayJob": RAYJOBS, "RayService": RAYSERVICES}
PREFIX = {"RayCluster": "rc", "RayJob": "rj", "RayService": "rs"}

VERSIONS = ("2.46.0", "2.52.0")
CPUS = ("100m", "250m", "500m", "1", "2")
MEMS = ("128Mi", "256Mi", "1Gi")
LABEL_TEXT = st.from_regex(r"\A[a-z0-9]([a-z0-9.-]{0,14}[a-z0-9])?\Z")
SERVE_OK = (
    "applications:\n  - name: app{n}\n    import_path: fruit.deployment_graph\n"
    "    route_prefix: /{n}\n    deployments:\n      - name: D\n        num_replicas: {r}\n"
)


# --------------------------------------------------------------------------- generation
@st.composite
def _container(draw: st.DrawFn, name: str, version: str) -> Obj:
    res = {"cpu": draw(st.sampled_from(CPUS)), "memory": draw(st.sampled_from(MEMS))}
    c: Obj = {"name": name, "image": f"rayproject/ray:{version}", "resources": {"limits": res}}
    if draw(st.booleans()):
        c["resources"]["requests"] = dict(res)
    if draw(st.integers(0, 3)) == 0:
        c["env"] = [
            {"name": f"FUZZ_{i}", "value": draw(st.text(max_size=12))}
            for i in range(draw(st.integers(1, 3)))
        ]
    return c


@st.composite
def _start_params(draw: st.DrawFn, head: bool) -> dict[str, str]:
    params: dict[str, str] = {}
    if head and draw(st.booleans()):
        params["dashboard-host"] = "0.0.0.0"
    if draw(st.booleans()):
        params["num-cpus"] = str(draw(st.integers(0, 8)))
    if draw(st.integers(0, 3)) == 0:
        params["object-store-memory"] = str(draw(st.integers(78643200, 10**9)))
    if draw(st.integers(0, 4)) == 0:
        params["metrics-export-port"] = str(draw(st.integers(1024, 65535)))
    return params


@st.composite
def _template(draw: st.DrawFn, name: str, version: str) -> Obj:
    tpl: Obj = {"spec": {"containers": [draw(_container(name, version))]}}
    if draw(st.integers(0, 3)) == 0:
        tpl["metadata"] = {"labels": {"fuzz-label": draw(LABEL_TEXT)}}
    return tpl


@st.composite
def cluster_spec(draw: st.DrawFn, for_job: bool = False) -> Obj:
    version = draw(st.sampled_from(VERSIONS))
    spec: Obj = {
        "rayVersion": version,
        "headGroupSpec": {
            "rayStartParams": draw(_start_params(True)),
            "template": draw(_template("ray-head", version)),
        },
        "workerGroupSpecs": [],
    }
    if draw(st.integers(0, 3)) == 0:
        spec["headGroupSpec"]["serviceType"] = draw(st.sampled_from(["ClusterIP", "NodePort"]))
    for i in range(draw(st.integers(0, 2))):
        low = draw(st.integers(0, 1))
        group: Obj = {
            "groupName": f"g{i}",
            "replicas": draw(st.integers(low, low + 2)),
            "minReplicas": low,
            "maxReplicas": low + draw(st.integers(1, 4)),
            "numOfHosts": draw(st.sampled_from([1, 1, 1, 2])),
            "rayStartParams": draw(_start_params(False)),
            "template": draw(_template("ray-worker", version)),
        }
        spec["workerGroupSpecs"].append(group)
    if draw(st.integers(0, 3)) == 0:
        spec["enableInTreeAutoscaling"] = True
        if draw(st.booleans()):
            spec["autoscalerOptions"] = {
                "idleTimeoutSeconds": draw(st.integers(0, 600)),
                "upscalingMode": draw(st.sampled_from(["Default", "Aggressive", "Conservative"])),
            }
    if not for_job and draw(st.integers(0, 5)) == 0:
        spec["suspend"] = True
    return spec


@st.composite
def rayjob_spec(draw: st.DrawFn) -> Obj:
    mode = draw(st.sampled_from(["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]))
    spec: Obj = {
        "entrypoint": draw(
            st.sampled_from(["python -c 'print(1)'", "python /home/ray/job.py", "echo hi"])
        ),
        "submissionMode": mode,
        "shutdownAfterJobFinishes": draw(st.booleans()),
        "rayClusterSpec": draw(cluster_spec(for_job=True)),
    }
    if draw(st.booleans()):
        spec["ttlSecondsAfterFinished"] = draw(st.integers(0, 3600))
    if mode != "InteractiveMode" and draw(st.booleans()):
        spec["backoffLimit"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        spec["activeDeadlineSeconds"] = draw(st.integers(1, 100000))
    if spec["shutdownAfterJobFinishes"] and draw(st.integers(0, 4)) == 0:
        spec["suspend"] = True
    if draw(st.integers(0, 4)) == 0:
        policy = st.sampled_from(["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"])
        spec["deletionStrategy"] = {
            "onSuccess": {"policy": draw(policy)},
            "onFailure": {"policy": draw(policy)},
        }
        spec["shutdownAfterJobFinishes"] = False
        spec.pop("suspend", None)
    if draw(st.integers(0, 4)) == 0:
        spec["runtimeEnvYAML"] = "pip:\n  - requests\nenv_vars:\n  A: b\n"
    return spec


@st.composite
def rayservice_spec(draw: st.DrawFn) -> Obj:
    n, r = draw(st.integers(0, 9)), draw(st.integers(1, 3))
    spec: Obj = {
        "serveConfigV2": SERVE_OK.format(n=n, r=r),
        "rayClusterConfig": draw(cluster_spec(for_job=True)),
    }
    if draw(st.booleans()):
        spec["upgradeStrategy"] = {"type": draw(st.sampled_from(["NewCluster", "None"]))}
    if draw(st.booleans()):
        spec["rayClusterDeletionDelaySeconds"] = draw(st.integers(0, 600))
    return spec


def _cluster_of(body: Obj) -> Obj:
    spec: Obj = body["spec"]
    if body["kind"] == "RayJob":
        return spec.setdefault("rayClusterSpec", {})  # type: ignore[no-any-return]
    if body["kind"] == "RayService":
        return spec.setdefault("rayClusterConfig", {})  # type: ignore[no-any-return]
    return spec


def _a_group(cluster: Obj) -> Obj:
    groups = cluster.setdefault("workerGroupSpecs", [])
    if not groups:
        groups.append(
            {
                "groupName": "gx",
                "replicas": 1,
                "minReplicas": 0,
                "maxReplicas": 2,
                "rayStartParams": {},
                "template": {
                    "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}
                },
            }
        )
    return groups[0]  # type: ignore[no-any-return]


def _head_container(cluster: Obj) -> Obj:
    return cluster["headGroupSpec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


WRONG_TYPES = ("three", 1.5, True, [1], {"a": 1}, None)
HUGE = (10_000, 100_000, 400_000, 2_000_000)


def _mutate_common(draw: st.DrawFn, body: Obj, cls: str) -> None:  # noqa: C901, PLR0912, PLR0915
    """Invalid (or odd) variations of the cluster spec, for every kind."""
    cl = _cluster_of(body)
    if cls == "wrong_type_replicas":
        _a_group(cl)[draw(st.sampled_from(["replicas", "minReplicas", "maxReplicas"]))] = draw(
            st.sampled_from(WRONG_TYPES[:5])
        )
    elif cls == "wrong_type_start_param":
        cl["headGroupSpec"]["rayStartParams"]["num-cpus"] = draw(st.sampled_from([4, True, [1]]))
    elif cls == "wrong_type_bool":
        cl["enableInTreeAutoscaling"] = draw(st.sampled_from(["yes", 1, {}]))
    elif cls == "bad_enum":
        where = draw(st.sampled_from(["serviceType", "upgradeStrategy", "autoscalerVersion"]))
        if where == "serviceType":
            cl["headGroupSpec"]["serviceType"] = draw(st.sampled_from(["Weird", "", "clusterip"]))
        elif where == "upgradeStrategy":
            cl["upgradeStrategy"] = {"type": draw(st.sampled_from(["Sideways", "recreate"]))}
        else:
            cl["enableInTreeAutoscaling"] = True
            cl["autoscalerOptions"] = {"version": draw(st.sampled_from(["v3", "V2", ""]))}
    elif cls == "negative_min_replicas":
        _a_group(cl)["minReplicas"] = -draw(st.integers(1, 10**6))
    elif cls == "negative_max_replicas":
        group = _a_group(cl)
        group["maxReplicas"] = -draw(st.integers(1, 10**6))
        group["minReplicas"] = 0
    elif cls == "min_gt_max":
        group = _a_group(cl)
        group["maxReplicas"] = draw(st.integers(0, 3))
        group["minReplicas"] = group["maxReplicas"] + draw(st.integers(1, 5))
    elif cls == "negative_replicas":  # known: handled by another change (event + condition)
        _a_group(cl)["replicas"] = -draw(st.integers(1, 100))
    elif cls == "bad_num_of_hosts":
        _a_group(cl)["numOfHosts"] = draw(st.sampled_from([0, -1, -(2**31)]))
    elif cls == "missing_containers":
        if draw(st.booleans()):
            cl["headGroupSpec"]["template"]["spec"]["containers"] = []
        else:
            _a_group(cl)["template"]["spec"]["containers"] = []
    elif cls == "missing_head":
        cl.pop("headGroupSpec", None)
    elif cls == "missing_group_fields":
        _a_group(cl).pop(draw(st.sampled_from(["groupName", "template", "minReplicas"])))
    elif cls == "duplicate_group_names":
        group = _a_group(cl)
        cl["workerGroupSpecs"].append(copy.deepcopy(group))
    elif cls == "huge_string":
        size = draw(st.sampled_from(HUGE))
        where = draw(st.sampled_from(["param", "env", "annotation"]))
        text = "x" * size
        if where == "param":
            cl["headGroupSpec"]["rayStartParams"]["fuzz-param"] = text
        elif where == "env":
            _head_container(cl).setdefault("env", []).append({"name": "HUGE", "value": text})
        else:
            body["metadata"].setdefault("annotations", {})["fuzz/huge"] = text
    elif cls == "unicode":
        text = draw(st.text(min_size=1, max_size=40))
        where = draw(st.sampled_from(["param", "env", "label", "group_name"]))
        if where == "param":
            cl["headGroupSpec"]["rayStartParams"]["fuzz"] = text
        elif where == "env":
            _head_container(cl).setdefault("env", []).append({"name": "U", "value": text})
        elif where == "label":
            cl["headGroupSpec"]["template"].setdefault("metadata", {})["labels"] = {"u": text}
        else:
            _a_group(cl)["groupName"] = text
    elif cls == "bad_container":
        c = _head_container(cl)
        what = draw(st.sampled_from(["name", "image", "port"]))
        if what == "name":
            c["name"] = draw(st.sampled_from(["Ray_Head!", "", "x" * 70]))
        elif what == "image":
            c.pop("image", None)
        else:
            c["ports"] = [{"containerPort": draw(st.sampled_from([0, -1, 70000]))}]
    elif cls == "bad_quantity":
        _head_container(cl)["resources"] = {
            "limits": {"cpu": draw(st.sampled_from(["lots", "-1", "1.5.5", ""]))}
        }
    elif cls == "autoscaler_v2_env_conflict":
        cl["enableInTreeAutoscaling"] = False
        _head_container(cl).setdefault("env", []).append(
            {"name": "RAY_enable_autoscaler_v2", "value": draw(st.sampled_from(["1", "true"]))}
        )
    elif cls == "idle_timeout_without_v2":
        cl["enableInTreeAutoscaling"] = True
        cl.pop("autoscalerOptions", None)
        _a_group(cl)["idleTimeoutSeconds"] = draw(st.integers(-5, 600))
    elif cls == "negative_autoscaler_idle":
        cl["enableInTreeAutoscaling"] = True
        cl["autoscalerOptions"] = {"idleTimeoutSeconds": -draw(st.integers(1, 1000))}
    elif cls == "suspended_group_with_autoscaler":
        cl["enableInTreeAutoscaling"] = True
        _a_group(cl)["suspend"] = True
    elif cls == "gcs_ft_conflict":
        cl["gcsFaultToleranceOptions"] = {"redisAddress": ""}
        body["metadata"].setdefault("annotations", {})["ray.io/ft-enabled"] = draw(
            st.sampled_from(["false", "true"])
        )
    elif cls == "unknown_fields":
        cl["bogusField"] = draw(st.integers(-(2**63), 2**63 - 1))
        cl["headGroupSpec"]["alsoBogus"] = {"x": draw(st.text(max_size=5))}
    elif cls == "null_values":
        target = draw(st.sampled_from(["rayStartParams", "workerGroupSpecs", "rayVersion"]))
        if target == "rayStartParams":
            cl["headGroupSpec"]["rayStartParams"] = None
        else:
            cl[target] = None
    elif cls == "bad_name":
        body["metadata"]["name"] = draw(
            st.sampled_from(["UPPER-{i}", "under_score-{i}", "{i}-starts-digit", "a" * 60 + "-{i}"])
        )
    else:
        raise AssertionError(cls)


COMMON = (
    "wrong_type_replicas",
    "wrong_type_start_param",
    "wrong_type_bool",
    "bad_enum",
    "negative_min_replicas",
    "negative_max_replicas",
    "min_gt_max",
    "negative_replicas",
    "bad_num_of_hosts",
    "missing_containers",
    "missing_head",
    "missing_group_fields",
    "duplicate_group_names",
    "huge_string",
    "unicode",
    "bad_container",
    "bad_quantity",
    "autoscaler_v2_env_conflict",
    "idle_timeout_without_v2",
    "negative_autoscaler_idle",
    "suspended_group_with_autoscaler",
    "gcs_ft_conflict",
    "unknown_fields",
    "null_values",
    "bad_name",
)
RAYJOB_ONLY = (
    "rj_suspend_without_shutdown",
    "rj_negative_ttl",
    "rj_bad_mode",
    "rj_interactive_backoff",
    "rj_negative_backoff",
    "rj_nonpositive_deadline",
    "rj_no_cluster",
    "rj_selector_without_name",
    "rj_bad_runtime_env",
    "rj_deletion_conflict",
    "rj_deletion_bad_policy",
    "rj_sidecar_restart_policy",
    "rj_huge_entrypoint",
    "rj_wrong_type",
)
RAYSERVICE_ONLY = (
    "rs_bad_serve_yaml",
    "rs_serve_not_mapping",
    "rs_bad_upgrade_type",
    "rs_negative_deletion_delay",
    "rs_incremental_without_options",
    "rs_head_service_name",
    "rs_wrong_type",
)


def _mutate_rayjob(draw: st.DrawFn, body: Obj, cls: str) -> None:
    spec = body["spec"]
    if cls == "rj_suspend_without_shutdown":
        spec.update(suspend=True, shutdownAfterJobFinishes=False)
        spec.pop("deletionStrategy", None)
    elif cls == "rj_negative_ttl":
        spec["ttlSecondsAfterFinished"] = -draw(st.integers(1, 10**6))
    elif cls == "rj_bad_mode":
        spec["submissionMode"] = draw(st.sampled_from(["Bogus", "k8sjobmode", ""]))
    elif cls == "rj_interactive_backoff":
        spec.update(submissionMode="InteractiveMode", backoffLimit=draw(st.integers(1, 5)))
    elif cls == "rj_negative_backoff":
        spec["backoffLimit"] = -draw(st.integers(1, 100))
    elif cls == "rj_nonpositive_deadline":
        key = draw(st.sampled_from(["activeDeadlineSeconds", "preRunningDeadlineSeconds"]))
        spec[key] = -draw(st.integers(0, 100))
    elif cls == "rj_no_cluster":
        spec.pop("rayClusterSpec", None)
    elif cls == "rj_selector_without_name":
        spec.pop("rayClusterSpec", None)
        spec.pop("suspend", None)
        spec["clusterSelector"] = {"team": draw(LABEL_TEXT)}
    elif cls == "rj_bad_runtime_env":
        spec["runtimeEnvYAML"] = draw(st.sampled_from(["a: [1", "- 1\n- 2", ": :", "{"]))
    elif cls == "rj_deletion_conflict":
        spec["shutdownAfterJobFinishes"] = False
        spec.pop("suspend", None)
        spec["deletionStrategy"] = {
            "onSuccess": {"policy": "DeleteCluster"},
            "onFailure": {"policy": "DeleteCluster"},
            "deletionRules": [
                {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 5}}
            ],
        }
    elif cls == "rj_deletion_bad_policy":
        spec["shutdownAfterJobFinishes"] = False
        spec.pop("suspend", None)
        spec["deletionStrategy"] = {
            "onSuccess": {"policy": draw(st.sampled_from(["Explode", "", "deletecluster"]))},
            "onFailure": {"policy": "DeleteNone"},
        }
    elif cls == "rj_sidecar_restart_policy":
        spec["submissionMode"] = "SidecarMode"
        spec.pop("backoffLimit", None)
        cl = _cluster_of(body)
        cl["headGroupSpec"]["template"]["spec"]["restartPolicy"] = "Always"
    elif cls == "rj_huge_entrypoint":
        spec["entrypoint"] = "python -c 'print(1)' # " + "y" * draw(st.sampled_from(HUGE))
    elif cls == "rj_wrong_type":
        key = draw(st.sampled_from(["entrypoint", "shutdownAfterJobFinishes", "backoffLimit"]))
        spec[key] = draw(st.sampled_from(WRONG_TYPES[:5]))
    else:
        raise AssertionError(cls)


def _mutate_rayservice(draw: st.DrawFn, body: Obj, cls: str) -> None:
    spec = body["spec"]
    if cls == "rs_bad_serve_yaml":
        spec["serveConfigV2"] = draw(
            st.sampled_from(["applications: [ {", "applications:\n\t- x", ": : :", "{{{"])
        )
    elif cls == "rs_serve_not_mapping":
        spec["serveConfigV2"] = draw(st.sampled_from(["- 1\n- 2", "42", "'just a string'"]))
    elif cls == "rs_bad_upgrade_type":
        spec["upgradeStrategy"] = {"type": draw(st.sampled_from(["Sideways", "newcluster"]))}
    elif cls == "rs_negative_deletion_delay":
        spec["rayClusterDeletionDelaySeconds"] = -draw(st.integers(1, 1000))
    elif cls == "rs_incremental_without_options":
        spec["upgradeStrategy"] = {"type": "NewClusterWithIncrementalUpgrade"}
    elif cls == "rs_head_service_name":
        spec["rayClusterConfig"]["headGroupSpec"]["headService"] = {
            "metadata": {"name": draw(LABEL_TEXT)}
        }
    elif cls == "rs_wrong_type":
        spec[draw(st.sampled_from(["serveConfigV2", "rayClusterDeletionDelaySeconds"]))] = draw(
            st.sampled_from(WRONG_TYPES[1:5])
        )
    else:
        raise AssertionError(cls)


@st.composite
def fuzz_case(draw: st.DrawFn) -> Obj:
    """One case: {"kind", "cls" ("valid" or the mutation applied), "body"}."""
    kind = draw(st.sampled_from(["RayCluster", "RayCluster", "RayJob", "RayService"]))
    if kind == "RayCluster":
        spec = draw(cluster_spec())
    elif kind == "RayJob":
        spec = draw(rayjob_spec())
    else:
        spec = draw(rayservice_spec())
    body: Obj = {
        "apiVersion": "ray.io/v1",
        "kind": kind,
        "metadata": {"name": "", "labels": {"kuberay-fuzz": "1"}},
        "spec": spec,
    }
    cls = "valid"
    if draw(st.integers(0, 9)) >= 4:  # 60 % mutated
        own = {"RayCluster": (), "RayJob": RAYJOB_ONLY, "RayService": RAYSERVICE_ONLY}[kind]
        cls = draw(st.sampled_from(COMMON + own + own))
        if cls in COMMON:
            _mutate_common(draw, body, cls)
        elif kind == "RayJob":
            _mutate_rayjob(draw, body, cls)
        else:
            _mutate_rayservice(draw, body, cls)
    return {"kind": kind, "cls": cls, "body": body}


def generate(count: int, seed_value: int | None) -> list[Obj]:
    """``count`` cases; the same ones for the same seed (derandomized without one).

    Hypothesis starts with its simplest examples, so a short run would see few classes: a
    pool of at least 1,200 is drawn and ``count`` are taken from it round-robin over
    (kind, class), which keeps every class in even the CI slice."""
    pool = _draw(max(count, 1200), seed_value)
    buckets: dict[str, list[Obj]] = defaultdict(list)
    for case in pool:
        buckets[f"{case['kind']}/{case['cls']}"].append(case)
    cases: list[Obj] = []
    queues = [list(reversed(b)) for _, b in sorted(buckets.items())]
    while len(cases) < count and any(queues):
        for q in queues:
            if q and len(cases) < count:
                cases.append(q.pop())
    rng = random.Random(seed_value or 0)
    rng.shuffle(cases)
    for i, case in enumerate(cases):
        meta = case["body"]["metadata"]
        meta["name"] = (meta["name"] or f"{PREFIX[case['kind']]}-{{i}}").replace("{i}", str(i))
        case["index"] = i
        case["predicted_invalid"] = predicted_invalid(case["body"])
    return cases


def _draw(count: int, seed_value: int | None) -> list[Obj]:
    cases: list[Obj] = []

    @settings(
        max_examples=count,
        derandomize=seed_value is None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(fuzz_case())
    def collect(case: Obj) -> None:
        if len(cases) < count:
            cases.append(case)

    if seed_value is not None:
        collect = seed(seed_value)(collect)
    # hypothesis may stop a run early when it thinks the space is exhausted: top up.
    for _ in range(20):
        if len(cases) >= count:
            break
        collect()
    return cases


def predicted_invalid(body: Obj) -> bool:
    """What the operator's own validation says of the body as sent (before CRD defaulting)."""
    kind = body["kind"]
    try:
        if kind == "RayCluster":
            rc = RayCluster.model_validate(body)
            return bool(
                v.validate_raycluster_metadata(body["metadata"])
                or rc.spec is None
                or v.validate_raycluster_spec(rc.spec, body["metadata"].get("annotations"))
            )
        if kind == "RayJob":
            return bool(
                v.validate_rayjob_metadata(body["metadata"])
                or v.validate_rayjob_spec(RayJob.model_validate(body))
            )
        if v.validate_rayservice_metadata(body["metadata"]) or v.validate_rayservice_spec(
            RayService.model_validate(body)
        ):
            return True
        rsb.serve_config(body)
        return False
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError):
        return True


# --------------------------------------------------------------------------- judging
def is_validation_reason(reason: str) -> bool:
    return reason.startswith("Invalid") or reason == "ValidationFailed"


# Conditions that report a spec the operator corrected rather than refused (a negative worker
# group ``replicas`` is run at minReplicas, with an InvalidReplicas event and this condition).
CORRECTION_REASONS = ("NegativeReplicas",)


def status_explains(kind: str, status: Obj) -> bool:
    """A status condition or reason that says the spec is invalid."""
    for cond in status.get("conditions") or []:
        reason = str(cond.get("reason") or "")
        if is_validation_reason(reason) or reason in CORRECTION_REASONS:
            return True
    if kind == "RayJob" and status.get("jobDeploymentStatus") == "ValidationFailed":
        return bool(status.get("message") or status.get("reason"))
    return is_validation_reason(str(status.get("reason") or ""))


def reconciled(kind: str, status: Obj) -> bool:
    if kind == "RayCluster":
        return bool(status.get("state") or status.get("conditions"))
    if kind == "RayJob":
        return bool(status.get("jobDeploymentStatus"))
    return bool(status.get("conditions"))


def desired_workers(spec: Obj) -> int:
    """Upstream's GetWorkerGroupDesiredReplicas summed over groups."""
    total = 0
    for g in spec.get("workerGroupSpecs") or []:
        if g.get("suspend"):
            continue
        low, high = g.get("minReplicas", 0), g.get("maxReplicas", 2**31 - 1)
        replicas = g.get("replicas")
        n = low if replicas is None or low > high else min(max(replicas, low), high)
        total += n * max(1, g.get("numOfHosts") or 1)
    return total


@dataclass
class Live:
    case: Obj
    namespace: str
    uid: str
    deadline: float
    created: float
    event_seen: float = 0.0


@dataclass
class Tally:
    applied: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    rejected_status: Counter[str] = field(default_factory=Counter)
    rejected_samples: dict[str, str] = field(default_factory=dict)
    by_class: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    outcomes: Counter[str] = field(default_factory=Counter)
    invalid_with_report: Counter[str] = field(default_factory=Counter)
    invalid_event_only: Counter[str] = field(default_factory=Counter)
    invalid_without_event: Counter[str] = field(default_factory=Counter)
    late_events: Counter[str] = field(default_factory=Counter)
    hang_kinds: Counter[str] = field(default_factory=Counter)
    other_warnings: Counter[str] = field(default_factory=Counter)
    prediction_mismatch: Counter[str] = field(default_factory=Counter)
    insane: list[Obj] = field(default_factory=list)
    hangs: list[Obj] = field(default_factory=list)
    samples: dict[str, list[Obj]] = field(default_factory=lambda: defaultdict(list))
    create_errors: Counter[str] = field(default_factory=Counter)


class Fuzzer:
    def __init__(self, kube: KubeClient, namespaces: list[str], args: argparse.Namespace):
        self.kube = kube
        self.namespaces = namespaces
        self.args = args
        self.objects: dict[str, Obj] = {}  # uid -> latest object
        self.gone: set[str] = set()
        self.warnings: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.live: dict[str, Live] = {}
        self.deleting: set[str] = set()
        self.tally = Tally()
        self.no_event: dict[str, Live] = {}  # explained in status, no event seen (yet)
        self.hung: dict[str, Live] = {}
        self.decision_latency: dict[str, list[float]] = defaultdict(list)
        self.event_latency: list[float] = []
        self.event_times: dict[str, str] = {}  # uid -> eventTime of its first validation event
        self.created_at: dict[str, tuple[str, str]] = {}  # uid -> (kind, creationTimestamp)
        self.changed = asyncio.Event()

    # -- watches -----------------------------------------------------------------------
    async def _watch(self, res: Resource, field_selector: str | None, on: Any) -> None:
        while True:
            try:
                listed = await self.kube.list(res, field_selector=field_selector)
                for item in listed["items"]:
                    on("ADDED", item)
                rv = listed["metadata"]["resourceVersion"]
                async for ev in self.kube.watch(
                    res, resource_version=rv, field_selector=field_selector, timeout_seconds=120
                ):
                    if ev.type == "ERROR":
                        break
                    if ev.type != "BOOKMARK":
                        on(ev.type, ev.object)
            except asyncio.CancelledError:
                raise
            except (TimeoutError, ApiError, OSError):
                await asyncio.sleep(1)

    def _on_object(self, etype: str, obj: Obj) -> None:
        uid = obj["metadata"]["uid"]
        if etype == "DELETED":
            self.gone.add(uid)
            if uid in self.live:  # deleted by the operator itself: keep its last state
                self.objects[uid] = obj
            else:
                self.objects.pop(uid, None)
        else:
            self.objects[uid] = obj
        self.changed.set()

    def _on_event(self, etype: str, ev: Obj) -> None:
        if etype == "DELETED":
            return
        uid = (ev.get("involvedObject") or {}).get("uid")
        if uid and is_validation_reason(str(ev.get("reason") or "")):
            self.event_times.setdefault(uid, str(ev.get("eventTime") or ""))
        if uid:
            entry = (str(ev.get("reason") or ""), str(ev.get("message") or "")[:300])
            if entry not in self.warnings[uid]:
                self.warnings[uid].append(entry)
                self.changed.set()

    # -- creation ------------------------------------------------------------------------
    async def apply(self, case: Obj) -> None:
        kind, cls = case["kind"], case["cls"]
        ns = self.namespaces[case["index"] % len(self.namespaces)]
        body = case["body"]
        self.tally.applied += 1
        try:
            created = await self.kube.create(BY_KIND[kind], body, ns)
        except ApiError as exc:
            if exc.status in (0, 429, 503, 504):
                self.tally.create_errors[f"{exc.status} {exc.reason}"] += 1
                self.tally.by_class[f"{kind}/{cls}"]["create_error"] += 1
                return
            key = f"{kind}/{cls}"
            self.tally.rejected[key] += 1
            self.tally.rejected_status[str(exc.status)] += 1
            self.tally.rejected_samples.setdefault(key, f"{exc.status}: {exc.message[:300]}")
            self.tally.by_class[key]["rejected"] += 1
            return
        except (TimeoutError, OSError, TypeError, ValueError) as exc:
            # transport failures, and bodies the client cannot encode (never sent)
            self.tally.create_errors[type(exc).__name__] += 1
            self.tally.by_class[f"{kind}/{cls}"]["create_error"] += 1
            return
        uid = created["metadata"]["uid"]
        self.objects.setdefault(uid, created)
        self.created_at[uid] = (kind, created["metadata"].get("creationTimestamp") or "")
        now = time.monotonic()
        self.live[uid] = Live(case, ns, uid, now + self.args.settle, now)

    # -- judging -------------------------------------------------------------------------
    def judge(self, now: float) -> list[Live]:  # noqa: C901
        """Decided objects (removed from ``live``)."""
        done: list[Live] = []
        grace = self.args.condition_grace
        for uid, item in list(self.live.items()):
            kind, cls = item.case["kind"], item.case["cls"]
            obj = self.objects.get(uid) or {}
            status = obj.get("status") or {}
            warns = self.warnings.get(uid, [])
            invalid_events = [w for w in warns if is_validation_reason(w[0])]
            explained = status_explains(kind, status)
            key = f"{kind}/{cls}"
            outcome = ""
            if invalid_events and not item.event_seen:
                item.event_seen = now
                self.event_latency.append(now - item.created)
            if explained and invalid_events:
                outcome = "operator_invalid"
                self.tally.invalid_with_report[kind] += 1
            elif (
                invalid_events
                and now - item.event_seen >= grace
                # Judged on a status the operator wrote, not on one it has not written yet: a
                # busy operator writes status at the end of a pass that may create many pods.
                and (reconciled(kind, status) or now >= item.deadline)
            ):
                outcome = "operator_invalid"
                self.tally.invalid_event_only[kind] += 1
                self._sample("invalid_event_only", item, status, warns)
            elif explained and not invalid_events and now - item.created >= self.args.event_grace:
                outcome = "operator_invalid"
                self.no_event[uid] = item
            elif (
                not invalid_events
                and not explained
                and reconciled(kind, status)
                and now - item.created >= self.args.min_age
            ):
                outcome = "reconciled"
                for reason, _ in warns:
                    self.tally.other_warnings[f"{kind}/{reason}"] += 1
                if kind == "RayCluster" and "desiredWorkerReplicas" in status:
                    spec = obj.get("spec") or {}
                    want = desired_workers(spec)
                    if not spec.get("suspend") and status["desiredWorkerReplicas"] != want:
                        self.tally.insane.append(
                            {
                                "name": obj["metadata"]["name"],
                                "class": cls,
                                "desired": status["desiredWorkerReplicas"],
                                "expected": want,
                            }
                        )
            elif uid in self.gone and uid not in self.deleting:
                # the operator deleted it (a RayJob's DeleteSelf policy, or its TTL, after a
                # deadline failed it): a decision, whatever status the last write left
                outcome = "deleted_by_operator"
            elif now >= item.deadline:
                outcome = "hang"
                self.hung[uid] = item
                self.tally.hangs.append(
                    {
                        "uid": uid,
                        "kind": kind,
                        "class": cls,
                        "name": item.case["body"]["metadata"]["name"],
                        "namespace": item.namespace,
                        "status": status,
                        "warnings": warns,
                        "spec": _short(item.case["body"].get("spec")),
                    }
                )
            if not outcome:
                continue
            self.tally.outcomes[outcome] += 1
            if outcome != "hang":
                self.decision_latency[kind].append(now - item.created)
            self.tally.by_class[key][outcome] += 1
            if outcome in ("operator_invalid", "reconciled"):
                want_invalid = outcome == "operator_invalid"
                if want_invalid != item.case["predicted_invalid"]:
                    self.tally.prediction_mismatch[key] += 1
                    self._sample(f"mismatch:{key}", item, status, warns)
            del self.live[uid]
            done.append(item)
        return done

    def _sample(self, what: str, item: Live, status: Obj, warns: list[tuple[str, str]]) -> None:
        if len(self.tally.samples[what]) < 3:
            self.tally.samples[what].append(
                {
                    "name": item.case["body"]["metadata"]["name"],
                    "class": item.case["cls"],
                    "status": status,
                    "warnings": warns,
                    "spec": _short(item.case["body"].get("spec")),
                }
            )

    async def delete(self, item: Live, sem: asyncio.Semaphore) -> None:
        async with sem:
            name = item.case["body"]["metadata"]["name"]
            try:
                await self.kube.delete(BY_KIND[item.case["kind"]], name, item.namespace)
            except NotFound:
                self.gone.add(item.uid)
            except (TimeoutError, ApiError, OSError):
                pass  # the namespace deletion at the end removes it

    async def recheck_events(self) -> None:
        """Objects that had a status explanation but no event when judged: look again at
        every Warning event (they outlive the objects), so a late event is told apart from a
        missing one."""
        with contextlib.suppress(ApiError):
            for ev in (await self.kube.list(EVENTS, field_selector="type=Warning"))["items"]:
                self._on_event("ADDED", ev)
        for uid, item in self.hung.items():
            late = [r for r, _ in self.warnings.get(uid, []) if is_validation_reason(r)]
            self.tally.hang_kinds[
                f"{item.case['kind']}: " + ("event late" if late else "no event ever")
            ] += 1
        for uid, item in self.no_event.items():
            kind = item.case["kind"]
            if any(is_validation_reason(r) for r, _ in self.warnings.get(uid, [])):
                self.tally.invalid_with_report[kind] += 1
                self.tally.late_events[kind] += 1
            else:
                self.tally.invalid_without_event[kind] += 1
                obj = self.objects.get(uid) or {}
                self._sample("invalid_without_event", item, obj.get("status") or {}, [])

    def event_delay_by_kind(self) -> dict[str, dict[str, float]]:
        """Seconds from an object's creation to the eventTime the operator stamped on its
        validation event (both server-side clocks; creation has 1 s resolution)."""
        by_kind: dict[str, list[float]] = defaultdict(list)
        for uid, stamp in self.event_times.items():
            kind, created = self.created_at.get(uid, ("", ""))
            if not kind or not created or not stamp:
                continue
            with contextlib.suppress(ValueError):
                t_ev = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                t_cr = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
                by_kind[kind].append((t_ev - t_cr).total_seconds())
        return {
            k: {"n": len(x), "p50": round(pct(x, 0.5), 1), "p99": round(pct(x, 0.99), 1)}
            for k, x in sorted(by_kind.items())
        }

    def alive(self) -> int:
        self.deleting -= self.gone
        return len(self.live) + len(self.deleting)

    async def run(self, cases: list[Obj], budget_end: float, on_tick: Any) -> int:
        """Applies ``cases``; returns how many were applied before ``budget_end``."""
        create_sem = asyncio.Semaphore(self.args.parallel)
        delete_sem = asyncio.Semaphore(self.args.parallel)
        tasks: set[asyncio.Task[None]] = set()
        stop = asyncio.Event()

        async def judge_loop() -> None:
            while not stop.is_set() or self.live:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 1.0)
                self.changed.clear()
                for item in self.judge(time.monotonic()):
                    self.deleting.add(item.uid)
                    t = asyncio.create_task(self.delete(item, delete_sem))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                on_tick()
                if stop.is_set() and time.monotonic() > budget_end + self.args.settle + 30:
                    break

        judge = asyncio.create_task(judge_loop())
        applied = 0
        for case in cases:
            if time.monotonic() > budget_end:
                break
            # polled: the count changes in watch callbacks and delete tasks alike
            while self.alive() >= self.args.max_live and time.monotonic() < budget_end:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            await create_sem.acquire()

            async def one(c: Obj = case) -> None:
                try:
                    await self.apply(c)
                finally:
                    create_sem.release()

            t = asyncio.create_task(one())
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            applied += 1
            if applied % 500 == 0:
                print(
                    f"  {applied} applied, {len(self.live)} awaiting a decision, "
                    f"{self.tally.outcomes}",
                    flush=True,
                )
        while any(not t.done() for t in tasks if t is not judge):
            await asyncio.sleep(0.2)
            if time.monotonic() > budget_end + self.args.settle + 60:
                break
        stop.set()
        await judge
        pending = [t for t in tasks if not t.done()]
        if pending:  # the last deletions: bounded, then whatever is left is cancelled
            _, late = await asyncio.wait(pending, timeout=60)
            for t in late:
                t.cancel()
        return applied


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _short(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, default=str, ensure_ascii=True)
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit})"


# --------------------------------------------------------------------------- operator
def rss_mib(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


TRACEBACK = "Traceback (most recent call last)"
ERROR_LINE = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) ")


def scan_log(text: str) -> dict[str, Any]:
    lines = text.splitlines()
    tracebacks: list[str] = []
    for i, line in enumerate(lines):
        if TRACEBACK in line:
            # the exception line: first unindented line after the frames
            tail = next(
                (x for x in lines[i + 1 : i + 200] if x and not x.startswith(" ")), "(truncated)"
            )
            tracebacks.append(tail[:300])
    errors = [x[:300] for x in lines if ERROR_LINE.match(x)]
    return {
        "tracebacks": len(tracebacks),
        "traceback_samples": sorted(Counter(tracebacks).items(), key=lambda kv: -kv[1])[:10],
        "error_lines": len(errors),
        "error_samples": errors[:10],
    }


async def wait_gone(kube: KubeClient, namespaces: list[str], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = 0
        for res in BY_KIND.values():
            for ns in namespaces:
                with contextlib.suppress(ApiError):
                    left += len((await kube.list(res, ns))["items"])
        if not left:
            return True
        await asyncio.sleep(1)
    return False


async def fuzz(args: argparse.Namespace, plane: Plane, workdir: Path) -> dict[str, Any]:  # noqa: C901, PLR0912, PLR0915
    t0 = time.monotonic()
    cases = generate(args.count, args.seed)
    gen_s = round(time.monotonic() - t0, 1)
    print(f"generated {len(cases)} cases in {gen_s}s", flush=True)
    result: dict[str, Any] = {
        "inputs": {k: v for k, v in vars(args).items() if k != "out"},
        "generation_s": gen_s,
        "generated": len(cases),
        "generated_by_class": dict(Counter(f"{c['kind']}/{c['cls']}" for c in cases)),
    }
    config = load_kubeconfig(plane.kubeconfig)
    config.qps = 0
    config.max_connections = 64
    op = OperatorProcess(plane, workdir, "--qps=200", "--burst=400")
    restarts = 0
    async with KubeClient(config, user_agent="bench-fuzz") as kube:
        await install_crds(kube)
        namespaces = [f"fuzz-{i}" for i in range(args.namespaces)]
        for ns in namespaces:
            await create_namespace(kube, ns)
        op.start()
        assert op.proc is not None
        await asyncio.sleep(args.baseline_wait)
        if op.proc.poll() is not None:
            raise RuntimeError(f"operator exited at start:\n{op.tail()}")
        baseline = rss_mib(op.proc.pid).get("VmRSS", 0.0)
        print(f"operator idle RSS {baseline} MiB", flush=True)
        peak = [baseline]

        def tick() -> None:
            nonlocal restarts
            assert op.proc is not None
            if op.proc.poll() is not None:
                restarts += 1
                print(f"operator exited ({op.proc.returncode}); restarting", flush=True)
                op.start()
            peak[0] = max(peak[0], rss_mib(op.proc.pid).get("VmRSS", 0.0))

        fz = Fuzzer(kube, namespaces, args)
        watches = [
            asyncio.create_task(fz._watch(res, None, fz._on_object)) for res in BY_KIND.values()
        ]
        watches.append(asyncio.create_task(fz._watch(EVENTS, "type=Warning", fz._on_event)))
        start = time.monotonic()
        applied, cleaned, rounds_rss = 0, True, []
        try:
            # Each round applies the same cases again to the same operator process: RSS that
            # keeps climbing round after round is a leak, RSS that stays at the first round's
            # level is memory the allocator kept for reuse.
            for n in range(args.rounds):
                applied += await fz.run(cases, time.monotonic() + args.timeout, tick)
                # Left-overs still waiting (the run's own time ran out) count as hangs.
                for item in fz.judge(time.monotonic() + args.settle + 1):
                    fz.deleting.add(item.uid)
                    await fz.delete(item, asyncio.Semaphore(1))
                cleaned = await wait_gone(kube, namespaces, args.cleanup_timeout) and cleaned
                await asyncio.sleep(args.settle_after)
                rss = rss_mib(op.proc.pid).get("VmRSS", 0.0) if op.proc.poll() is None else 0.0
                rounds_rss.append(rss)
                print(f"round {n + 1}: RSS after clean-up {rss} MiB", flush=True)
            elapsed = time.monotonic() - start
            hwm = rss_mib(op.proc.pid).get("VmHWM", 0.0)
            await fz.recheck_events()
        finally:
            for w in watches:
                w.cancel()
        after = rounds_rss[-1] if rounds_rss else 0.0
        leftover_pods = 0
        for ns in namespaces:
            with contextlib.suppress(ApiError):
                pods = (await kube.list(Resource("", "v1", "pods", kind="Pod"), ns))["items"]
                leftover_pods += len(pods)
        for ns in namespaces:
            with contextlib.suppress(ApiError):
                await kube.delete(NAMESPACES, ns)
    code = op.stop()
    log = scan_log(op.log_path.read_text(errors="replace"))
    t = fz.tally
    result.update(
        {
            "applied": applied,
            "not_applied_time_budget": len(cases) * args.rounds - applied,
            "elapsed_s": round(elapsed, 1),
            "specs_per_s": round(applied / elapsed, 2) if elapsed else 0,
            "rejected_by_schema": sum(t.rejected.values()),
            "rejected_by_class": dict(t.rejected),
            "rejected_http_status": dict(t.rejected_status),
            "rejected_samples": t.rejected_samples,
            "create_errors": dict(t.create_errors),
            "accepted_and_reconciled": t.outcomes["reconciled"],
            "accepted_operator_invalid": t.outcomes["operator_invalid"],
            "accepted_deleted_by_operator": t.outcomes["deleted_by_operator"],
            "operator_invalid_with_event_and_condition": dict(t.invalid_with_report),
            "operator_invalid_event_only": dict(t.invalid_event_only),
            "operator_invalid_without_event": dict(t.invalid_without_event),
            "operator_invalid_event_after_grace": dict(t.late_events),
            "invalid_event_time_after_creation_s": fz.event_delay_by_kind(),
            "decision_latency_s": {
                k: {
                    "p50": round(pct(x, 0.5), 1),
                    "p99": round(pct(x, 0.99), 1),
                    "max": round(max(x), 1),
                }
                for k, x in sorted(fz.decision_latency.items())
            },
            "invalid_event_latency_s": {
                "p50": round(pct(fz.event_latency, 0.5), 1),
                "p99": round(pct(fz.event_latency, 0.99), 1),
                "max": round(max(fz.event_latency, default=0.0), 1),
            },
            "reconciled_with_other_warnings": dict(t.other_warnings),
            "prediction_mismatch": dict(t.prediction_mismatch),
            "insane_desired_workers": t.insane[:20],
            "insane_count": len(t.insane),
            "hangs": len(t.hangs),
            "hang_samples": t.hangs[:10],
            "hangs_by_kind_and_event": dict(t.hang_kinds),
            "hangs_by_class": dict(Counter(f"{h['kind']}/{h['class']}" for h in t.hangs)),
            "samples": dict(t.samples),
            "by_class": {k: dict(v) for k, v in sorted(t.by_class.items())},
            "operator_restarts": restarts,
            "operator_exit_code": code,
            "operator_log": log,
            "rss_baseline_mib": baseline,
            "rss_peak_mib": max(peak[0], hwm),
            "rss_after_cleanup_mib": after,
            "rss_delta_mib": round(after - baseline, 1),
            "rss_after_each_round_mib": rounds_rss,
            "objects_cleaned_up": cleaned,
            "leftover_pods": leftover_pods,
        }
    )
    tolerated = set(args.tolerate_event_only or [])
    failures = []
    if log["tracebacks"]:
        failures.append(f"{log['tracebacks']} operator tracebacks")
    if t.hangs:
        failures.append(f"{len(t.hangs)} hangs")
    if t.invalid_without_event:
        failures.append(f"invalid specs without a Warning event: {dict(t.invalid_without_event)}")
    untolerated = {k: n for k, n in t.invalid_event_only.items() if k not in tolerated}
    if untolerated:
        failures.append(f"invalid specs with an event but no status condition: {untolerated}")
    if t.insane:
        failures.append(f"{len(t.insane)} RayClusters with a wrong desiredWorkerReplicas")
    if restarts:
        failures.append(f"operator exited {restarts} times")
    if not cleaned:
        failures.append("objects left after clean-up")
    if after - baseline > args.max_rss_growth_mib:
        failures.append(f"RSS {after} MiB after clean-up vs {baseline} MiB baseline")
    result["failures"] = failures
    return result


def markdown(r: dict[str, Any]) -> str:
    rows = [
        ("specs generated / applied", f"{r['generated']} / {r['applied']}"),
        ("elapsed, specs per second", f"{r['elapsed_s']} s, {r['specs_per_s']}"),
        ("rejected by the apiserver (schema/CEL)", r["rejected_by_schema"]),
        ("rejected: HTTP status", r["rejected_http_status"]),
        ("create errors (transport, 5xx, 429)", r["create_errors"] or 0),
        ("accepted and reconciled", r["accepted_and_reconciled"]),
        (
            "accepted, then deleted by the operator (RayJob DeleteSelf)",
            r["accepted_deleted_by_operator"],
        ),
        ("accepted, operator-invalid", r["accepted_operator_invalid"]),
        ("  with event + condition", r["operator_invalid_with_event_and_condition"] or 0),
        ("  event only (no status condition)", r["operator_invalid_event_only"] or 0),
        ("  condition only (no event, ever)", r["operator_invalid_without_event"] or 0),
        (
            f"  event later than {r['inputs']['event_grace']} s (counted as reported)",
            r["operator_invalid_event_after_grace"] or 0,
        ),
        (
            "  Warning event latency p50 / p99 / max",
            "{p50} / {p99} / {max} s".format(**r["invalid_event_latency_s"]),
        ),
        (
            "  validation event's eventTime after creation, by kind",
            r["invalid_event_time_after_creation_s"],
        ),
        ("reconciled with other Warning events", r["reconciled_with_other_warnings"] or 0),
        ("prediction mismatches (informational)", sum(r["prediction_mismatch"].values())),
        ("RayClusters with a wrong desiredWorkerReplicas", r["insane_count"]),
        ("seconds from creation to a decision, by kind (p50/p99/max)", r["decision_latency_s"]),
        ("hangs (no decision in time)", r["hangs"]),
        ("  hangs: did a validation event come later?", r["hangs_by_kind_and_event"] or 0),
        (
            "operator tracebacks / ERROR lines",
            f"{r['operator_log']['tracebacks']} / {r['operator_log']['error_lines']}",
        ),
        ("operator restarts", r["operator_restarts"]),
        (
            "operator RSS baseline / peak / after clean-up (delta)",
            f"{r['rss_baseline_mib']} / {r['rss_peak_mib']} / {r['rss_after_cleanup_mib']} MiB ({r['rss_delta_mib']:+} MiB)",
        ),
        ("operator RSS after each round's clean-up", f"{r['rss_after_each_round_mib']} MiB"),
    ]
    out = ["| figure | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    out.append("")
    out.append("| class | rejected | operator-invalid | reconciled | hang |")
    out.append("|---|---|---|---|---|")
    for cls, c in r["by_class"].items():
        out.append(
            f"| {cls} | {c.get('rejected', 0)} | {c.get('operator_invalid', 0)} | "
            f"{c.get('reconciled', 0)} | {c.get('hang', 0)} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument(
        "--rounds", type=int, default=1, help="apply the same cases this many times, back to back"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: derandomized")
    parser.add_argument("--timeout", type=float, default=1800, help="time budget for applying")
    parser.add_argument("--settle", type=float, default=180, help="per-object decision deadline")
    parser.add_argument(
        "--condition-grace", type=float, default=10, help="s after the event for a condition"
    )
    parser.add_argument(
        "--event-grace", type=float, default=30, help="s after creation for a Warning event"
    )
    parser.add_argument(
        "--min-age", type=float, default=5, help="s before a reconciled object is judged"
    )
    parser.add_argument("--namespaces", type=int, default=4)
    parser.add_argument("--max-live", type=int, default=150)
    parser.add_argument("--parallel", type=int, default=12)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--baseline-wait", type=float, default=10)
    parser.add_argument("--settle-after", type=float, default=30)
    parser.add_argument("--cleanup-timeout", type=float, default=180)
    parser.add_argument("--max-rss-growth-mib", type=float, default=100)
    parser.add_argument(
        "--tolerate-event-only",
        action="append",
        choices=sorted(BY_KIND),
        help="a kind whose invalid specs are known to get an event but no status condition",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/fuzz.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        plane = Plane(
            PlaneConfig(
                directory=workdir / "plane",
                nodes=args.nodes,
                node_cpu="4",
                node_memory="8Gi",
                node_max_pods=110,
                unlimited=True,
                log=lambda _: None,
            )
        )
        plane.start()
        try:
            result = asyncio.run(fuzz(args, plane, workdir))
        finally:
            plane.stop()
            log = workdir / "operator.log"
            if log.exists():
                args.out.parent.mkdir(parents=True, exist_ok=True)
                keep = args.out.with_suffix(".operator.log")
                keep.write_bytes(log.read_bytes()[-20_000_000:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(markdown(result))
    print(f"\nJSON: {args.out}")
    for f in result["failures"]:
        print(f"FAIL: {f}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
