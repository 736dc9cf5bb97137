"""RayService decisions that need no API server, as tables over the pure functions of
``rayservice_status``: whether a new cluster is prepared, the initializing timeout, what counts
as a status change, what an upgrade waits for, Serve config and label decisions, the blue/green
switch target, the clean-up schedule and the suspend transitions; plus the Serve proxy probe
(``kuberay.ray.serve``) against a local server, and building a reconciler without a Manager."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kuberay.api import features
from kuberay.api.features import FeatureGates
from kuberay.api.k8svalidation import format_go_datetime, format_go_duration
from kuberay.builders import rayservice as rsb
from kuberay.controllers import rayservice_status as rss
from kuberay.controllers.common import rfc3339
from kuberay.controllers.rayservice import (
    ENDPOINTSLICE_FIELDS,
    RayServiceConfig,
    RayServiceReconciler,
    register,
)
from kuberay.ray.serve import proxy_healthz
from kuberay.runtime.store import projector

SERVE = "applications:\n  - name: app\n    import_path: mod:app\n"
NOW = 1_700_000_000.0
GATES = FeatureGates()


def rayservice(image: str = "a", **spec: Any) -> dict[str, Any]:
    cluster = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": image}]}}},
        "workerGroupSpecs": [],
    }
    body: dict[str, Any] = {"serveConfigV2": SERVE, "rayClusterConfig": cluster}
    body.update(spec)
    return {
        "metadata": {"name": "svc", "namespace": "ns", "generation": 3},
        "spec": body,
        "status": {},
    }


def head_ready_cluster(svc: dict[str, Any], name: str) -> dict[str, Any]:
    cluster = rsb.build_cluster(svc, name)
    cluster["status"] = {"conditions": [{"type": "HeadPodReady", "status": "True"}]}
    return cluster


# ---------------------------------------------------------------------- proxy probe


async def _serve_once(answer: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, int(port)


async def test_proxy_probe_counts_an_unreachable_proxy_as_unhealthy() -> None:
    server, port = await _serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess")
    async with server:
        assert await proxy_healthz("127.0.0.1", port) is True
    server, port = await _serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
    async with server:
        assert await proxy_healthz("127.0.0.1", port) is False
    assert await proxy_healthz("127.0.0.1", port, timeout=0.5) is False


async def test_proxy_probe_without_a_status_line_is_unhealthy() -> None:
    server, port = await _serve_once(b"")
    async with server:
        assert await proxy_healthz("127.0.0.1", port) is False


# ---------------------------------------------------------------------- new cluster


def _changed() -> dict[str, Any]:
    return rayservice("b")


@pytest.mark.parametrize(
    ("case", "goal", "active", "pending", "named", "strategy", "zero_downtime", "want"),
    [
        ("first cluster", "a", None, None, "", None, True, True),
        ("nothing changed", "a", "a", None, "", None, True, False),
        ("NewCluster by default", "b", "a", None, "", None, True, True),
        ("strategy None", "b", "a", None, "", "None", True, False),
        ("zero downtime off", "b", "a", None, "", None, False, False),
        ("explicit NewCluster wins", "b", "a", None, "", "NewCluster", False, True),
        ("pending for the goal is kept", "b", "a", "b", "", None, True, False),
        ("pending for an older goal is replaced", "a", "a", "b", "", None, True, True),
        ("named pending is never renamed", "b", "a", None, "svc-ccccc", None, True, False),
    ],
)
def test_should_prepare_new_cluster(
    case: str,
    goal: str,
    active: str | None,
    pending: str | None,
    named: str,
    strategy: str | None,
    zero_downtime: bool,
    want: bool,
) -> None:
    svc = rayservice(goal)
    if strategy is not None:
        svc["spec"]["upgradeStrategy"] = {"type": strategy}
    if named:
        svc["status"]["pendingServiceStatus"] = {"rayClusterName": named}
    active_obj = rsb.build_cluster(rayservice(active), "svc-aaaaa") if active else None
    pending_obj = rsb.build_cluster(rayservice(pending), "svc-bbbbb") if pending else None
    got = rss.should_prepare_new_cluster(
        svc,
        active_obj,
        pending_obj,
        incremental=False,
        gates=GATES,
        zero_downtime=zero_downtime,
    )
    assert got is want, case


@pytest.mark.parametrize(
    ("strategy", "zero_downtime", "want"),
    [
        (None, True, True),
        (None, False, False),
        ("NewCluster", False, True),
        ("None", True, False),
    ],
)
def test_upgrades_enabled(strategy: str | None, zero_downtime: bool, want: bool) -> None:
    svc = rayservice("a")
    if strategy is not None:
        svc["spec"]["upgradeStrategy"] = {"type": strategy}
    assert rss.upgrades_enabled(svc, gates=GATES, zero_downtime=zero_downtime) is want


def test_incremental_upgrades_follow_their_gate() -> None:
    svc = rayservice("a")
    svc["spec"]["upgradeStrategy"] = {"type": "NewClusterWithIncrementalUpgrade"}
    for on in (True, False):
        gates = FeatureGates({features.RAY_SERVICE_INCREMENTAL_UPGRADE: on})
        assert rss.upgrades_enabled(svc, gates=gates, zero_downtime=not on) is on


def test_no_new_cluster_while_rolling_back() -> None:
    svc = rayservice("b")
    rss.set_service_condition(
        svc, "RollbackInProgress", "True", "DesiredClusterSpecChanged", "", NOW
    )
    active = rsb.build_cluster(rayservice("a"), "svc-aaaaa")
    assert not rss.should_prepare_new_cluster(
        svc, active, None, incremental=False, gates=GATES, zero_downtime=True
    )


def test_only_appended_worker_groups_update_in_place_instead_of_a_new_cluster() -> None:
    svc = rayservice("a")
    active = rsb.build_cluster(svc, "svc-aaaaa")
    grown = copy.deepcopy(svc)
    grown["spec"]["rayClusterConfig"]["workerGroupSpecs"] = [
        {
            "groupName": "extra",
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "w", "image": "a"}]}},
        }
    ]
    assert not rss.should_prepare_new_cluster(
        grown, active, None, incremental=False, gates=GATES, zero_downtime=True
    )


@pytest.mark.parametrize(
    ("incremental", "has_active", "want"),
    [
        (False, False, {"rayClusterName": "n"}),
        (False, True, {"rayClusterName": "n"}),
        (True, False, {"rayClusterName": "n", "targetCapacity": 100, "trafficRoutedPercent": 100}),
        (True, True, {"rayClusterName": "n", "targetCapacity": 0, "trafficRoutedPercent": 0}),
    ],
)
def test_new_pending_side(incremental: bool, has_active: bool, want: dict[str, Any]) -> None:
    assert rss.new_pending_side("n", incremental=incremental, has_active=has_active) == want


# ---------------------------------------------------------------------- initializing timeout


def _initializing(annotation: str | None, since: float, reason: str = "Initializing") -> Any:
    svc = rayservice()
    if annotation is not None:
        svc["metadata"]["annotations"] = {"ray.io/initializing-timeout": annotation}
    rss.set_service_condition(svc, "Ready", "False", reason, "", since)
    return svc


@pytest.mark.parametrize(
    ("annotation", "elapsed", "reason", "want"),
    [
        ("30", 0, "Initializing", (False, "")),
        ("30", 29, "Initializing", (False, "")),
        (
            "30",
            31,
            "Initializing",
            (
                True,
                "RayService failed to become ready within the configured timeout of 30s. "
                "Time spent initializing: 31s",
            ),
        ),
        (
            "1m",
            61.5,
            "Initializing",
            (
                True,
                "RayService failed to become ready within the configured timeout of 1m0s. "
                "Time spent initializing: 1m1.5s",
            ),
        ),
        ("1m", 59, "Initializing", (False, "")),
        (None, 10_000, "Initializing", (False, "")),
        ("30", 31, "NonZeroServeEndpoints", (False, "")),
        ("30", 0, "InitializingTimeout", (True, "")),  # terminal, reported once
    ],
)
def test_initializing_timeout(
    annotation: str | None, elapsed: float, reason: str, want: tuple[bool, str]
) -> None:
    svc = _initializing(annotation, NOW, reason)
    assert rss.initializing_timed_out(svc, NOW + elapsed) == want


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (0, "0s"),
        (10, "10s"),
        (60, "1m0s"),
        (3723.25, "1h2m3.25s"),
        (12.3456789, "12.3456789s"),
        (0.25, "250ms"),
    ],
)
def test_go_duration_string(seconds: float, want: str) -> None:
    """Condition messages quote durations the way Go's ``time.Duration.String`` prints them
    (upstream's e2e tests match on the message)."""
    assert format_go_duration(seconds) == want


def test_go_datetime_layouts() -> None:
    """RayJob messages print times as Go's ``time.DateTime`` in UTC, and deadline messages as
    ``%v`` of a ``metav1.Time`` (with the zone); fractions of a second are dropped."""
    when = 1_796_215_452.75  # 2026-12-02 12:44:12.75 UTC
    assert format_go_datetime(when) == "2026-12-02 12:44:12"
    assert format_go_datetime(when, zone=True) == "2026-12-02 12:44:12 +0000 UTC"


def test_initializing_timeout_seeded_by_init_conditions() -> None:
    svc = rayservice()
    svc["metadata"]["annotations"] = {"ray.io/initializing-timeout": "30"}
    rss.init_conditions(svc["status"].setdefault("conditions", []), 3, rfc3339(NOW))
    assert rss.initializing_timed_out(svc, NOW) == (False, "")
    assert rss.initializing_timed_out(svc, NOW + 31)[0]


# ---------------------------------------------------------------------- status writes


def _base_status() -> dict[str, Any]:
    return {
        "activeServiceStatus": {"rayClusterName": "a", "rayClusterStatus": {"state": "ready"}},
        "lastUpdateTime": "t1",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}],
    }


