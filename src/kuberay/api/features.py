"""The upstream feature gates, parsed from ``--feature-gates=A=true,B=false``.

Gates are an explicit input (a frozen value passed to validation and controllers), never
process-global state, so tests can exercise every combination side by side.

Failure modes: an unknown gate name or a value other than true/false raises ``ValueError``
with the offending item, as upstream's flag parsing refuses to start on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

RAY_CLUSTER_STATUS_CONDITIONS: Final = "RayClusterStatusConditions"
RAY_JOB_DELETION_POLICY: Final = "RayJobDeletionPolicy"
RAY_MULTI_HOST_INDEXING: Final = "RayMultiHostIndexing"
RAY_SERVICE_INCREMENTAL_UPGRADE: Final = "RayServiceIncrementalUpgrade"
RAY_CRON_JOB: Final = "RayCronJob"
SIDECAR_SUBMITTER_RESTART: Final = "SidecarSubmitterRestart"
RAY_CLUSTER_NETWORK_POLICY: Final = "RayClusterNetworkPolicy"
GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE: Final = "GCSFaultToleranceEmbeddedStorage"
RAY_CLUSTER_MTLS: Final = "RayClusterMTLS"
RAY_CLUSTER_HISTORY_SERVER: Final = "RayClusterHistoryServer"
KUBERNETES_WAS: Final = "KubernetesWAS"


@dataclass(frozen=True)
class GateSpec:
    name: str
    default: bool
    maturity: str


GATES: Final = (
    GateSpec(RAY_CLUSTER_STATUS_CONDITIONS, True, "Beta"),
    GateSpec(RAY_JOB_DELETION_POLICY, True, "Beta"),
    GateSpec(RAY_MULTI_HOST_INDEXING, True, "Beta"),
    GateSpec(RAY_SERVICE_INCREMENTAL_UPGRADE, True, "Beta"),
    GateSpec(RAY_CRON_JOB, False, "Alpha"),
    GateSpec(SIDECAR_SUBMITTER_RESTART, False, "Alpha"),
    GateSpec(RAY_CLUSTER_NETWORK_POLICY, False, "Alpha"),
    GateSpec(GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE, False, "Alpha"),
    GateSpec(RAY_CLUSTER_MTLS, False, "Alpha"),
    GateSpec(RAY_CLUSTER_HISTORY_SERVER, False, "Alpha"),
    GateSpec(KUBERNETES_WAS, False, "Alpha"),
)
DEFAULTS: Final = {g.name: g.default for g in GATES}


@dataclass(frozen=True)
class FeatureGates:
    """Effective gate values; anything not overridden keeps upstream's default."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.overrides) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unrecognized feature gate: {', '.join(unknown)}")

    def enabled(self, name: str) -> bool:
        if name not in DEFAULTS:
            raise ValueError(f"unrecognized feature gate: {name}")
        return self.overrides.get(name, DEFAULTS[name])

    def as_dict(self) -> dict[str, bool]:
        return {name: self.enabled(name) for name in DEFAULTS}

    @classmethod
    def parse(cls, value: str) -> FeatureGates:
        """Parse the ``--feature-gates`` flag value (``A=true,B=false``; blanks ignored)."""
        overrides: dict[str, bool] = {}
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, raw = item.partition("=")
            name, raw = name.strip(), raw.strip().lower()
            if not sep or raw not in ("true", "false"):
                raise ValueError(f"invalid feature gate setting {item!r}: expected NAME=true|false")
            if name not in DEFAULTS:
                raise ValueError(f"unrecognized feature gate: {name}")
            overrides[name] = raw == "true"
        return cls(overrides)

    @classmethod
    def with_all(cls, enabled: bool = True) -> FeatureGates:
        return cls(dict.fromkeys(DEFAULTS, enabled))


DEFAULT_GATES: Final = FeatureGates()
