from __future__ import annotations

import pytest

from kuberay.api import features
from kuberay.api.features import FeatureGates


def test_defaults_match_upstream() -> None:
    assert FeatureGates().as_dict() == {
        "RayClusterStatusConditions": True,
        "RayJobDeletionPolicy": True,
        "RayMultiHostIndexing": True,
        "RayServiceIncrementalUpgrade": True,
        "RayCronJob": False,
        "SidecarSubmitterRestart": False,
        "RayClusterNetworkPolicy": False,
        "GCSFaultToleranceEmbeddedStorage": False,
        "RayClusterMTLS": False,
        "RayClusterHistoryServer": False,
        "KubernetesWAS": False,
    }
    assert len(features.GATES) == 11


def test_parse_flag_value() -> None:
    gates = FeatureGates.parse("RayCronJob=true, RayJobDeletionPolicy=false,,")
    assert gates.enabled(features.RAY_CRON_JOB)
    assert not gates.enabled(features.RAY_JOB_DELETION_POLICY)
    assert gates.enabled(features.RAY_MULTI_HOST_INDEXING)
    assert FeatureGates.parse("") == FeatureGates()
    assert FeatureGates.parse("RayClusterMTLS=TRUE").enabled(features.RAY_CLUSTER_MTLS)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Nope=true", "unrecognized feature gate: Nope"),
        ("RayCronJob", "invalid feature gate setting 'RayCronJob'"),
        ("RayCronJob=yes", "invalid feature gate setting 'RayCronJob=yes'"),
    ],
)
def test_parse_rejects_bad_values(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FeatureGates.parse(value)


def test_unknown_gate_lookup_fails() -> None:
    with pytest.raises(ValueError, match="unrecognized"):
        FeatureGates().enabled("Nope")
    assert FeatureGates.with_all().enabled(features.KUBERNETES_WAS)