def _cluster_status_changed(s: dict[str, Any]) -> None:
    s["activeServiceStatus"]["rayClusterStatus"] = {"state": "suspended"}


def _times_changed(s: dict[str, Any]) -> None:
    s["lastUpdateTime"] = "t2"
    s["conditions"][0]["lastTransitionTime"] = "t2"


def _name_changed(s: dict[str, Any]) -> None:
    s["activeServiceStatus"]["rayClusterName"] = "b"


def _condition_changed(s: dict[str, Any]) -> None:
    s["conditions"][0]["status"] = "False"


@pytest.mark.parametrize(
    ("change", "warrants_write"),
    [
        (_cluster_status_changed, False),
        (_times_changed, False),
        (_name_changed, True),
        (_condition_changed, True),
    ],
)
def test_status_changes_that_warrant_a_write(change: Any, warrants_write: bool) -> None:
    base = _base_status()
    other = copy.deepcopy(base)
    change(other)
    assert (rss.comparable(base) != rss.comparable(other)) is warrants_write
    assert base == _base_status(), "comparing never modifies the status"


# ---------------------------------------------------------------------- what an upgrade waits for


@pytest.mark.parametrize(
    ("named", "pending", "apps", "detail", "want"),
    [
        ("", None, None, "", ""),
        ("svc-bbbbb", None, None, "", "creating RayCluster svc-bbbbb"),
        (
            "svc-bbbbb",
            "not-ready",
            None,
            "",
            "waiting for the head pod of RayCluster svc-bbbbb to be ready",
        ),
        (
            "svc-bbbbb",
            "ready",
            None,
            "",
            "waiting for the dashboard of RayCluster svc-bbbbb to answer",
        ),
        ("svc-bbbbb", "ready", {}, "", "waiting for Serve applications on RayCluster svc-bbbbb"),
        (
            "svc-bbbbb",
            "ready",
            {"a": {"status": "RUNNING"}, "b": {"status": "DEPLOYING"}},
            "",
            "waiting for Serve applications on RayCluster svc-bbbbb to be RUNNING: b=DEPLOYING",
        ),
        (
            "svc-bbbbb",
            "ready",
            {"a": {"status": "RUNNING"}},
            "",
            "switching traffic to RayCluster svc-bbbbb",
        ),
        ("svc-bbbbb", "ready", {"a": {"status": "RUNNING"}}, "moving traffic", "moving traffic"),
    ],
)
def test_waiting_for_says_why_an_upgrade_waits(
    named: str, pending: str | None, apps: dict[str, Any] | None, detail: str, want: str
) -> None:
    svc = rayservice()
    if named:
        svc["status"]["pendingServiceStatus"] = {"rayClusterName": named}
    cluster = None
    if pending is not None:
        cluster = rsb.build_cluster(svc, named)
        if pending == "ready":
            cluster["status"] = {"conditions": [{"type": "HeadPodReady", "status": "True"}]}
    assert rss.waiting_for(svc, cluster, apps, detail) == want


