"""RayService incremental-upgrade decisions that need no API server: when a new cluster is
prepared, the rollback state, and when a migration completes (promotion / end of rollback)."""

from __future__ import annotations

import copy
from typing import Any

from kuberay.api.features import FeatureGates
from kuberay.builders import rayservice as rsb
from kuberay.controllers.rayservice import RayServiceConfig, RayServiceReconciler

NOW = 1_700_000_000.0
OPTIONS = {"stepSizePercent": 25, "intervalSeconds": 5, "gatewayClassName": "gw"}


def rayservice(image: str = "a") -> dict[str, Any]:
    cluster = {
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": image}]}}},
        "workerGroupSpecs": [],
    }
    return {
        "metadata": {"name": "svc", "namespace": "ns", "generation": 2},
        "spec": {
            "serveConfigV2": "applications: []\n",
            "rayClusterConfig": cluster,
            "upgradeStrategy": {
                "type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": OPTIONS,
            },
        },
        "status": {},
    }


def reconciler(gates: str = "") -> RayServiceReconciler:
    rec = RayServiceReconciler.__new__(RayServiceReconciler)
    rec.config = RayServiceConfig(clock=lambda: NOW, gates=FeatureGates.parse(gates))
    return rec


def test_incremental_needs_the_gate() -> None:
    svc = rayservice()
    assert reconciler()._incremental(svc)
    off = reconciler("RayServiceIncrementalUpgrade=false")
    assert not off._incremental(svc)
    active = rsb.build_cluster(svc, "svc-aaaaa")
    changed = rayservice("b")
    assert reconciler()._should_prepare_new_cluster(changed, active, None, incremental=True)
    assert not off._should_prepare_new_cluster(changed, active, None), "gate off: no new cluster"


def test_goal_change_mid_upgrade_is_a_rollback_not_a_new_pending_cluster() -> None:
    rec = reconciler()
    old_spec, new_spec = rayservice("a"), rayservice("b")
    active = rsb.build_cluster(old_spec, "svc-aaaaa")
    pending = rsb.build_cluster(new_spec, "svc-bbbbb")
    # The goal is the pending spec: upgrading, no rollback.
    assert not rec._reconcile_rollback_state(new_spec, active, pending)
    assert rec._condition(new_spec, "RollbackInProgress") is None
    # Back to the active spec: rollback, and no new pending cluster meanwhile.
    assert rec._reconcile_rollback_state(old_spec, active, pending)
    cond = rec._condition(old_spec, "RollbackInProgress")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "DesiredClusterSpecChanged")
    assert not rec._should_prepare_new_cluster(old_spec, active, pending, incremental=True)
    # A third spec: still a rollback first.
    third = rayservice("c")
    assert rec._reconcile_rollback_state(third, active, pending)
    assert not rec._should_prepare_new_cluster(third, active, pending, incremental=True)
    # Back to the pending spec: the rollback is cancelled.
    third["spec"] = copy.deepcopy(new_spec["spec"])
    assert not rec._reconcile_rollback_state(third, active, pending)
    assert rec._condition(third, "RollbackInProgress") is None


def _with_sides(svc: dict[str, Any], active: tuple[int, int], pending: tuple[int, int]) -> None:
    """Status sides from (targetCapacity, trafficRoutedPercent) pairs."""
    for key, name, (capacity, traffic) in (
        ("activeServiceStatus", "svc-aaaaa", active),
        ("pendingServiceStatus", "svc-bbbbb", pending),
    ):
        svc["status"][key] = {
            "rayClusterName": name,
            "targetCapacity": capacity,
            "trafficRoutedPercent": traffic,
        }


def test_promotion_only_when_the_old_cluster_is_drained() -> None:
    rec = reconciler()
    svc = rayservice("b")
    active = rsb.build_cluster(rayservice("a"), "svc-aaaaa")
    pending = rsb.build_cluster(svc, "svc-bbbbb")
    _with_sides(svc, (50, 0), (100, 100))
    assert rec._complete_migration(svc, active, pending, False) == (active, pending)
    svc["status"]["activeServiceStatus"]["targetCapacity"] = 0
    new_active, new_pending = rec._complete_migration(svc, active, pending, False)
    assert (new_active, new_pending) == (pending, None)
    assert svc["status"]["activeServiceStatus"]["rayClusterName"] == "svc-bbbbb"
    assert svc["status"]["pendingServiceStatus"] == {}


def test_rollback_completes_when_the_active_cluster_has_everything_back() -> None:
    rec = reconciler()
    svc = rayservice("a")
    active = rsb.build_cluster(svc, "svc-aaaaa")
    pending = rsb.build_cluster(rayservice("b"), "svc-bbbbb")
    rec._reconcile_rollback_state(svc, active, pending)
    _with_sides(svc, (100, 100), (50, 0))
    assert rec._complete_migration(svc, active, pending, True) == (active, pending)
    svc["status"]["pendingServiceStatus"]["targetCapacity"] = 0
    assert rec._complete_migration(svc, active, pending, True) == (active, None)
    assert svc["status"]["pendingServiceStatus"] == {}
    assert rec._condition(svc, "RollbackInProgress") is None


def test_traffic_step_records_both_sides_and_the_time() -> None:
    rec = reconciler()
    svc = rayservice()
    _with_sides(svc, (100, 100), (0, 0))
    rec._set_traffic(svc, 25)
    active, pending = svc["status"]["activeServiceStatus"], svc["status"]["pendingServiceStatus"]
    assert (active["trafficRoutedPercent"], pending["trafficRoutedPercent"]) == (75, 25)
    assert active["lastTrafficMigratedTime"] == pending["lastTrafficMigratedTime"]
