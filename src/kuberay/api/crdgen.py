"""Generate the ray.io CustomResourceDefinitions from the API models.

``python -m kuberay.api.crdgen`` (or ``kuberay crds``) writes ``deploy/crds/ray.io_<plural>.yaml``;
``--check`` exits non-zero when the committed files differ from what the models produce, which
is what the stale-YAML unit test relies on.

Invariants:
- ``v1`` is served and stored; RayCluster, RayJob and RayService also serve ``v1alpha1``,
  deprecated with upstream's warning. There is no conversion webhook, so ``v1alpha1`` is the
  ``v1`` schema without the fields added since (tables below) and must stay a subset.
- Output is deterministic (sorted keys, no timestamps), so regeneration never produces noise.
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kuberay.api import constants
from kuberay.api.raycluster import RayClusterSpec, RayClusterStatus
from kuberay.api.raycronjob import RayCronJobSpec, RayCronJobStatus
from kuberay.api.rayjob import RayJobSpec, RayJobStatus
from kuberay.api.rayservice import RayServiceSpec, RayServiceStatuses
from kuberay.api.schema import ApiModel, model_schema

HEADER = "# Generated from the kuberay.api models by `python -m kuberay.api.crdgen`; do not edit.\n"


def column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonPath": path, "name": name, "type": kind}
    if priority:
        out["priority"] = priority
    return out


AGE = column("age", ".metadata.creationTimestamp", "date")

# Fields that v1alpha1 never received (paths use ``[]`` for list items, ``{}`` for map values).
_CLUSTER_SPEC_V1_ONLY = (
    "authOptions",
    "autoscalerOptions.args",
    "autoscalerOptions.command",
    "autoscalerOptions.version",
    "gcsFaultToleranceOptions",
    "headGroupSpec.ingressOptions",
    "headGroupSpec.labels",
    "headGroupSpec.resources",
    "historyServerOptions",
    "managedBy",
    "networkPolicy",
    "tlsOptions",
    "upgradeStrategy",
    "workerGroupSpecs[].idleTimeoutSeconds",
    "workerGroupSpecs[].labels",
    "workerGroupSpecs[].numOfHosts",
    "workerGroupSpecs[].priority",
    "workerGroupSpecs[].resources",
    "workerGroupSpecs[].suspend",
)
_CLUSTER_STATUS_V1_ONLY = ("conditions", "head.podName", "head.serviceName", "stateTransitionTimes")
_SERVICE_SIDE_V1_ONLY = (
    "lastTrafficMigratedTime",
    "targetCapacity",
    "trafficRoutedPercent",
    *(f"rayClusterStatus.{p}" for p in _CLUSTER_STATUS_V1_ONLY),
)


def _under(prefix: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{prefix}.{p}" for p in paths)


V1ALPHA1_OMIT: dict[str, tuple[str, ...]] = {
    "RayCluster": (
        *_under("spec", _CLUSTER_SPEC_V1_ONLY),
        *_under("status", _CLUSTER_STATUS_V1_ONLY),
    ),
    "RayJob": (
        *_under(
            "spec",
            (
                "activeDeadlineSeconds",
                "backoffLimit",
                "deletionStrategy",
                "managedBy",
                "preRunningDeadlineSeconds",
                "submissionMode",
                "submitterConfig",
            ),
        ),
        *_under("spec.rayClusterSpec", _CLUSTER_SPEC_V1_ONLY),
        *_under(
            "status",
            (
                "conditions",
                "failed",
                "jobStatusCheckFailureStartTime",
                "rayJobInfo",
                "reason",
                "succeeded",
            ),
        ),
        *_under("status.rayClusterStatus", _CLUSTER_STATUS_V1_ONLY),
    ),
    "RayService": (
        *_under(
            "spec",
            (
                "excludeHeadPodFromServeSvc",
                "managedBy",
                "rayClusterDeletionDelaySeconds",
                "suspend",
                "upgradeStrategy",
            ),
        ),
        *_under("spec.rayClusterConfig", _CLUSTER_SPEC_V1_ONLY),
        *_under("status", ("conditions", "numServeEndpoints")),
        *_under("status.activeServiceStatus", _SERVICE_SIDE_V1_ONLY),
        *_under("status.pendingServiceStatus", _SERVICE_SIDE_V1_ONLY),
    ),
}
# v1alpha1 fields that v1 dropped.
V1ALPHA1_ADD: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "RayService": tuple(
        (
            f"status.{side}.applicationStatuses{{}}{sub}.healthLastUpdateTime",
            {"type": "string", "format": "date-time"},
        )
        for side in ("activeServiceStatus", "pendingServiceStatus")
        for sub in ("", ".serveDeploymentStatuses{}")
    ),
}
_CLUSTER_SPEC_V1ALPHA1_REQUIRED = (
    ("headGroupSpec", "rayStartParams"),
    ("workerGroupSpecs[]", "rayStartParams"),
)
# Properties v1alpha1 required that v1 relaxed (object path, property name), and the reverse.
V1ALPHA1_REQUIRED: dict[str, tuple[tuple[str, str], ...]] = {
    "RayCluster": tuple((f"spec.{p}", n) for p, n in _CLUSTER_SPEC_V1ALPHA1_REQUIRED),
    "RayJob": (
        ("spec", "entrypoint"),
        *((f"spec.rayClusterSpec.{p}", n) for p, n in _CLUSTER_SPEC_V1ALPHA1_REQUIRED),
    ),
    "RayService": tuple(
        (f"spec.rayClusterConfig.{p}", n) for p, n in _CLUSTER_SPEC_V1ALPHA1_REQUIRED
    ),
}
V1ALPHA1_OPTIONAL: dict[str, tuple[tuple[str, str], ...]] = {
    "RayService": (("spec", "rayClusterConfig"),),
}


@dataclass(frozen=True, eq=False)
class Kind:
    kind: str
    plural: str
    spec: type[ApiModel]
    status: type[ApiModel]
    columns: tuple[dict[str, Any], ...]
    alpha_columns: bool = False
    v1alpha1: bool = True

    @property
    def name(self) -> str:
        return f"{self.plural}.{constants.GROUP}"


KINDS: tuple[Kind, ...] = (
    Kind(
        "RayCluster",
        "rayclusters",
        RayClusterSpec,
        RayClusterStatus,
        (
            column("desired workers", ".status.desiredWorkerReplicas", "integer"),
            column("available workers", ".status.availableWorkerReplicas", "integer"),
            column("cpus", ".status.desiredCPU"),
            column("memory", ".status.desiredMemory"),
            column("gpus", ".status.desiredGPU"),
            column("tpus", ".status.desiredTPU", priority=1),
            column("status", ".status.state"),
            AGE,
            column("head pod IP", ".status.head.podIP", priority=1),
            column("head service IP", ".status.head.serviceIP", priority=1),
        ),
        alpha_columns=True,
    ),
    Kind(
        "RayJob",
        "rayjobs",
        RayJobSpec,
        RayJobStatus,
        (
            column("job status", ".status.jobStatus"),
            column("deployment status", ".status.jobDeploymentStatus"),
            column("ray cluster name", ".status.rayClusterName"),
            column("start time", ".status.startTime"),
            column("end time", ".status.endTime"),
            AGE,
        ),
    ),
    Kind(
        "RayService",
        "rayservices",
        RayServiceSpec,
        RayServiceStatuses,
        (
            column("service status", ".status.serviceStatus"),
            column("num serve endpoints", ".status.numServeEndpoints"),
        ),
    ),
    Kind(
        "RayCronJob",
        "raycronjobs",
        RayCronJobSpec,
        RayCronJobStatus,
        (
            column("schedule", ".spec.schedule"),
            column("timezone", ".spec.timeZone"),
            column("last schedule", ".status.lastScheduleTime", "date"),
            AGE,
            column("suspend", ".spec.suspend", "boolean"),
        ),
        v1alpha1=False,
    ),
)


def root_schema(kind: Kind) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": model_schema(kind.spec),
            "status": model_schema(kind.status),
        },
    }


def _walk(schema: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    """The parent object schema of ``path`` and the final property name."""
    node = schema
    parts = path.split(".")
    for part in parts[:-1]:
        suffixes: list[str] = []
        while part.endswith(("[]", "{}")):
            suffixes.insert(0, part[-2:])
            part = part[:-2]
        node = node["properties"][part]
        for suffix in suffixes:
            node = node["items"] if suffix == "[]" else node["additionalProperties"]
    return node, parts[-1]


def v1alpha1_schema(kind: Kind, v1: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(v1)
    for path in V1ALPHA1_OMIT.get(kind.kind, ()):
        parent, name = _walk(schema, path)
        parent["properties"].pop(name)
        if name in parent.get("required", []):
            parent["required"].remove(name)
            if not parent["required"]:
                del parent["required"]
    for path, sub in V1ALPHA1_ADD.get(kind.kind, ()):
        parent, name = _walk(schema, path)
        parent["properties"][name] = sub
        parent["properties"] = dict(sorted(parent["properties"].items()))
    for path, name in V1ALPHA1_REQUIRED.get(kind.kind, ()):
        parent, _ = _walk(schema, f"{path}.x")
        parent["required"] = sorted({*parent.get("required", []), name})
    for path, name in V1ALPHA1_OPTIONAL.get(kind.kind, ()):
        parent, _ = _walk(schema, f"{path}.x")
        parent["required"] = [r for r in parent.get("required", []) if r != name]
        if not parent["required"]:
            del parent["required"]
    return schema


def deprecation_warning(kind: str) -> str:
    return (
        f"ray.io/v1alpha1 {kind} is deprecated; use ray.io/v1 {kind}. v1alpha1 receives no new "
        "fields and will be unavailable in KubeRay 1.9."
    )


def crd(kind: Kind) -> dict[str, Any]:
    schema = root_schema(kind)
    v1: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "additionalPrinterColumns": list(kind.columns),
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}},
    }
    versions = [v1]
    if kind.v1alpha1:
        alpha: dict[str, Any] = {
            "name": "v1alpha1",
            "served": True,
            "storage": False,
            "deprecated": True,
            "deprecationWarning": deprecation_warning(kind.kind),
            "schema": {"openAPIV3Schema": v1alpha1_schema(kind, schema)},
            "subresources": {"status": {}},
        }
        if kind.alpha_columns:
            alpha["additionalPrinterColumns"] = list(kind.columns)
        versions.append(alpha)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.name},
        "spec": {
            "group": constants.GROUP,
            "names": {
                "categories": ["all"],
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
            },
            "scope": "Namespaced",
            "versions": versions,
        },
    }


def all_crds() -> list[dict[str, Any]]:
    return [crd(k) for k in KINDS]


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def render(obj: dict[str, Any]) -> str:
    """Deterministic YAML (libyaml when available: the files are ~1 MB each)."""
    return HEADER + yaml.dump(obj, Dumper=_Dumper, sort_keys=True, width=100)


def _load(text: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


@functools.cache
def _rendered(kind: Kind) -> str:
    return render(crd(kind))


def filename(kind: Kind) -> str:
    return f"{constants.GROUP}_{kind.plural}.yaml"


def default_output() -> Path:
    """``deploy/crds`` of the source checkout this module lives in, else of the cwd."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").exists():
        root = Path.cwd()
    return root / "deploy" / "crds"


def stale_files(directory: Path) -> list[str]:
    """Names of generated files that are missing or differ from what the models produce."""
    out = []
    for kind in KINDS:
        path = directory / filename(kind)
        if not path.exists():
            out.append(path.name)
            continue
        text = path.read_text("utf-8")
        if text != _rendered(kind) and _load(text) != crd(kind):
            # Same content, different emitter (no libyaml here) still counts as current.
            out.append(path.name)
    # A CRD file the models do not make (a renamed or removed kind) would still be applied by
    # `kubectl apply -f deploy/crds/`: it is stale too.
    known = {filename(kind) for kind in KINDS}
    if directory.is_dir():
        out += sorted(
            p.name
            for p in directory.iterdir()
            if p.suffix in (".yaml", ".yml") and p.name not in known
        )
    return out


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path = directory / filename(kind)
        path.write_text(_rendered(kind), "utf-8")
        written.append(path)
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=None, help="directory (deploy/crds)")
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")


def run(args: argparse.Namespace) -> int:
    directory: Path = args.output or default_output()
    if args.check:
        stale = stale_files(directory)
        for name in stale:
            print(f"stale: {directory / name}", file=sys.stderr)
        return 1 if stale else 0
    for path in write(directory):
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kuberay.api.crdgen", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
