"""Writes the Grafana dashboards in this directory (kuberay-operator.json, raycluster.json).

The JSON files are what you import into Grafana; this script is where they are edited:

    .venv/bin/python deploy/grafana/build_dashboards.py          # rewrite both
    .venv/bin/python deploy/grafana/build_dashboards.py --check  # exit 1 if either is stale

tests/unit/test_dashboards.py fails while a JSON file differs from what this script writes, and
checks that every query parses. Queries use plain PromQL plus the template variables and
``$__rate_interval``, so they can also be run against any Prometheus once those are substituted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"

# The operator's scrape job; the dashboards' $job variable is read from a series only kuberay-py
# exports, so other controller-runtime operators in the same Prometheus are not mixed in.
OP = 'job=~"$job"'
CTRL = 'job=~"$job", controller=~"$controller"'
QUEUE = 'job=~"$job", name=~"$controller"'
# A RayCluster's own series from the operator, and its Ray pods' series (PodMonitor labels).
CLUSTER = 'namespace="$namespace", name="$cluster"'
RAY = 'namespace="$namespace", ray_io_cluster="$cluster"'
HEAD_UP = f'up{{job=~".*ray-head.*", {RAY}}}'
WORKERS_UP = f'up{{job=~".*ray-workers.*", {RAY}}}'


def target(expr: str, legend: str = "", *, ref: str = "A", table: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "refId": ref,
    }
    if table:
        t.update(format="table", instant=True, range=False)
    else:
        t.update(range=True, instant=False)
    return t


def targets(*pairs: tuple[str, str], table: bool = False) -> list[dict[str, Any]]:
    return [
        target(expr, legend, ref=chr(ord("A") + i), table=table)
        for i, (expr, legend) in enumerate(pairs)
    ]


def timeseries(
    title: str,
    description: str,
    tgts: list[dict[str, Any]],
    *,
    unit: str = "short",
    w: int = 12,
    h: int = 8,
    stack: bool = False,
    min_zero: bool = True,
) -> dict[str, Any]:
    custom: dict[str, Any] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    defaults: dict[str, Any] = {"unit": unit, "custom": custom}
    if min_zero:
        defaults["min"] = 0
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": tgts,
    }


def stat(
    title: str,
    description: str,
    tgts: list[dict[str, Any]],
    *,
    unit: str = "short",
    w: int = 4,
    h: int = 4,
    mappings: dict[str, str] | None = None,
    red_below: float | None = None,
    red_above: float | None = None,
) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if red_below is not None:
        steps = [{"color": "red", "value": None}, {"color": "green", "value": red_below}]
    elif red_above is not None:
        steps.append({"color": "red", "value": red_above})
    defaults: dict[str, Any] = {
        "unit": unit,
        "thresholds": {"mode": "absolute", "steps": steps},
        "color": {"mode": "thresholds"},
    }
    if mappings:
        defaults["mappings"] = [
            {"type": "value", "options": {k: {"text": v, "index": i}}}
            for i, (k, v) in enumerate(mappings.items())
        ]
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "textMode": "auto",
        },
        "targets": tgts,
    }


def table(
    title: str, description: str, tgts: list[dict[str, Any]], *, unit: str = "short", w: int = 12
) -> dict[str, Any]:
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"w": w, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
        "transformations": [
            {"id": "organize", "options": {"excludeByName": {"Time": True}}},
        ],
        "targets": tgts,
    }


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"w": 24, "h": 1}}


def layout(panels: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Numbers the panels and places them left to right, wrapping at Grafana's 24 columns."""
    out = []
    x = y = row_h = 0
    for pid, panel in enumerate(panels, start=1):
        w, h = panel["gridPos"]["w"], panel["gridPos"]["h"]
        if panel["type"] == "row" or x + w > 24:
            y += row_h
            x = row_h = 0
        panel = {"id": pid, **panel, "gridPos": {"h": h, "w": w, "x": x, "y": y}}
        if panel["type"] == "row":
            panel["panels"] = []
            y += h
        else:
            x += w
            row_h = max(row_h, h)
        out.append(panel)
    return out


def datasource_var() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }


def query_var(name: str, label: str, query: str, *, multi: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "current": {},
        "hide": 0,
        "includeAll": multi,
        "multi": multi,
        "options": [],
        "refresh": 2,
        "regex": "",
        "sort": 1,
    }