@pytest.mark.parametrize(
    ("named", "detail", "want"),
    [
        ("", "", ""),
        ("", "the Gateway API is missing", "the Gateway API is missing"),
        ("svc-bbbbb", "", "creating RayCluster svc-bbbbb"),
        ("svc-bbbbb", "Gateway not ready", "creating RayCluster svc-bbbbb; Gateway not ready"),
    ],
)
def test_upgrade_detail_adds_what_the_switch_waits_for(named: str, detail: str, want: str) -> None:
    svc = rayservice()
    if named:
        svc["status"]["pendingServiceStatus"] = {"rayClusterName": named}
    assert rss.upgrade_detail(svc, None, None, detail) == want


# ---------------------------------------------------------------------- observed state


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ({}, False),
        ({"state": "ready"}, True),
        ({"conditions": [{"type": "HeadPodReady", "status": "False"}], "state": "ready"}, False),
        ({"conditions": [{"type": "HeadPodReady", "status": "True"}]}, True),
    ],
)
def test_head_ready(status: dict[str, Any], want: bool) -> None:
    assert rss.head_ready({"metadata": {"name": "c"}, "status": status}) is want


@pytest.mark.parametrize(
    ("ports", "want"),
    [
        (None, 8000),
        ([{"name": "dashboard", "containerPort": 8265}], 8000),
        ([{"name": "serve", "containerPort": 9000}], 9000),
    ],
)
def test_serve_port(ports: list[dict[str, Any]] | None, want: int) -> None:
    container: dict[str, Any] = {"name": "h"}
    if ports is not None:
        container["ports"] = ports
    cluster = {"spec": {"headGroupSpec": {"template": {"spec": {"containers": [container]}}}}}
    assert rss.serve_port(cluster) == want
    assert rss.serve_port({}) == 8000


