"""Incremental-upgrade decisions (``rayservice_incremental``) as tables: the gate, the rollback
state, one pass's step plan, migration completion, the route's backends and the config a
capacity change PUTs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberay.api.features import FeatureGates
from kuberay.builders import gateway as gwb
from kuberay.builders import rayservice as rsb
from kuberay.controllers import rayservice_incremental as rsi
from kuberay.controllers import rayservice_status as rss
from kuberay.controllers.common import rfc3339

NOW = 1_700_000_000.0
OPTIONS = {"stepSizePercent": 25, "intervalSeconds": 5, "gatewayClassName": "gw"}
GATE_OFF = "RayServiceIncrementalUpgrade=false"
A, B = "svc-aaaaa", "svc-bbbbb"


def rayservice(image: str = "a", **options: Any) -> dict[str, Any]:
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
                "clusterUpgradeOptions": {**OPTIONS, **options},
            },
        },
        "status": {},
    }


def with_sides(
    svc: dict[str, Any], active: tuple[int, int], pending: tuple[int, int]
) -> dict[str, Any]:
    """Status sides from (targetCapacity, trafficRoutedPercent) pairs."""
    for key, name, (capacity, traffic) in (
        (rss.ACTIVE, A, active),
        (rss.PENDING, B, pending),
    ):
        svc["status"][key] = {
            "rayClusterName": name,
            "targetCapacity": capacity,
            "trafficRoutedPercent": traffic,
        }
    return svc


def rollback_cond(svc: dict[str, Any]) -> tuple[str, str] | None:
    cond = rss.condition(svc, "RollbackInProgress")
    return None if cond is None else (cond["status"], cond["reason"])


# ---------------------------------------------------------------------- the gate


@pytest.mark.parametrize(
    ("strategy", "gates", "want"),
    [
        ("NewClusterWithIncrementalUpgrade", "", True),
        ("NewClusterWithIncrementalUpgrade", GATE_OFF, False),
        ("NewCluster", "", False),
        (None, "", False),
    ],
)
def test_incremental_needs_strategy_and_gate(strategy: str | None, gates: str, want: bool) -> None:
    svc = rayservice()
    if strategy is None:
        del svc["spec"]["upgradeStrategy"]
    else:
        svc["spec"]["upgradeStrategy"]["type"] = strategy
    assert rsi.is_incremental(svc, FeatureGates.parse(gates)) is want


@pytest.mark.parametrize(
    ("gates", "incremental", "want"),
    [("", True, True), (GATE_OFF, False, False)],
    ids=["gate-on", "gate-off-no-new-cluster"],
)
def test_changed_goal_prepares_a_cluster_only_with_the_gate(
    gates: str, incremental: bool, want: bool
) -> None:
    active = rsb.build_cluster(rayservice("a"), A)
    changed = rayservice("b")
    got = rss.should_prepare_new_cluster(
        changed,
        active,
        None,
        incremental=incremental,
        gates=FeatureGates.parse(gates),
        zero_downtime=True,
    )
    assert got is want


# ---------------------------------------------------------------------- rollback state


@pytest.mark.parametrize(
    ("goal", "rolling_back_before", "want", "cond", "message_part"),
    [
        # The goal is the pending spec: upgrading, no rollback.
        ("b", False, False, None, None),
        # Back to the active spec: rollback.
        ("a", False, True, ("True", "DesiredClusterSpecChanged"), "matches the active"),
        # A third spec: still a rollback first.
        ("c", False, True, ("True", "DesiredClusterSpecChanged"), "changed during the upgrade"),
        # Back to the pending spec while rolling back: the rollback is cancelled.
        ("b", True, False, None, None),
        # Already rolling back: the condition (and its message) stays as it was.
        ("c", True, True, ("True", "DesiredClusterSpecChanged"), "earlier message"),
    ],
    ids=["upgrading", "back-to-active", "third-spec", "cancelled", "kept"],
)
def test_rollback_state(
    goal: str,
    rolling_back_before: bool,
    want: bool,
    cond: tuple[str, str] | None,
    message_part: str | None,
) -> None:
    active = rsb.build_cluster(rayservice("a"), A)
    pending = rsb.build_cluster(rayservice("b"), B)
    svc = rayservice(goal)
    if rolling_back_before:
        rss.set_service_condition(
            svc, "RollbackInProgress", "True", "DesiredClusterSpecChanged", "earlier message", NOW
        )
    assert rsi.reconcile_rollback_state(svc, active, pending, NOW) is want
    assert rollback_cond(svc) == cond
    if message_part is not None:
        assert message_part in (rss.condition(svc, "RollbackInProgress") or {})["message"]
    # Both clusters exist: a changed goal never names a new pending cluster meanwhile.
    assert not rss.should_prepare_new_cluster(
        svc, active, pending, incremental=True, gates=FeatureGates(), zero_downtime=True
    )


# ---------------------------------------------------------------------- completion


@pytest.mark.parametrize(
    ("rolling_back", "active", "pending", "done"),
    [
        (False, (50, 0), (100, 100), False),  # the old cluster still has capacity
        (False, (0, 0), (100, 100), True),  # drained: promotion
        (False, (0, 10), (100, 90), False),  # traffic not all moved yet
        (True, (100, 100), (50, 0), False),  # the pending cluster still has capacity
        (True, (100, 100), (0, 0), True),  # rollback done
    ],
)
def test_migration_completes_only_when_the_losing_cluster_is_drained(
    rolling_back: bool, active: tuple[int, int], pending: tuple[int, int], done: bool
) -> None:
    svc = with_sides(rayservice("a" if rolling_back else "b"), active, pending)
    rss.set_service_condition(
        svc, "RollbackInProgress", "True", "DesiredClusterSpecChanged", "", NOW
    )
    before = copy.deepcopy(svc["status"])
    assert rsi.complete_migration(svc, rolling_back) is done
    status = svc["status"]
    if not done:
        assert status == before
    elif rolling_back:
        assert status[rss.ACTIVE]["rayClusterName"] == A
        assert status[rss.PENDING] == {}
        assert rollback_cond(svc) is None
    else:
        assert status[rss.ACTIVE]["rayClusterName"] == B
        assert status[rss.PENDING] == {}


def test_traffic_step_records_both_sides_and_the_time() -> None:
    svc = with_sides(rayservice(), (100, 100), (0, 0))
    rsi.set_traffic(svc, 25, NOW)
    active, pending = svc["status"][rss.ACTIVE], svc["status"][rss.PENDING]
    assert (active["trafficRoutedPercent"], pending["trafficRoutedPercent"]) == (75, 25)
    assert active["lastTrafficMigratedTime"] == pending["lastTrafficMigratedTime"] == rfc3339(NOW)


@pytest.mark.parametrize(
    ("side", "value", "default", "want"),
    [
        (rss.ACTIVE, None, 100, 100),
        (rss.ACTIVE, 40, 100, 40),
        (rss.PENDING, None, 0, 0),
        (rss.PENDING, 70, 0, 70),
    ],
)
def test_side_capacity_defaults(side: str, value: int | None, default: int, want: int) -> None:
    svc = rayservice()
    if value is not None:
        svc["status"][side] = {"targetCapacity": value}
    assert rsi.side_capacity(svc, side, default) == want


# ---------------------------------------------------------------------- step plan


def _conds(*types: str) -> list[dict[str, str]]:
    return [{"type": t, "status": "True"} for t in types]


READY_GATEWAY = {"status": {"conditions": _conds("Accepted", "Programmed")}}


def route(active_weight: int | None = None, *, ready: bool = True) -> dict[str, Any]:
    """The HTTPRoute as the controller wrote it (weights given) and its parent status."""
    svc = rayservice()
    backends = []
    if active_weight is not None:
        backends = [gwb.Backend(A, 8000, active_weight), gwb.Backend(B, 8000, 100 - active_weight)]
    obj = gwb.build_httproute(svc, backends)
    conds = _conds("Accepted", "ResolvedRefs") if ready else _conds("Accepted")
    obj["status"] = {"parents": [{"parentRef": {"name": "svc-gateway"}, "conditions": conds}]}
    return obj


def plan(
    svc: dict[str, Any],
    *,
    rolling_back: bool = False,
    ready: bool = True,
    endpoints: int = 1,
    gateway: dict[str, Any] | None = READY_GATEWAY,
    http_route: dict[str, Any] | None = None,
) -> rsi.Step:
    return rsi.plan_step(
        svc,
        A,
        B,
        rolling_back=rolling_back,
        gaining_ready=ready,
        gaining_endpoints=endpoints,
        gateway=gateway,
        route=route() if http_route is None else http_route,
        now=NOW,
    )


def minutes_ago(seconds: float) -> dict[str, str]:
    return {"lastTrafficMigratedTime": rfc3339(NOW - seconds)}


@pytest.mark.parametrize(
    ("case", "kwargs", "sides", "want", "traffic"),
    [
        (
            "gateway-missing",
            {"gateway": None},
            ((100, 100), (0, 0)),
            rsi.Step("waiting for Gateway ns/svc-gateway to be Accepted and Programmed"),
            (100, 0),
        ),
        (
            "route-not-resolved",
            {"http_route": route(ready=False)},
            ((100, 100), (0, 0)),
            rsi.Step("waiting for HTTPRoute ns/svc-httproute to be ResolvedRefs"),
            (100, 0),
        ),
        ("complete", {}, ((0, 0), (100, 100)), rsi.Step(), (0, 100)),
        (
            "serve-not-running",
            {"ready": False},
            ((100, 100), (0, 0)),
            rsi.Step("waiting for Serve applications on RayCluster svc-bbbbb to be RUNNING"),
            (100, 0),
        ),
        (
            "grow-pending-capacity",
            {},
            ((100, 100), (0, 0)),
            rsi.Step(
                "setting target_capacity of RayCluster svc-bbbbb to 100%",
                put_side=rss.PENDING,
                put_capacity=100,
            ),
            (100, 0),
        ),
        (
            "shrink-active-capacity",
            {},
            ((100, 0), (100, 100)),
            rsi.Step(
                "setting target_capacity of RayCluster svc-aaaaa to 0%",
                put_side=rss.ACTIVE,
                put_capacity=0,
            ),
            (0, 100),
        ),
        (
            "no-serving-pods",
            {"endpoints": 0},
            ((100, 100), (100, 0)),
            rsi.Step("waiting for the serve endpoints of RayCluster svc-bbbbb to be ready"),
            (100, 0),
        ),
        (
            "first-traffic-step",
            {},
            ((100, 100), (100, 0)),
            rsi.Step(
                "moving traffic to RayCluster svc-bbbbb: 25% routed, target capacity 100% "
                "(RayCluster svc-aaaaa: 100%)",
                5.0,
            ),
            (75, 25),
        ),
        (
            "rollback-step",
            {"rolling_back": True},
            ((100, 50), (100, 50)),
            rsi.Step(
                "rolling traffic back to RayCluster svc-aaaaa: 75% routed, target capacity "
                "100% (RayCluster svc-bbbbb: 100%)",
                5.0,
            ),
            (75, 25),
        ),
    ],
)
def test_plan_step(
    case: str,
    kwargs: dict[str, Any],
    sides: tuple[tuple[int, int], tuple[int, int]],
    want: rsi.Step,
    traffic: tuple[int, int],
) -> None:
    svc = with_sides(rayservice(), *sides)
    if "http_route" not in kwargs:
        kwargs = {**kwargs, "http_route": route(sides[0][1])}
    assert plan(svc, **kwargs) == want, case
    status = svc["status"]
    got = (status[rss.ACTIVE]["trafficRoutedPercent"], status[rss.PENDING]["trafficRoutedPercent"])
    assert got == traffic


@pytest.mark.parametrize(
    ("since", "want_traffic", "want_wait"),
    [(2.0, 25, 3.0), (5.0, 50, 5.0), (None, 50, 5.0)],
    ids=["within-interval", "interval-passed", "never-moved"],
)
def test_traffic_waits_for_the_interval(
    since: float | None, want_traffic: int, want_wait: float
) -> None:
    svc = with_sides(rayservice(), (100, 75), (100, 25))
    if since is not None:
        svc["status"][rss.PENDING].update(minutes_ago(since))
    step = plan(svc, http_route=route(75))
    assert step.wait == want_wait
    assert svc["status"][rss.PENDING]["trafficRoutedPercent"] == want_traffic
    moved = svc["status"][rss.PENDING].get("lastTrafficMigratedTime")
    assert (moved == rfc3339(NOW)) is (want_traffic != 25)


def test_route_ahead_of_the_status_is_believed_and_restarts_the_interval() -> None:
    # The route already sends 25% to the pending cluster; the status write of that step was
    # lost. The status takes the route's weights with now as the migration time.
    svc = with_sides(rayservice(), (100, 100), (100, 0))
    step = plan(svc, http_route=route(75))
    pending = svc["status"][rss.PENDING]
    assert (pending["trafficRoutedPercent"], pending["lastTrafficMigratedTime"]) == (
        25,
        rfc3339(NOW),
    )
    assert step.wait == 5.0
    assert "25% routed" in step.detail


def test_pending_capacity_defaults_to_zero() -> None:
    svc = with_sides(rayservice(), (100, 100), (0, 0))
    del svc["status"][rss.PENDING]["targetCapacity"]
    plan(svc)
    assert svc["status"][rss.PENDING]["targetCapacity"] == 0


def test_max_surge_limits_a_capacity_step() -> None:
    svc = with_sides(rayservice(maxSurgePercent=30), (100, 100), (0, 0))
    assert plan(svc) == rsi.Step(
        "setting target_capacity of RayCluster svc-bbbbb to 30%",
        put_side=rss.PENDING,
        put_capacity=30,
    )


# ---------------------------------------------------------------------- route, capacity config


def test_route_backends_carry_each_clusters_port_and_weight() -> None:
    svc = with_sides(rayservice(), (100, 60), (100, 40))
    active = rsb.build_cluster(svc, A)
    pending = rsb.build_cluster(svc, B)
    pending["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "serve", "containerPort": 9000}
    ]
    assert rsi.route_backends(svc["status"], active, pending) == [
        gwb.Backend(A, 8000, 60),
        gwb.Backend(B, 9000, 40),
    ]
    svc["status"][rss.PENDING] = {}
    assert rsi.route_backends(svc["status"], active, None) == [gwb.Backend(A, 8000, 60)]


@pytest.mark.parametrize(
    ("applied", "deployed", "want"),
    [
        ("goal", {"applications": [{"name": "old"}]}, {"applications": []}),
        ("other", {"applications": [{"name": "old"}]}, {"applications": [{"name": "old"}]}),
        (None, {}, {}),
    ],
    ids=["runs-the-goal", "runs-something-else", "nothing-known"],
)
def test_capacity_config_is_what_the_cluster_runs(
    applied: str | None, deployed: dict[str, Any], want: dict[str, Any]
) -> None:
    svc = rayservice()
    if applied is not None:
        applied = rsb.serve_config_hash(svc) if applied == "goal" else "stale"
    got = rsi.capacity_config(svc, applied, deployed)
    assert got == want
    got["target_capacity"] = 5
    assert "target_capacity" not in deployed, "the observed config is never modified"
