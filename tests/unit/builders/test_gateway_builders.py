"""The incremental upgrade's pure parts: Gateway / HTTPRoute / per-cluster serve Service, drift
and readiness checks, and the stepping arithmetic run to completion (forward and rollback)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberay.builders import gateway as gwb
from kuberay.builders import rayservice as rsb
from kuberay.builders.options import BuildOptions


def rayservice(**options: Any) -> dict[str, Any]:
    container = {
        "name": "ray-head",
        "image": "ray",
        "ports": [{"name": "serve", "containerPort": 8001}],
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "svc", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "upgradeStrategy": {
                "type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {
                    "stepSizePercent": 25,
                    "intervalSeconds": 10,
                    "gatewayClassName": "istio",
                    **options,
                },
            },
            "rayClusterConfig": {
                "headGroupSpec": {"template": {"spec": {"containers": [container]}}},
            },
        },
    }


def cluster(name: str) -> dict[str, Any]:
    svc = rayservice()
    out = rsb.build_cluster(svc, name)
    out["metadata"]["uid"] = f"uid-{name}"
    return out


def test_options_default_max_surge_to_100() -> None:
    opts = gwb.upgrade_options(rayservice())
    assert opts == gwb.UpgradeOptions(100, 25, 10, "istio")
    assert gwb.upgrade_options(rayservice(maxSurgePercent=40)).max_surge_percent == 40


def test_gateway_shape() -> None:
    gw = gwb.build_gateway(rayservice())
    assert gw["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert gw["kind"] == "Gateway"
    assert gw["metadata"]["name"] == "svc-gateway"
    assert gw["metadata"]["namespace"] == "ns"
    owner = gw["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "RayService",
        "svc",
        "u-1",
        True,
    )
    assert gw["spec"] == {
        "gatewayClassName": "istio",
        "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
    }
    assert gw["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "svc"


def test_httproute_shape() -> None:
    route = gwb.build_httproute(
        rayservice(), [gwb.Backend("svc-aaaaa", 8001, 75), gwb.Backend("svc-bbbbb", 8001, 25)]
    )
    assert route["kind"] == "HTTPRoute"
    assert route["metadata"]["name"] == "svc-httproute"
    assert route["spec"]["parentRefs"] == [{"name": "svc-gateway", "namespace": "ns"}]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {"name": "svc-aaaaa-serve-svc", "namespace": "ns", "port": 8001, "weight": 75},
        {"name": "svc-bbbbb-serve-svc", "namespace": "ns", "port": 8001, "weight": 25},
    ]
    assert gwb.route_weights(route, "svc-aaaaa", "svc-bbbbb") == (75, 25)
    assert gwb.route_weights(route, "svc-bbbbb", "svc-aaaaa") == (25, 75)
    assert gwb.route_weights(route, "svc-aaaaa", "svc-other") is None
    assert gwb.route_weights(None, "svc-aaaaa", "svc-bbbbb") is None


def test_per_cluster_serve_service_is_owned_by_its_cluster() -> None:
    out = gwb.build_cluster_serve_service(rayservice(), cluster("svc-aaaaa"), BuildOptions())
    assert out["metadata"]["name"] == "svc-aaaaa-serve-svc"
    assert out["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert out["metadata"]["ownerReferences"][0]["uid"] == "uid-svc-aaaaa"
    assert out["spec"]["selector"] == {"ray.io/cluster": "svc-aaaaa", "ray.io/serve": "true"}
    assert out["spec"]["ports"] == [{"name": "serve", "port": 8001}]
    assert out["metadata"]["labels"]["app.kubernetes.io/created-by"] == "kuberay-operator"


def test_drift_ignores_server_defaults_but_not_our_fields() -> None:
    want = gwb.build_gateway(rayservice())
    have = copy.deepcopy(want)
    have["metadata"]["resourceVersion"] = "7"
    have["spec"]["listeners"][0]["allowedRoutes"] = {"namespaces": {"from": "Same"}}
    have["status"] = {"conditions": []}
    assert not gwb.gateway_drifted(have, want)
    have["spec"]["gatewayClassName"] = "other"
    assert gwb.gateway_drifted(have, want)

    want_route = gwb.build_httproute(rayservice(), [gwb.Backend("svc-a", 8000, 100)])
    have_route = copy.deepcopy(want_route)
    have_route["spec"]["parentRefs"][0].update(group="gateway.networking.k8s.io", kind="Gateway")
    have_route["spec"]["rules"][0]["backendRefs"][0].update(group="", kind="Service")
    assert not gwb.httproute_drifted(have_route, want_route)
    have_route["spec"]["rules"][0]["backendRefs"][0]["weight"] = 50
    assert gwb.httproute_drifted(have_route, want_route)
    patch = gwb.drift_patch(want_route)
    assert patch["spec"] == want_route["spec"]


def _conditions(**status: str) -> list[dict[str, str]]:
    return [{"type": k, "status": v} for k, v in status.items()]


def test_readiness_conditions() -> None:
    assert gwb.gateway_not_ready(None) == ["Accepted", "Programmed"]
    gw = {"status": {"conditions": _conditions(Accepted="True", Programmed="False")}}
    assert gwb.gateway_not_ready(gw) == ["Programmed"]
    gw["status"]["conditions"] = _conditions(Accepted="True", Programmed="True")
    assert gwb.gateway_not_ready(gw) == []

    route: dict[str, Any] = {"status": {"parents": []}}
    assert gwb.httproute_not_ready(route, "svc-gateway") == ["Accepted", "ResolvedRefs"]
    route["status"]["parents"] = [
        {"parentRef": {"name": "other"}, "conditions": _conditions(Accepted="True")},
        {
            "parentRef": {"name": "svc-gateway"},
            "conditions": _conditions(Accepted="True", ResolvedRefs="False"),
        },
    ]
    assert gwb.httproute_not_ready(route, "svc-gateway") == ["ResolvedRefs"]
    route["status"]["parents"][1]["conditions"] = _conditions(Accepted="True", ResolvedRefs="True")
    assert gwb.httproute_not_ready(route, "svc-gateway") == []


def _run(
    gaining: int, losing: int, traffic: int, surge: int, step: int
) -> list[tuple[int, int, int]]:
    """Drives the stepping to completion as the controller does (one move per pass, the
    interval always elapsed); returns every (gaining capacity, losing capacity, traffic)."""
    seen = [(gaining, losing, traffic)]
    for _ in range(1000):
        m = gwb.Migration(gaining, losing, traffic)
        if m.complete:
            return seen
        new_g, new_l = gwb.next_capacities(m, surge)
        if (new_g, new_l) == (gaining, losing):
            traffic, _wait = gwb.next_traffic(m, step, 10, None, 0.0)
        gaining, losing = new_g, new_l
        seen.append((gaining, losing, traffic))
    raise AssertionError(f"no completion: {seen[-5:]}")


def test_forward_sequence_surge_50_step_25() -> None:
    assert _run(0, 100, 0, 50, 25) == [
        (0, 100, 0),
        (50, 100, 0),  # pending capacity up first
        (50, 100, 25),
        (50, 100, 50),  # traffic follows up to the capacity
        (50, 50, 50),  # then the active cluster shrinks
        (100, 50, 50),
        (100, 50, 75),
        (100, 50, 100),
        (100, 0, 100),
    ]


@pytest.mark.parametrize(("surge", "step"), [(100, 100), (100, 10), (30, 7), (1, 1), (50, 50)])
def test_invariants_hold_for_any_options(surge: int, step: int) -> None:
    seen = _run(0, 100, 0, surge, step)
    assert seen[-1] == (100, 0, 100)
    for gaining, losing, traffic in seen:
        assert 0 <= traffic <= gaining <= 100, "traffic never exceeds the gaining capacity"
        assert 100 - traffic <= losing or losing == 0 or traffic == 100
        assert gaining + losing >= 100, "total capacity never drops below 100%"


def test_rollback_from_the_middle_runs_backwards() -> None:
    # Forward state: pending at capacity 100 with 75% of traffic, active shrunk to 50.
    # Rollback: the active cluster gains (traffic 25%), the pending one loses.
    seen = _run(50, 100, 25, 50, 25)
    assert seen[-1] == (100, 0, 100)
    assert seen[1] == (50, 100, 50), "traffic back up to the active capacity first"
    assert all(g + lo >= 100 for g, lo, _ in seen)


def test_traffic_waits_for_the_interval() -> None:
    m = gwb.Migration(50, 100, 25)
    assert gwb.next_traffic(m, 25, 10, 100.0, 104.0) == (25, 6.0)
    assert gwb.next_traffic(m, 25, 10, 100.0, 110.0) == (50, 10.0)
    assert gwb.next_traffic(gwb.Migration(50, 100, 50), 25, 10, None, 0.0) == (50, None)
    assert gwb.next_traffic(gwb.Migration(50, 100, 40), 25, 10, None, 0.0) == (50, 10.0)


def test_normalize_capacity() -> None:
    assert gwb.normalize_capacity(None, 100) == 100
    assert gwb.normalize_capacity(50.0, 100) == 50
    assert gwb.normalize_capacity(150, 0) == 100
    assert gwb.normalize_capacity("x", 7) == 7


def test_deployed_serve_config_round_trips_what_serve_reports() -> None:
    details: dict[str, Any] = {
        "proxy_location": "EveryNode",
        "http_options": {"host": "0.0.0.0"},
        "applications": {
            "a": {"status": "RUNNING", "deployed_app_config": {"name": "a", "import_path": "m:a"}},
        },
        "target_capacity": 50,
    }
    assert rsb.deployed_serve_config(details) == {
        "applications": [{"name": "a", "import_path": "m:a"}],
        "proxy_location": "EveryNode",
        "http_options": {"host": "0.0.0.0"},
    }
    details["applications"]["b"] = {"status": "RUNNING"}  # no config reported: unusable
    assert rsb.deployed_serve_config(details) == {}
    assert rsb.deployed_serve_config({}) == {}


def test_runs_serve_config_only_when_serve_reports_the_goal_back() -> None:
    app = {"name": "a", "import_path": "m:a"}
    details = {"applications": {"a": {"deployed_app_config": app}}, "target_capacity": 0}
    assert rsb.runs_serve_config(details, {"applications": [app], "target_capacity": 50})
    assert not rsb.runs_serve_config(details, {"applications": [{**app, "import_path": "m:b"}]})
    assert not rsb.runs_serve_config(details, {"applications": [app], "http_options": {"port": 1}})
    assert not rsb.runs_serve_config({"applications": {}}, {"applications": []})