def dashboard(
    uid: str, title: str, description: str, variables: list[dict[str, Any]], panels: list[Any]
) -> dict[str, Any]:
    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [
            {
                "asDropdown": False,
                "icon": "external link",
                "includeVars": False,
                "keepTime": True,
                "tags": ["kuberay"],
                "targetBlank": False,
                "title": "KubeRay dashboards",
                "type": "dashboards",
            }
        ],
        "panels": layout(panels),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["kuberay", "ray"],
        "templating": {"list": [datasource_var(), *variables]},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


# ------------------------------------------------------------------------------ the operator


def _quantiles(metric: str, by: str, selector: str) -> list[dict[str, Any]]:
    return targets(
        *(
            (
                f"histogram_quantile({q}, sum by ({by}, le) "
                f"(rate({metric}_bucket{{{selector}}}[{RATE}])))",
                f"p{int(q * 100)} {{{{{by}}}}}",
            )
            for q in (0.5, 0.99)
        )
    )


def _count_by(metric: str, label: str, selector: str = OP) -> str:
    """Objects per value of ``label``; the inner max folds the copies several replicas export."""
    return f"count by ({label}) (max by (namespace, name, {label}) ({metric}{{{selector}}}))"


def operator_dashboard() -> dict[str, Any]:
    panels = [
        row("Operator"),
        stat(
            "Operator targets up",
            "Operator pods whose /metrics answered the last scrape.",
            targets((f"sum(up{{{OP}}})", "up")),
            red_below=1,
        ),
        stat(
            "Leader",
            "Replicas holding the leader lease, per lease. Exactly 1 is healthy; the series is "
            "absent when leader election is off.",
            targets((f"sum by (name) (leader_election_master_status{{{OP}}})", "{{name}}")),
            red_below=1,
        ),
        stat(
            "Uptime",
            "Time since the operator process started (per pod).",
            targets((f"time() - process_start_time_seconds{{{OP}}}", "{{instance}}")),
            unit="s",
        ),
        stat(
            "RayClusters",
            "RayClusters in the operator's cache.",
            targets((f"count(count by (namespace, name) (kuberay_cluster_info{{{OP}}}))", "")),
        ),
        stat(
            "RayJobs",
            "RayJobs in the operator's cache.",
            targets((f"count(count by (namespace, name) (kuberay_job_info{{{OP}}}))", "")),
        ),
        stat(
            "RayServices",
            "RayServices in the operator's cache.",
            targets((f"count(count by (namespace, name) (kuberay_service_info{{{OP}}}))", "")),
        ),
        row("Reconciles"),
        timeseries(
            "Reconciles by controller and result",
            "Reconciliations per second, by controller and result (success, requeue, "
            "requeue_after, error).",
            targets(
                (
                    f"sum by (controller, result) "
                    f"(rate(controller_runtime_reconcile_total{{{CTRL}}}[{RATE}]))",
                    "{{controller}} {{result}}",
                )
            ),
            unit="ops",
        ),
        timeseries(
            "Reconcile errors and panics",
            "Reconciles that returned an error, that ended in an error not worth retrying "
            "(terminal), and that raised an unexpected exception (panics: bugs).",
            targets(
                (
                    f"sum by (controller) "
                    f"(rate(controller_runtime_reconcile_errors_total{{{CTRL}}}[{RATE}]))",
                    "{{controller}} errors",
                ),
                (
                    f"sum by (controller) "
                    f"(rate(controller_runtime_terminal_reconcile_errors_total{{{CTRL}}}[{RATE}]))",
                    "{{controller}} terminal",
                ),
                (
                    f"sum by (controller) "
                    f"(rate(controller_runtime_reconcile_panics_total{{{CTRL}}}[{RATE}]))",
                    "{{controller}} panics",
                ),
            ),
            unit="ops",
        ),
        timeseries(
            "Reconcile latency p50 / p99",
            "Time per reconciliation, by controller.",
            _quantiles("controller_runtime_reconcile_time_seconds", "controller", CTRL),
            unit="s",
        ),
        timeseries(
            "Busy workers",
            "Workers reconciling right now, against the most each controller may run.",
            targets(
                (
                    f"sum by (controller) (controller_runtime_active_workers{{{CTRL}}})",
                    "{{controller}} active",
                ),
                (
                    f"max by (controller) (controller_runtime_max_concurrent_reconciles{{{CTRL}}})",
                    "{{controller}} max",
                ),
            ),
        ),
        row("Work queues"),
        timeseries(
            "Queue depth",
            "Objects waiting for a worker, per controller queue.",
            targets((f"sum by (name) (workqueue_depth{{{QUEUE}}})", "{{name}}")),
            w=8,
        ),
        timeseries(
            "Queue wait p99",
            "How long an object waits in the queue before a worker takes it.",
            targets(
                (
                    f"histogram_quantile(0.99, sum by (name, le) "
                    f"(rate(workqueue_queue_duration_seconds_bucket{{{QUEUE}}}[{RATE}])))",
                    "{{name}}",
                )
            ),
            unit="s",
            w=8,
        ),
        timeseries(
            "Work duration p99",
            "How long a worker spends on one object, queue to done.",
            targets(
                (
                    f"histogram_quantile(0.99, sum by (name, le) "
                    f"(rate(workqueue_work_duration_seconds_bucket{{{QUEUE}}}[{RATE}])))",
                    "{{name}}",
                )
            ),
            unit="s",
            w=8,
        ),
        timeseries(
            "Unfinished work / longest running",
            "Seconds of work in progress summed over items, and the age of the oldest item "
            "still being processed. A line that only grows is a stuck reconcile.",
            targets(
                (
                    f"max by (name) (workqueue_unfinished_work_seconds{{{QUEUE}}})",
                    "{{name}} unfinished",
                ),
                (
                    f"max by (name) (workqueue_longest_running_processor_seconds{{{QUEUE}}})",
                    "{{name}} longest",
                ),
            ),
            unit="s",
        ),
        timeseries(
            "Queue adds and retries",
            "Objects added to each queue per second, and rate-limited re-adds (retries).",
            targets(
                (
                    f"sum by (name) (rate(workqueue_adds_total{{{QUEUE}}}[{RATE}]))",
                    "{{name}} adds",
                ),
                (
                    f"sum by (name) (rate(workqueue_retries_total{{{QUEUE}}}[{RATE}]))",
                    "{{name}} retries",
                ),
            ),
            unit="ops",
        ),
        row("Kubernetes API"),
        timeseries(
            "API requests by verb and code",
            "Requests the operator sends to the apiserver; code 0 is a transport failure.",
            targets(
                (
                    f"sum by (method, code) (rate(rest_client_requests_total{{{OP}}}[{RATE}]))",
                    "{{method}} {{code}}",
                )
            ),
            unit="reqps",
        ),
        timeseries(
            "API request latency p99",
            "Apiserver round trip, by verb.",
            targets(
                (
                    f"histogram_quantile(0.99, sum by (verb, le) "
                    f"(rate(rest_client_request_duration_seconds_bucket{{{OP}}}[{RATE}])))",
                    "{{verb}}",
                )
            ),
            unit="s",
        ),
        timeseries(
            "API requests by resource",
            "Requests per resource (with subresource) and verb.",
            targets(
                (
                    f"sum by (resource, method) "
                    f"(rate(kuberay_rest_client_requests_by_resource_total{{{OP}}}[{RATE}]))",
                    "{{method}} {{resource}}",
                )
            ),
            unit="reqps",
        ),
        timeseries(
            "API errors by resource",
            "Requests that did not end in a 2xx answer, by resource and code (409 conflicts "
            "and 404s on deletion are normal in small numbers).",
            targets(
                (
                    f"sum by (resource, code) (rate(kuberay_rest_client_requests_by_resource_total"
                    f'{{{OP}, code!~"2.."}}[{RATE}]))',
                    "{{resource}} {{code}}",
                )
            ),
            unit="reqps",
        ),
        timeseries(
            "Informer cache objects",
            "Objects held in the operator's watch caches, per resource.",
            targets(
                (f"max by (resource) (kuberay_informer_objects{{{OP}}})", "{{resource}}"),
            ),
        ),
        timeseries(
            "Watch events",
            "Watch events applied to the caches, per resource and type.",
            targets(
                (
                    f"sum by (resource, type) "
                    f"(rate(kuberay_informer_events_total{{{OP}}}[{RATE}]))",
                    "{{resource}} {{type}}",
                )
            ),
            unit="ops",
        ),
        row("Ray resources"),
        timeseries(
            "RayClusters by provisioned condition",
            "RayClusters whose RayClusterProvisioned condition is true (all pods were ready "
            "once) or false.",
            targets(
                (_count_by("kuberay_cluster_condition_provisioned", "condition"), "{{condition}}")
            ),
            w=8,
            stack=True,
        ),
        timeseries(
            "RayJobs by deployment status",
            "RayJobs per jobDeploymentStatus (empty: not yet initialised).",
            targets(
                (
                    _count_by("kuberay_job_deployment_status", "deployment_status"),
                    "{{deployment_status}}",
                )
            ),
            w=8,
            stack=True,
        ),
        timeseries(
            "RayServices ready / upgrading",
            "RayServices by Ready condition, and those in a zero-downtime upgrade.",
            targets(
                (_count_by("kuberay_service_condition_ready", "condition"), "ready={{condition}}"),
                (
                    _count_by(
                        "kuberay_service_condition_upgrade_in_progress",
                        "condition",
                        f'{OP}, condition="true"',
                    ),
                    "upgrading",
                ),
            ),
            w=8,
        ),
        timeseries(
            "RayClusters by origin",
            "RayClusters created directly (None) or for a RayJob or RayService.",
            targets((_count_by("kuberay_cluster_info", "owner_kind"), "{{owner_kind}}")),
            w=8,
            stack=True,
        ),
        timeseries(
            "Cluster provisioning duration",
            "Creation to first provisioned, over the RayClusters that exist now: median, 90th "
            "percentile and slowest.",
            targets(
                *(
                    (
                        f"{agg}max by (namespace, name) "
                        f"(kuberay_cluster_provisioned_duration_seconds{{{OP}}}))",
                        legend,
                    )
                    for agg, legend in (
                        ("quantile(0.5, ", "median"),
                        ("quantile(0.9, ", "p90"),
                        ("max(", "slowest"),
                    )
                )
            ),
            unit="s",
            w=8,
        ),
        table(
            "Slowest to provision",
            "The ten RayClusters that took longest from creation to provisioned.",
            targets(
                (
                    f"topk(10, max by (namespace, name) "
                    f"(kuberay_cluster_provisioned_duration_seconds{{{OP}}}))",
                    "",
                ),
                table=True,
            ),
            unit="s",
            w=8,
        ),
        table(
            "RayClusters not provisioned",
            "RayClusters whose RayClusterProvisioned condition is false.",
            targets(
                (
                    f"max by (namespace, name, uid) (kuberay_cluster_condition_provisioned"
                    f'{{{OP}, condition="false"}})',
                    "",
                ),
                table=True,
            ),
            w=8,
        ),
        table(
            "RayJobs failed",
            "RayJobs whose jobDeploymentStatus is Failed or ValidationFailed.",
            targets(
                (
                    f"max by (namespace, name, deployment_status) (kuberay_job_deployment_status"
                    f'{{{OP}, deployment_status=~"Failed|ValidationFailed"}})',
                    "",
                ),
                table=True,
            ),
            w=8,
        ),
        table(
            "RayServices not ready",
            "RayServices whose Ready condition is false (no serve endpoints).",
            targets(
                (
                    f"max by (namespace, name) (kuberay_service_condition_ready"
                    f'{{{OP}, condition="false"}})',
                    "",
                ),
                table=True,
            ),
            w=8,
        ),
        table(
            "RayJob attempt durations",
            "How long each ended RayJob attempt ran, by outcome (kept in memory by the "
            "operator: empty after it restarts).",
            targets(
                (
                    f"max by (namespace, name, job_deployment_status, retry_count) "
                    f"(kuberay_job_execution_duration_seconds{{{OP}}})",
                    "",
                ),
                table=True,
            ),
            unit="s",
            w=8,
        ),
        row("Process"),
        timeseries(
            "Operator CPU",
            "CPU time used by each operator process (100% = one core busy).",
            targets(
                (f"rate(process_cpu_seconds_total{{{OP}}}[{RATE}])", "{{instance}}"),
            ),
            unit="percentunit",
            w=8,
        ),
        timeseries(
            "Operator memory",
            "Resident memory of each operator process.",
            targets((f"process_resident_memory_bytes{{{OP}}}", "{{instance}}")),
            unit="bytes",
            w=8,
        ),
        timeseries(
            "Open file descriptors",
            "Open file descriptors (sockets included) of each operator process.",
            targets((f"process_open_fds{{{OP}}}", "{{instance}}")),
            w=8,
        ),
    ]
    variables = [
        query_var("job", "Operator job", "label_values(kuberay_informer_objects, job)", multi=True),
        query_var(
            "controller",
            "Controller",
            'label_values(controller_runtime_reconcile_total{job=~"$job"}, controller)',
            multi=True,
        ),
    ]
    return dashboard(
        "kuberay-py-operator",
        "KubeRay operator",
        "kuberay-py: reconciles, work queues, apiserver traffic, leader election, the state "
        "of RayClusters, RayJobs and RayServices, and the operator process.",
        variables,
        panels,
    )