def _pod(serve: str | None, ready: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "labels": {} if serve is None else {"ray.io/serve": serve}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        ([], 0),
        ([_pod("true", "True")], 1),
        ([_pod("true", "True"), _pod("true", "True")], 2),
        ([_pod("false", "True")], 0),
        ([_pod(None, "True")], 0),
        ([_pod("true", "False")], 0),
        ([_pod("true", "True", deleting=True)], 0),
    ],
)
def test_count_serving_pods(pods: list[dict[str, Any]], want: int) -> None:
    assert rss.count_serving_pods(pods) == want


@pytest.mark.parametrize(
    ("incremental", "sides", "want"),
    [
        (False, {}, ["svc-serve-svc"]),
        (True, {}, []),
        (True, {"activeServiceStatus": {"rayClusterName": "svc-a"}}, ["svc-a-serve-svc"]),
        (
            True,
            {
                "activeServiceStatus": {"rayClusterName": "svc-a"},
                "pendingServiceStatus": {"rayClusterName": "svc-b"},
            },
            ["svc-a-serve-svc", "svc-b-serve-svc"],
        ),
    ],
)
def test_serve_service_names(incremental: bool, sides: dict[str, Any], want: list[str]) -> None:
    svc = rayservice()
    svc["status"].update(sides)
    assert rss.serve_service_names(svc, incremental=incremental) == want


# ---------------------------------------------------------------------- serve decisions

RUNNING_DETAILS = {"applications": {"app": {"status": "RUNNING"}}}


@pytest.mark.parametrize(
    ("config", "applied", "details", "runs", "want"),
    [
        ({}, None, {}, False, ""),  # not to be applied
        ({"applications": []}, None, {}, False, rss.SERVE_PUT),  # never applied
        ({"applications": []}, "goal", {}, False, rss.SERVE_PUT),  # no apps (head restarted)
        ({"applications": []}, "goal", RUNNING_DETAILS, False, ""),  # up to date
        ({"applications": []}, "old", RUNNING_DETAILS, False, rss.SERVE_PUT),  # outdated
        ({"applications": []}, "old", RUNNING_DETAILS, True, rss.SERVE_RECORD),  # record lost
    ],
)
def test_serve_config_action(
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, Any],
    applied: str | None,
    details: dict[str, Any],
    runs: bool,
    want: str,
) -> None:
    monkeypatch.setattr(rsb, "runs_serve_config", lambda details, goal: runs)
    assert rss.serve_config_action(config, applied, "goal", details) == want


