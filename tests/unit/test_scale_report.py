"""The scale benchmark's operator comparison (tests/bench/scale_report.py): operator specs and
run order, audit-log parsing into per-operator request figures, medians, and the table."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from scale_report import (
    OPERATORS_NAMESPACE,
    AuditLog,
    OperatorConfig,
    audit_figures,
    audit_policy,
    comparison_markdown,
    cpu_budget,
    kwok_play,
    median_result,
    parse_audit,
    parse_operators,
    percentile,
    pod_timeline,
    run_order,
    status_lag,
    terminated_by_resource,
)

GO = f"system:serviceaccount:{OPERATORS_NAMESPACE}:op-go"
OURS = f"system:serviceaccount:{OPERATORS_NAMESPACE}:op-ours"


def event(
    verb: str,
    resource: str | None,
    code: int,
    user: str = GO,
    subresource: str | None = None,
    stage: str = "ResponseComplete",
) -> str:
    ev: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "stage": stage,
        "verb": verb,
        "user": {"username": user, "groups": [f"system:serviceaccounts:{OPERATORS_NAMESPACE}"]},
        "responseStatus": {"metadata": {}, "code": code},
        "requestURI": "/x",
    }
    if resource is not None:
        ev["objectRef"] = {"resource": resource, "namespace": "bench-2x2", "apiVersion": "v1"}
        if subresource:
            ev["objectRef"]["subresource"] = subresource
    return json.dumps(ev)


def test_parse_operators_defaults_and_labels() -> None:
    configs = parse_operators("ours,go,go:10", ours_concurrency=8)
    assert configs == [
        OperatorConfig("ours", 8, "ours"),
        OperatorConfig("go", 1, "go"),
        OperatorConfig("go", 10, "go:10"),
    ]
    assert configs[2].account == "op-go-10"
    assert configs[2].username == f"system:serviceaccount:{OPERATORS_NAMESPACE}:op-go-10"
    assert parse_operators("ours:3", 8) == [OperatorConfig("ours", 3, "ours:3")]


@pytest.mark.parametrize("spec", ["", "rust", "go:0", "go:x", "go,go", "ours,,ours"])
def test_parse_operators_rejects(spec: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies by mistake
        parse_operators(spec, 8)


def test_run_order_interleaves() -> None:
    a, b = parse_operators("ours,go", 8)
    assert run_order([a, b], 2) == [(0, a), (0, b), (1, a), (1, b)]


def test_policy_logs_only_the_operators_accounts_on_completion() -> None:
    policy = audit_policy()
    assert policy["rules"][-1] == {"level": "None"}
    assert policy["rules"][0]["userGroups"] == [f"system:serviceaccounts:{OPERATORS_NAMESPACE}"]
    assert "ResponseComplete" not in policy["omitStages"]


def test_parse_audit_counts_one_user_by_verb_resource_code() -> None:
    lines = [
        event("create", "pods", 201),
        event("create", "pods", 201),
        event("create", "pods", 201, user=OURS),  # another operator's request
        event("update", "rayclusters", 200, subresource="status"),
        event("update", "rayclusters", 409, subresource="status"),
        event("patch", "rayclusters", 200, subresource="status"),
        event("list", "pods", 200),
        event("watch", "pods", 200),
        event("get", None, 200),  # discovery: no object
        event("create", "pods", 201, stage="ResponseStarted"),
        '{"kind": "Event", "verb": "crea',  # torn last write
        "",
    ]
    counts = parse_audit(lines, GO)
    assert counts == Counter(
        {
            ("create", "pods", 201): 2,
            ("update", "rayclusters/status", 200): 1,
            ("update", "rayclusters/status", 409): 1,
            ("patch", "rayclusters/status", 200): 1,
            ("list", "pods", 200): 1,
            ("watch", "pods", 200): 1,
            ("get", "nonresource", 200): 1,
        }
    )
    figures = audit_figures(counts, clusters=2)
    assert figures["requests_per_cluster"] == {
        "create pods": 1.0,
        "get nonresource": 0.5,
        "list pods": 0.5,
        "patch rayclusters/status": 0.5,
        "update rayclusters/status": 1.0,
        "watch pods": 0.5,
    }
    # Watches are counted when they end: left out of the total.
    assert figures["requests_total_per_cluster"] == 3.5
    assert figures["status_writes_per_cluster"] == 1.5
    assert figures["conflicts_409"] == 1
    assert figures["errors_5xx"] == 0


def test_audit_log_windows_by_offset(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert log.offset() == 0
    assert log.lines(0, 100) == []
    log.path.write_text(event("create", "pods", 201) + "\n")
    start = log.offset()
    with open(log.path, "a") as f:
        f.write(event("delete", "pods", 200) + "\n" + event("get", "pods", 200)[:20])
    end = log.offset()  # the half-written line is not in this window
    got = parse_audit(log.lines(start, end), GO)
    assert got == Counter({("delete", "pods", 200): 1})


def size(rate: float, cpu: float, audit: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "clusters": 20,
        "workers": 2,
        "pods_ready_per_s": rate,
        "all_pods_ready_s": 1.0,
        "all_ready_s": 1.0,
        "operator_cpu_s": cpu,
        "operator_peak_rss_mib": 100.0,
        "rss_per_pod_kib": 10.0,
        "reconciles_per_cluster": 3.0,
        "audit": audit
        or {
            "requests_per_cluster": {"create pods": 3.0},
            "requests_total_per_cluster": 5.0,
            "status_writes_per_cluster": 1.0,
            "conflicts_409": 0,
        },
    }


def test_median_result_per_figure_and_missing_counts_as_zero() -> None:
    runs = [
        {"run": 0, "operator_idle_rss_mib": 50.0, "sizes": [size(10.0, 1.0)]},
        {"run": 1, "operator_idle_rss_mib": 70.0, "sizes": [size(30.0, 3.0)]},
        {
            "run": 2,
            "operator_idle_rss_mib": 60.0,
            "sizes": [
                size(
                    20.0,
                    2.0,
                    {
                        "requests_per_cluster": {"create pods": 3.0, "get pods": 3.0},
                        "requests_total_per_cluster": 8.0,
                        "status_writes_per_cluster": 2.0,
                        "conflicts_409": 4,
                    },
                )
            ],
        },
        {"run": 3, "error": "TimeoutError()"},
    ]
    med = median_result(runs)
    assert med["runs_finished"] == 3
    assert "run" not in med
    assert med["operator_idle_rss_mib"] == 60.0
    s = med["sizes"][0]
    assert (s["pods_ready_per_s"], s["operator_cpu_s"], s["clusters"]) == (20.0, 2.0, 20)
    assert s["audit"]["requests_per_cluster"] == {"create pods": 3.0, "get pods": 0}
    assert s["audit"]["conflicts_409"] == 0
    assert median_result([{"run": 0, "error": "boom"}]) == {"error": "boom"}


def test_comparison_table_columns_and_ratio_against_best_go() -> None:
    configs = parse_operators("ours,go,go:10", 8)
    medians = {
        "ours": {"operator_idle_rss_mib": 80.0, "sizes": [size(40.0, 4.0)]},
        "go": {"operator_idle_rss_mib": 40.0, "sizes": [size(10.0, 1.0)]},
        "go:10": {"operator_idle_rss_mib": 40.0, "sizes": [size(20.0, 2.0)]},
    }
    table = comparison_markdown(configs, medians, runs=3)
    lines = table.splitlines()
    assert "Median of 3 run(s)" in lines[0]
    assert "| figure | ours | go | go:10 | ours ÷ best Go |" in lines
    assert "| 20x2: best Go config (by pods Ready/s) | | | | go:10 |" in lines
    # Ratios are ours over go:10 (the faster Go config), not over go.
    assert "| 20x2: pods Ready per second | 40 | 10 | 20 | 2.00 |" in lines
    assert "| 20x2: operator CPU, s | 4 | 1 | 2 | 2.00 |" in lines
    assert "| 20x2: status writes per cluster (audit) | 1 | 1 | 1 | 1.00 |" in lines
    assert "| 20x2:   create pods per cluster | 3 | 3 | 3 | 1.00 |" in lines
    assert "| 20x2: 409 conflicts (audit) | 0 | 0 | 0 | - |" in lines  # 0/0
    # Every row has as many cells as the header.
    width = lines[2].count("|")
    assert all(line.count("|") == width for line in lines if line.startswith("| "))


def test_comparison_table_marks_a_failed_config() -> None:
    configs = parse_operators("ours,go", 8)
    medians: dict[str, dict[str, Any]] = {
        "ours": {"operator_idle_rss_mib": 80.0, "sizes": [size(40.0, 4.0)]},
        "go": {"error": "TimeoutError('clusters in bench-20x2 not converged after 600s')"},
    }
    table = comparison_markdown(configs, medians, runs=1, ceiling={"ceiling_pods_per_second": 90})
    assert "| ceiling (no operator), pods/s | 90 | | |" in table
    assert "| 20x2: pods Ready per second | 40 | - | - |" in table
    assert "- go: TimeoutError(" in table


def test_audit_log_offset_of_a_large_log_is_its_end(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    line = event("create", "pods", 201) + "\n"
    log.path.write_text(line * 500)  # well past the tail that offset() reads
    assert log.offset() == len(line) * 500
    assert parse_audit(log.lines(len(line) * 10, log.offset()), GO) == Counter(
        {("create", "pods", 201): 490}
    )


def test_comparison_table_leaves_out_figures_no_config_has() -> None:
    configs = parse_operators("ours,go", 8)
    with_ceiling = {**size(40.0, 4.0), "fraction_of_ceiling": 0.8}
    medians: dict[str, dict[str, Any]] = {
        "ours": {"sizes": [with_ceiling]},
        "go": {"sizes": [{**size(20.0, 2.0), "fraction_of_ceiling": 0.4}]},
    }
    assert "| 20x2: pods Ready per second / ceiling | 0.8 | 0.4 | 2.00 |" in (
        comparison_markdown(configs, medians, runs=1)
    )
    medians = {"ours": {"sizes": [size(40.0, 4.0)]}, "go": {"sizes": [size(20.0, 2.0)]}}
    assert "/ ceiling" not in comparison_markdown(configs, medians, runs=1)


def test_comparison_table_shows_the_resync_phase_when_measured() -> None:
    configs = parse_operators("ours,go", 8)
    resync = {"window_s": 60, "operator_cpu_share": 0.05, "cpu_ms_per_reconcile": 3.0}
    medians: dict[str, dict[str, Any]] = {
        "ours": {"sizes": [{**size(40.0, 4.0), "resync": resync}]},
        "go": {"sizes": [{**size(20.0, 2.0), "resync": {**resync, "cpu_ms_per_reconcile": 6.0}}]},
    }
    table = comparison_markdown(configs, medians, runs=1)
    assert "| 20x2: resync: CPU ms per reconcile | 3 | 6 | 0.50 |" in table
    assert "| 20x2: resync: operator CPU share of one core | 0.05 | 0.05 | 1.00 |" in table
    no_resync = {"ours": {"sizes": [size(40.0, 4.0)]}, "go": {"sizes": [size(20.0, 2.0)]}}
    assert "resync" not in comparison_markdown(configs, no_resync, runs=1)


def test_fairness_only_run_compares_against_its_one_go_config() -> None:
    fairness = {"busy_p99_s": 1.0, "p99_penalty_s": 0.2, "busy_status_writes": 25}
    medians: dict[str, dict[str, Any]] = {
        "ours": {"fairness": fairness},
        "go:10": {"fairness": {**fairness, "p99_penalty_s": 0.4, "busy_status_writes": 50}},
    }
    table = comparison_markdown(parse_operators("ours,go:10", 8), medians, runs=3)
    assert "| fairness: p99 penalty (during minus idle), s | 0.2 | 0.4 | 0.50 |" in table
    assert "| fairness: status writes during the scale-up | 25 | 50 | 0.50 |" in table
    # With two Go configs and no size to pick the faster one by, there is no baseline.
    medians["go"] = {"fairness": fairness}
    table = comparison_markdown(parse_operators("ours,go,go:10", 8), medians, runs=3)
    assert "| fairness: p99 penalty (during minus idle), s | 0.2 | 0.2 | 0.4 | - |" in table


def test_pod_timeline_rates_lags_and_backlog() -> None:
    # Ten pods seen in the first 5 s window, two in the second, one in the last (partial) one.
    created = {f"p{i}": 0.5 * i for i in range(10)} | {"q0": 5.0, "q1": 6.0, "r0": 10.5}
    bound = {k: t + 1.0 for k, t in created.items()}
    ready = {k: t + 3.0 for k, t in created.items()}
    ready["r0"] = 30.5  # one pod waits 20 s after binding
    t = pod_timeline(created, bound, ready, window=5.0)
    assert t["create_rate_per_s_max"] == 2.0  # 10 pods in 5 s; the partial window is left out
    assert t["create_rate_per_s_median"] == 1.2  # median of 2.0 and 0.4 pods/s
    assert t["ready_lag_s_p50"] == 3.0
    assert t["ready_lag_s_p99"] == 20.0
    assert t["bound_to_ready_s_p50"] == 2.0
    assert t["bound_to_ready_s_p99"] == 19.0
    # Bound at 1.0, 1.5, ..., each Ready 2 s later: at most four overlap (binds at t..t+1.5).
    assert t["bound_not_ready_peak"] == 4


def test_pod_timeline_of_pods_never_bound_or_ready() -> None:
    t = pod_timeline({"a": 1.0}, {}, {})
    assert t["bound_not_ready_peak"] == 0
    assert t["ready_lag_s_p99"] == 0.0
    assert t["create_rate_per_s_max"] == 0.2
    assert pod_timeline({}, {}, {})["ready_lag_s_p50"] == 0.0


def test_status_lag_counts_from_each_clusters_last_ready_pod() -> None:
    pod_ready = {"a-head": 1.0, "a-w1": 4.0, "b-head": 2.0, "b-w1": 3.0, "stray": 9.0}
    owners = {"a-head": "a", "a-w1": "a", "b-head": "b", "b-w1": "b"}
    # a: last pod at 4.0, ready at 10.0; b: status seen before its last pod (0, not -0.5);
    # c: no Ready pod seen, left out.
    lag = status_lag({"a": 10.0, "b": 2.5, "c": 1.0}, pod_ready, owners)
    assert lag == {"status_lag_s_p50": 0.0, "status_lag_s_p90": 6.0, "status_lag_s_max": 6.0}
    lag = status_lag({"a": 10.0, "b": 5.0}, pod_ready, owners)
    assert lag["status_lag_s_p50"] == 2.0
    assert lag["status_lag_s_max"] == 6.0
    assert status_lag({}, {}, {})["status_lag_s_max"] == 0.0


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(101)], 0.99) == 99.0


def test_comparison_table_shows_the_pod_timeline() -> None:
    configs = parse_operators("ours,go:10", 8)
    medians: dict[str, dict[str, Any]] = {
        "ours": {"sizes": [{**size(40.0, 4.0), "timeline": {"ready_lag_s_p99": 12.0}}]},
        "go:10": {"sizes": [{**size(20.0, 2.0), "timeline": {"ready_lag_s_p99": 1.5}}]},
    }
    table = comparison_markdown(configs, medians, runs=1)
    assert "| 20x2:   pod seen -> Ready p99, s | 12 | 1.5 | 8.00 |" in table


def test_cpu_budget_per_pod_by_component_and_busy_share() -> None:
    budget = cpu_budget(10.0, {"kube-apiserver": 30.0, "kwok": 10.0}, 1000, 50.0, 2)
    assert budget["ms_per_pod"] == {"operator": 10.0, "kube-apiserver": 30.0, "kwok": 10.0}
    assert budget["total_ms_per_pod"] == 50.0
    assert budget["busy_share"] == 0.5  # 50 CPU-s over 2 cores x 50 s


def test_cpu_budget_of_an_empty_run_divides_by_nothing() -> None:
    budget = cpu_budget(0.0, {}, 0, 0.0, 2)
    assert budget == {"ms_per_pod": {}, "total_ms_per_pod": 0.0, "busy_share": 0.0}


def test_comparison_table_shows_cpu_per_pod_and_the_speed_probe() -> None:
    configs = parse_operators("ours,go:10", 8)
    ours = cpu_budget(20.0, {"kube-apiserver": 60.0}, 1000, 100.0, 2)
    go = cpu_budget(40.0, {"kube-apiserver": 60.0}, 1000, 100.0, 2)
    medians: dict[str, dict[str, Any]] = {
        "ours": {"sizes": [{**size(40.0, 4.0), "cpu_budget": ours, "speed_probe_s": 0.14}]},
        "go:10": {"sizes": [{**size(20.0, 2.0), "cpu_budget": go, "speed_probe_s": 0.15}]},
    }
    table = comparison_markdown(configs, medians, runs=1)
    assert "| 20x2: machine CPU per pod, ms (operator + plane) | 80 | 100 | 0.80 |" in table
    assert "| 20x2:   operator, ms per pod | 20 | 40 | 0.50 |" in table
    assert "| 20x2:   kube-apiserver, ms per pod | 60 | 60 | 1.00 |" in table
    assert "speed probe, s (fixed loop; higher = slower machine) | 0.14 | 0.15 |" in table


def test_kwok_play_counts_patches_twice_patched_pods_and_failures() -> None:
    def patch(pod: str) -> bytes:
        return json.dumps({"level": "INFO", "msg": "Patch pod", "pod": f"ns/{pod}"}).encode()

    failed = json.dumps({"level": "ERROR", "msg": "failed to apply stage", "pod": "ns/b"})
    lines: list[bytes | str] = [
        patch("a"),
        patch("b"),
        patch("b"),
        failed,
        b'{"msg":"Syncing lease"}',
    ]
    assert kwok_play(lines, 2) == {
        "patches_per_pod": 1.5,
        "pods_patched_twice": 1,
        "failed_stages": 1,
    }
    empty = kwok_play([b'{"msg":"Patch pod","pod":"ns/cut', b""], 0)
    assert empty == {"patches_per_pod": 0.0, "pods_patched_twice": 0, "failed_stages": 0}


def test_comparison_table_shows_kwok_replays_and_closed_watchers() -> None:
    configs = parse_operators("ours,go:10", 8)
    play = {"patches_per_pod": 1.0, "pods_patched_twice": 0, "failed_stages": 2}
    medians: dict[str, dict[str, Any]] = {
        "ours": {"sizes": [{**size(40.0, 4.0), "kwok": play, "watchers_terminated": 0}]},
        "go:10": {"sizes": [{**size(20.0, 2.0), "kwok": play, "watchers_terminated": 3}]},
    }
    medians["go:10"]["sizes"][0]["watchers_terminated_by_resource"] = {"pods": 2, "leases": 1}
    table = comparison_markdown(configs, medians, runs=1)
    assert "| 20x2: KWOK: status patches per pod | 1 | 1 | 1.00 |" in table
    assert "| 20x2: apiserver: watchers closed as too slow | 0 | 3 |" in table
    # Broken down by resource; a run that closed none of a kind shows 0, not a gap.
    assert "| 20x2:   of them, pods | 0 | 2 |" in table
    assert "| 20x2:   of them, leases | 0 | 1 |" in table


def test_terminated_by_resource_keeps_only_closed_watchers() -> None:
    server = {
        ("TERMINATED", "pods"): 4.0,
        ("TERMINATED", "leases"): 0.0,
        ("TERMINATED", ""): 1.0,
        ("GET", "pods"): 90.0,
    }
    assert terminated_by_resource(server) == {"-": 1, "pods": 4}
    assert terminated_by_resource({}) == {}


def test_median_of_an_even_count_of_equal_integers_stays_an_integer() -> None:
    assert median_result([{"clusters": 1000}, {"clusters": 1000}])["clusters"] == 1000
    assert median_result([{"x": 1}, {"x": 2}])["x"] == 1.5