# ------------------------------------------------------------------------- one RayCluster


def raycluster_dashboard() -> dict[str, Any]:
    panels = [
        row("RayCluster"),
        stat(
            "Provisioned",
            "RayClusterProvisioned: every pod of the cluster has been ready at the same time.",
            targets(
                (
                    f"max(kuberay_cluster_condition_provisioned"
                    f'{{{CLUSTER}, condition="true"}}) or on() vector(0)',
                    "",
                )
            ),
            mappings={"0": "No", "1": "Yes"},
            red_below=1,
        ),
        stat(
            "Time to provision",
            "Creation to the first time the cluster was provisioned.",
            targets((f"max(kuberay_cluster_provisioned_duration_seconds{{{CLUSTER}}})", "")),
            unit="s",
        ),
        stat(
            "Head metrics",
            "Whether the head pod's Ray metrics endpoint answered the last scrape.",
            targets((f"max({HEAD_UP})", "")),
            mappings={"0": "Down", "1": "Up"},
            red_below=1,
        ),
        stat(
            "Worker pods answering",
            "Worker pods whose Ray metrics endpoint answered, of those scraped.",
            targets((f"sum({WORKERS_UP})", "answering"), (f"count({WORKERS_UP})", "scraped")),
        ),
        table(
            "Identity",
            "The RayCluster's uid and what created it (None: created directly).",
            targets(
                (
                    f"max by (namespace, name, uid, owner_kind) "
                    f"(kuberay_cluster_info{{{CLUSTER}}})",
                    "",
                ),
                table=True,
            ),
            w=8,
        ),
        row("Ray nodes"),
        timeseries(
            "Ray nodes by type",
            "Ray nodes (pods) reporting node metrics, head and worker.",
            targets(
                (
                    f"count by (RayNodeType) (max by (pod, RayNodeType) "
                    f"(ray_node_cpu_count{{{RAY}}}))",
                    "{{RayNodeType}}",
                )
            ),
            w=8,
        ),
        timeseries(
            "Worker pods scraped / answering",
            "Worker pods Prometheus scrapes (they have an address) and those whose Ray "
            "metrics endpoint answers. A gap means workers that are not available.",
            targets((f"count({WORKERS_UP})", "scraped"), (f"sum({WORKERS_UP})", "answering")),
            w=8,
        ),
        timeseries(
            "Logical CPUs and GPUs",
            "Ray's logical resources: in use and total.",
            targets(
                (
                    f'sum by (Name) (ray_resources{{{RAY}, Name=~"CPU|GPU", State="USED"}})',
                    "{{Name}} used",
                ),
                (f'sum by (Name) (ray_resources{{{RAY}, Name=~"CPU|GPU"}})', "{{Name}} total"),
            ),
            w=8,
        ),
        timeseries(
            "CPU utilization per node",
            "Physical CPU use of each Ray node, in percent of its cores.",
            targets((f"max by (pod) (ray_node_cpu_utilization{{{RAY}}})", "{{pod}}")),
            unit="percent",
        ),
        timeseries(
            "CPU cores",
            "Physical cores of the cluster's Ray nodes.",
            targets((f"sum(ray_node_cpu_count{{{RAY}}})", "cores")),
        ),
        timeseries(
            "Memory",
            "Memory used and installed across the cluster's Ray nodes.",
            targets(
                (f"sum(ray_node_mem_used{{{RAY}}})", "used"),
                (f"sum(ray_node_mem_total{{{RAY}}})", "total"),
            ),
            unit="bytes",
        ),
        timeseries(
            "Memory use per node",
            "Share of each node's memory in use.",
            targets(
                (
                    f"max by (pod) (ray_node_mem_used{{{RAY}}}) / "
                    f"max by (pod) (ray_node_mem_total{{{RAY}}})",
                    "{{pod}}",
                )
            ),
            unit="percentunit",
        ),
        timeseries(
            "Object store memory",
            "Ray object store memory by location (in memory, spilled, ...).",
            targets((f"sum by (Location) (ray_object_store_memory{{{RAY}}})", "{{Location}}")),
            unit="bytes",
            w=8,
        ),
        timeseries(
            "GPUs",
            "GPUs on the cluster's nodes and their mean utilization (0 on a CPU-only cluster, "
            "whose nodes export no GPU series).",
            targets(
                (
                    f"sum(ray_node_gpus_available{{{RAY}}}) "
                    f"or (sum(ray_node_cpu_count{{{RAY}}}) * 0)",
                    "GPUs",
                ),
                (f"avg(ray_node_gpus_utilization{{{RAY}}})", "utilization %"),
            ),
            w=8,
        ),
        timeseries(
            "Disk use per node",
            "Share of each node's disk in use.",
            targets(
                (
                    f"max by (pod) (ray_node_disk_usage{{{RAY}}}) / (max by (pod) "
                    f"(ray_node_disk_usage{{{RAY}}}) + max by (pod) (ray_node_disk_free{{{RAY}}}))",
                    "{{pod}}",
                )
            ),
            unit="percentunit",
            w=8,
        ),
        timeseries(
            "Network",
            "Bytes per second received and sent by the cluster's nodes.",
            targets(
                (f"sum(ray_node_network_receive_speed{{{RAY}}})", "received"),
                (f"sum(ray_node_network_send_speed{{{RAY}}})", "sent"),
            ),
            unit="Bps",
        ),
        timeseries(
            "Tasks and actors",
            "Ray tasks and actors by state.",
            targets(
                (f"clamp_min(sum by (State) (ray_tasks{{{RAY}}}), 0)", "tasks {{State}}"),
                (f'sum by (State) (ray_actors{{{RAY}, Source="gcs"}})', "actors {{State}}"),
            ),
        ),
        row("GCS"),
        timeseries(
            "GCS storage latency p50 / p99",
            "Latency of the GCS's table storage operations (in memory or Redis).",
            _quantiles("ray_gcs_storage_operation_latency_ms", "Operation", RAY),
            unit="ms",
        ),
        timeseries(
            "GCS storage operations",
            "GCS table storage operations per second.",
            targets(
                (
                    f"sum by (Operation) "
                    f"(rate(ray_gcs_storage_operation_latency_ms_count{{{RAY}}}[{RATE}]))",
                    "{{Operation}}",
                )
            ),
            unit="ops",
        ),
        timeseries(
            "GCS series exported",
            "ray_gcs_* series the head exports. Zero while the cluster exists is what the "
            "RayHeadNotExportingGCSMetrics alert fires on.",
            targets((f'count({{__name__=~"ray_gcs_.+", {RAY}}}) or on() vector(0)', "series")),
        ),
    ]
    variables = [
        query_var("namespace", "Namespace", "label_values(kuberay_cluster_info, namespace)"),
        query_var(
            "cluster",
            "RayCluster",
            'label_values(kuberay_cluster_info{namespace="$namespace"}, name)',
        ),
    ]
    return dashboard(
        "kuberay-py-raycluster",
        "KubeRay RayCluster",
        "One RayCluster: its conditions from the operator, and its Ray nodes, resources and "
        "GCS from Ray's own metrics (scraped with the PodMonitors in deploy/prometheus).",
        variables,
        panels,
    )


DASHBOARDS = {
    "kuberay-operator.json": operator_dashboard,
    "raycluster.json": raycluster_dashboard,
}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2) + "\n"


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for name in DASHBOARDS:
        text = render(name)
        path = HERE / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)}; run {Path(__file__).name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