def test_serve_config_action_recognises_a_running_goal() -> None:
    config = rsb.serve_config(rayservice()) or {}
    app = {"status": "RUNNING", "deployed_app_config": config["applications"][0]}
    details = {"applications": {"app": app}}
    assert rss.serve_config_action(config, None, "goal", details) == rss.SERVE_RECORD
    other = copy.deepcopy(details)
    other["applications"]["app"]["deployed_app_config"] = {"name": "app", "import_path": "x:y"}
    assert rss.serve_config_action(config, None, "goal", other) == rss.SERVE_PUT


@pytest.mark.parametrize(
    ("capacity", "observed", "want_capacity"),
    [(None, 30, None), (50, None, None), (50, 30, 30), (0, 100, 100)],
)
def test_serve_state(capacity: int | None, observed: int | None, want_capacity: int | None) -> None:
    details: dict[str, Any] = {"applications": {"app": {"status": "RUNNING"}}}
    if observed is not None:
        details["target_capacity"] = observed
    state = rss.serve_state(details, capacity)
    assert state.capacity == want_capacity
    assert state.ready
    assert state.apps is not None
    assert state.apps["app"]["status"] == "RUNNING"


def test_serve_state_not_ready_without_applications() -> None:
    assert not rss.serve_state({}, None).ready
    assert not rss.serve_state({"applications": {"a": {"status": "DEPLOYING"}}}, None).ready


RUNNING = {"a": {"status": "RUNNING"}}
DEPLOYING = {"a": {"status": "DEPLOYING"}}


@pytest.mark.parametrize(
    ("exclude", "probed", "apps", "want"),
    [
        (True, True, RUNNING, "false"),
        (False, True, None, "true"),
        (False, False, RUNNING, "false"),
        (False, None, RUNNING, "true"),
        (False, None, DEPLOYING, "false"),
        (False, None, None, "false"),
    ],
)
def test_serve_label(
    exclude: bool, probed: bool | None, apps: dict[str, Any] | None, want: str
) -> None:
    assert rss.serve_label(exclude_head=exclude, probed=probed, apps=apps) == want


# ---------------------------------------------------------------------- blue/green switch


@pytest.mark.parametrize(
    ("goal", "has_active", "has_pending", "active_ready", "pending_ready", "endpoints", "want"),
    [
        ("b", True, True, True, True, True, "pending"),
        ("b", True, True, True, True, False, "active"),  # no serving endpoints yet
        ("b", True, True, True, False, True, "active"),
        ("c", True, True, True, True, True, "active"),  # pending for an older goal
        ("b", True, True, False, False, True, None),
        ("b", False, True, False, True, True, "pending"),
        ("a", True, False, True, False, False, "active"),
        ("a", True, False, False, False, False, None),
    ],
)
def test_switch_target(
    goal: str,
    has_active: bool,
    has_pending: bool,
    active_ready: bool,
    pending_ready: bool,
    endpoints: bool,
    want: str | None,
) -> None:
    svc = rayservice(goal)
    active = rsb.build_cluster(rayservice("a"), "svc-aaaaa") if has_active else None
    pending = rsb.build_cluster(rayservice("b"), "svc-bbbbb") if has_pending else None
    got = rss.switch_target(
        svc,
        active,
        pending,
        active_ready=active_ready,
        pending_ready=pending_ready,
        endpoints_ready=endpoints,
    )
    assert got is {"active": active, "pending": pending, None: None}[want]


# ---------------------------------------------------------------------- side status


def test_side_status_keeps_what_the_dashboard_did_not_say() -> None:
    cluster = head_ready_cluster(rayservice(), "svc-aaaaa")
    old = {"rayClusterName": "svc-aaaaa", "applicationStatuses": {"x": {}}, "targetCapacity": 40}
    out = rss.side_status(old, cluster, rss.ServeState())
    assert out["applicationStatuses"] == {"x": {}}
    assert out["targetCapacity"] == 40
    assert out["rayClusterStatus"] == cluster["status"]
    assert out is not old
    assert old["applicationStatuses"] == {"x": {}}


def test_side_status_takes_what_serve_reports() -> None:
    cluster = rsb.build_cluster(rayservice(), "svc-aaaaa")
    serve = rss.ServeState(ready=True, apps=RUNNING, capacity=60)
    out = rss.side_status({"targetCapacity": 40}, cluster, serve)
    assert out == {
        "rayClusterName": "svc-aaaaa",
        "applicationStatuses": RUNNING,
        "targetCapacity": 60,
    }


# ---------------------------------------------------------------------- clean-up schedule


@pytest.mark.parametrize(
    ("deleting", "want"),
    [(False, {"svc-a", "svc-b"}), (True, set())],
)
def test_clusters_to_keep(deleting: bool, want: set[str]) -> None:
    status = {
        "activeServiceStatus": {"rayClusterName": "svc-a"},
        "pendingServiceStatus": {"rayClusterName": "svc-b"},
    }
    assert rss.clusters_to_keep(status, deleting=deleting) == want


@pytest.mark.parametrize(
    ("recorded", "deleting", "delay", "want"),
    [
        (None, False, 60, (NOW + 60, True)),  # first sight: schedule and record
        (None, False, 0, (NOW, False)),  # no delay: nothing to record
        (NOW + 30, False, 60, (NOW + 30, False)),  # recorded: kept across restarts
        (NOW - 5, False, 60, (NOW - 5, False)),  # overdue
        (NOW + 30, True, 0, (NOW, False)),  # RayService deleted: cut short
        (NOW - 5, True, 0, (NOW - 5, False)),
    ],
)
def test_deletion_due(
    recorded: float | None, deleting: bool, delay: float, want: tuple[float, bool]
) -> None:
    annotations = {} if recorded is None else {"ray.io/deletion-scheduled-at": rfc3339(recorded)}
    assert rss.deletion_due(annotations, deleting=deleting, now=NOW, delay=delay) == want


# ---------------------------------------------------------------------- conditions, suspend


def _conds(svc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x["reason"]) for x in svc["status"]["conditions"]}


def test_set_service_condition_moves_the_time_only_on_a_status_change() -> None:
    svc = rayservice()
    rss.set_service_condition(svc, "Ready", "False", "Initializing", "m", NOW)
    rss.set_service_condition(svc, "Ready", "False", "Other", "m2", NOW + 10)
    cond = rss.condition(svc, "Ready")
    assert cond is not None
    assert (cond["reason"], cond["message"], cond["lastTransitionTime"]) == (
        "Other",
        "m2",
        rfc3339(NOW),
    )
    assert cond["observedGeneration"] == 3
    rss.set_service_condition(svc, "Ready", "True", "Serving", "", NOW + 20)
    assert (rss.condition(svc, "Ready") or {})["lastTransitionTime"] == rfc3339(NOW + 20)
    rss.drop_condition(svc, "Ready")
    assert rss.condition(svc, "Ready") is None


def test_suspend_transitions() -> None:
    svc = rayservice()
    svc["status"]["activeServiceStatus"] = {"rayClusterName": "svc-a"}
    svc["status"]["numServeEndpoints"] = 2
    rss.mark_suspend_requested(svc, NOW)
    assert _conds(svc) == {
        "Suspending": ("True", "SuspendRequested"),
        "Ready": ("False", "SuspendInProgress"),
        "UpgradeInProgress": ("False", "SuspendInProgress"),
        "RollbackInProgress": ("False", "SuspendInProgress"),
    }
    assert svc["status"]["activeServiceStatus"] == {}
    assert (svc["status"]["numServeEndpoints"], svc["status"]["serviceStatus"]) == (0, "")
    rss.mark_suspend_in_progress(svc, NOW)
    assert _conds(svc)["Suspending"] == ("True", "SuspendInProgress")
    rss.mark_suspended(svc, NOW)
    assert _conds(svc) == {
        "Suspending": ("False", "SuspendComplete"),
        "Ready": ("False", "SuspendComplete"),
        "UpgradeInProgress": ("False", "SuspendComplete"),
        "RollbackInProgress": ("False", "SuspendComplete"),
        "Suspended": ("True", "SuspendComplete"),
    }
    rss.mark_resumed(svc, NOW)
    conds = _conds(svc)
    assert "Ready" not in conds
    assert conds["Suspended"] == ("False", "RayServiceResumed")
    assert conds["UpgradeInProgress"] == ("False", "Initializing")


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("mutate", "reason", "text"),
    [
        (lambda s: None, None, None),
        (
            lambda s: s["spec"].update(serveConfigV2="applications: [\n"),
            "InvalidRayServiceSpec",
            "serveConfigV2",
        ),
        (
            lambda s: s["metadata"].update(name="x" * 70),
            "InvalidRayServiceMetadata",
            None,
        ),
    ],
    ids=["valid", "bad-yaml", "long-name"],
)
def test_validation_problem(mutate: Any, reason: str | None, text: str | None) -> None:
    svc = rayservice()
    mutate(svc)
    problem = rss.validation_problem(svc, GATES)
    if reason is None:
        assert problem is None
        return
    assert problem is not None
    assert problem[0] == reason
    if text is not None:
        assert text in problem[1]


# ---------------------------------------------------------------------- caches and construction


def test_endpointslice_projection_keeps_what_counting_ready_endpoints_needs() -> None:
    def endpoint(uid: str | None, ready: bool) -> dict[str, object]:
        ep: dict[str, object] = {
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": ready, "serving": ready, "terminating": False},
            "nodeName": "n1",
        }
        if uid:
            ep["targetRef"] = {"kind": "Pod", "name": f"p-{uid}", "namespace": "ns", "uid": uid}
        return ep

    full = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "svc-abc",
            "namespace": "ns",
            "uid": "s1",
            "resourceVersion": "7",
            "labels": {"kubernetes.io/service-name": "svc"},
            "ownerReferences": [{"kind": "Service", "name": "svc", "uid": "x"}],
        },
        "addressType": "IPv4",
        "ports": [{"name": "serve", "port": 8000, "protocol": "TCP"}],
        "endpoints": [endpoint("a", True), endpoint("b", False), endpoint(None, True)],
    }
    transform = projector(ENDPOINTSLICE_FIELDS)
    slim = transform(copy.deepcopy(full))
    assert rsb.count_ready_endpoints([slim]) == rsb.count_ready_endpoints([full]) == 2
    assert slim["metadata"]["labels"] == {"kubernetes.io/service-name": "svc"}
    assert "ports" not in slim
    assert slim["endpoints"][0] == {"conditions": {"ready": True}, "targetRef": {"uid": "a"}}


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str) -> None:
        self.events.append((etype, reason))


def test_a_reconciler_is_built_without_a_manager() -> None:
    recorder = _Recorder()
    rec = RayServiceReconciler(
        None,  # type: ignore[arg-type]  # no call reaches the API server here
        recorder,  # type: ignore[arg-type]
        RayServiceConfig(clock=lambda: NOW + 31),
        lambda *a, **k: None,  # type: ignore[arg-type]
    )
    assert rec.controller is None
    assert rec.rayservices.list() == []
    assert [inf.namespace for inf in rec.rayservices.informers] == [None]
    svc = _initializing("30", NOW)
    assert rec._initializing_timed_out(svc)
    assert (rss.condition(svc, "Ready") or {})["reason"] == "InitializingTimeout"
    assert recorder.events == [("Warning", "RayServiceInitializingTimeout")]
    assert rec._initializing_timed_out(svc), "terminal"
    assert len(recorder.events) == 1, "reported once"


async def test_register_wires_caches_of_the_watched_namespaces() -> None:
    from kuberay.runtime.client import ClientConfig, KubeClient
    from kuberay.runtime.manager import Manager, ManagerOptions

    client = KubeClient(ClientConfig(server="https://127.0.0.1:9"))
    try:
        mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None))
        rec = register(mgr, RayServiceConfig(), ["a", "b"], lambda *a, **k: None)  # type: ignore[arg-type]
        assert rec.controller is not None
        assert rec.controller in mgr.controllers
        for cache in (rec.rayservices, rec.clusters, rec.services, rec.pods, rec.slices):
            assert [inf.namespace for inf in cache.informers] == ["a", "b"]
            assert cache in mgr.caches.values()
    finally:
        await client.close()
