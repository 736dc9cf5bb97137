"""Scale benchmark on KWOK: ceiling, throughput by size, memory per pod, fairness and churn.

    .venv/bin/python tests/bench/scale.py                      # defaults sized for 2 cores
    .venv/bin/python tests/bench/scale.py --sizes 1000x10 --nodes 100 --timeout 3600
    .venv/bin/python tests/bench/scale.py --kubeconfig ~/.kube/config --no-ceiling
        # against an existing cluster with KWOK nodes and the CRDs installed; the operator is
        # started here (it must be the only one reconciling ray.io objects there)
    .venv/bin/python tests/bench/scale.py --sizes 100x10 --operators ours,go,go:10 --runs 3
        # this operator against the upstream Go operator (v1.6.1, built from its Go module on
        # first use) at its default concurrency (1) and at 10, in one run, one table

Operators (--operators NAME[:CONCURRENCY],...; default ``ours``): ``ours`` (concurrency
--concurrency unless given) and ``go`` (default 1, upstream's). Each config runs alone on a
plane of its own (started, every phase from 2 on, stopped), as does each ceiling: a plane that
has just deleted thousands of pods is measurably slower, which on one shared plane
(--shared-plane) favoured whatever ran first, the ceiling. The configs take turns
--runs times (ours, go, go:10, ours, go, ...); the table shows the median per figure, one column
per config and ``ours / best Go`` (the Go config with the higher pods Ready/s). Both get the
same client limits (--qps 1000 --burst 2000). On this benchmark's own plane each operator runs
as a ServiceAccount of ``bench-operators`` (cluster-admin, a TokenRequest token), and the
apiserver's audit log (Metadata level, those accounts only) gives the comparable request
figures for both: requests per cluster by verb and resource, status writes, 409s. Ours also
reports its own request metrics; reconciles per cluster come from both operators'
controller_runtime_reconcile_total{controller="raycluster"}. With --kubeconfig there is no
audit log. With one config the output keeps its single-operator shape.

Phases (each bounded by --timeout):
 1. ceiling: pods/s that a plain parallel client (64 in flight) gets created and Running+Ready
    with no operator, using the same pods the operator makes for the last size (its builders'
    output, as many pods): pod size and shape cost the apiserver, scheduler and KWOK; then
    again with each cluster's head Service in place (Services make the endpoint controllers
    and the scheduler do work per pod event, whoever creates the pods);
 2. sizes: N RayClusters x M workers each, from creation to every pod existing and every
    cluster `ready`; pods/s as a fraction of the ceiling; operator CPU, peak and steady RSS and
    RSS per managed pod above idle; the operator's API requests per cluster by verb and
    resource, 409 conflicts and status writes per cluster (from the audit log, and for ours
    from its own request metrics too), and every client's requests per cluster as the
    apiserver's metrics count them; CPU seconds of each control-plane component (where the
    time goes); --namespaces K spreads each size's clusters over K namespaces;
 3. fairness: time-to-ready of small clusters (p50/p99) while one cluster scales 0 -> W
    workers, against the same figure on an idle operator;
 4. churn: waves of scale-up, scale-down, delete+recreate; convergence time and duplicate or
    orphaned pods (must be zero).
Writes bench-results/scale.json and prints a Markdown table. The same inputs give comparable
output; numbers on a shared 2-core machine vary by +-20 % between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from plane_ceiling import ceiling, list_retrying
from scale_report import (
    OPERATORS_NAMESPACE,
    AuditLog,
    OperatorConfig,
    audit_apiserver_args,
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

from kuberay.api.constants import RAYCLUSTERS
from kuberay.builders import pod as podb
from kuberay.builders import service as svcb
from kuberay.builders.options import BuildOptions
from kuberay.devenv.binaries import go_operator_binary
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.plane import Plane, PlaneConfig, free_port
from kuberay.devenv.testing import create_namespace
from kuberay.devenv.testing import small_raycluster as cluster
from kuberay.runtime.client import (
    JSON_PATCH,
    NAMESPACES,
    PODS,
    SERVICEACCOUNTS,
    SERVICES,
    KubeClient,
    load_kubeconfig,
)
from kuberay.runtime.errors import AlreadyExists, ApiError, NotFound, ServerError


def operator_shaped_pod(i: int, workers: int, ns: str = "bench-ceiling") -> dict[str, Any]:
    """Pod ``i`` of a run of ``cluster(..., workers)`` clusters, exactly as the operator's
    builders make it, minus the owner reference (its RayCluster does not exist here, and the
    garbage collector would delete the pod)."""
    rc = cluster(f"ce-{i // (workers + 1)}", workers)
    rc["metadata"].update(namespace=ns, uid=f"00000000-0000-0000-0000-{i:012d}")
    if i % (workers + 1) == 0:
        pod = podb.build_head_pod(rc, BuildOptions(), name_suffix=f"{i}")
    else:
        group = rc["spec"]["workerGroupSpecs"][0]
        pod = podb.build_worker_pod(rc, group, BuildOptions(), name_suffix=f"{i}", replica_index=0)
    pod["metadata"].pop("ownerReferences", None)
    pod["metadata"].pop("generateName", None)
    pod["metadata"]["name"] = f"ce-{i}"
    return pod


def operator_head_service(k: int, workers: int, ns: str = "bench-ceiling") -> dict[str, Any]:
    """The head Service the operator makes for cluster ``k`` of ``operator_shaped_pod``."""
    rc = cluster(f"ce-{k}", workers)
    rc["metadata"].update(namespace=ns, uid=f"00000000-0000-0000-0001-{k:012d}")
    svc = svcb.build_head_service(rc, BuildOptions())
    svc["metadata"].pop("ownerReferences", None)
    return svc


def plane_cpu(plane: Plane | None, before: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds per control-plane component (since ``before`` when given)."""
    if plane is None:
        return {}
    now = plane.cpu_seconds()
    if before is None:
        return now
    return {k: round(v - before.get(k, 0.0), 1) for k, v in now.items()}


def speed_probe(rounds: int = 3, loops: int = 2_000_000) -> float:
    """Seconds for a fixed pure-Python loop, the best of ``rounds``: how fast this machine's
    cores were around a run (a shared VM's cores slow down when its neighbours are busy, and
    every component's CPU per pod then grows alike). Taken while the plane is idle."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def proc_stats(pid: int) -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out = {"cpu": (int(fields[11]) + int(fields[12])) / tick}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def scrape(port: int) -> dict[tuple[str, str, str], float]:
    """The operator's requests by (method, resource, code), and its RayCluster reconciles
    as ("RECONCILE", "raycluster", result)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if line.startswith('controller_runtime_reconcile_total{controller="raycluster"'):
            labels, value = line.rsplit(" ", 1)
            result = labels.split('result="', 1)[1].split('"', 1)[0]
            out[("RECONCILE", "raycluster", result)] = float(value)
        if line.startswith("kuberay_rest_client_requests_by_resource_total{"):
            labels, value = line.rsplit(" ", 1)
            kv = dict(item.split("=", 1) for item in labels[labels.index("{") + 1 : -1].split(","))
            key = (kv["method"].strip('"'), kv["resource"].strip('"'), kv["code"].strip('"'))
            out[key] = float(value)
    return out


async def apiserver_requests(kube: KubeClient) -> dict[tuple[str, str], float]:
    """Every client's requests as the apiserver counted them, by (verb, resource[/sub]); and
    as ("TERMINATED", resource) the watchers it closed for not keeping up with their events.
    The runs in which it closed many are the runs in which KWOK replayed stages from stale
    copies of pods (seen together; the causal path is not established)."""
    try:
        text = await kube.request("GET", "/metrics", accept="text/plain")
    except ApiError:
        return {}  # not allowed to read /metrics on an existing cluster
    out: dict[tuple[str, str], float] = {}
    for line in str(text).splitlines():
        terminated = line.startswith("apiserver_terminated_watchers_total{")
        if not terminated and not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        kv = dict(
            item.split("=", 1)
            for item in labels[labels.index("{") + 1 : -1].split(",")
            if "=" in item
        )
        kv = {k: v.strip('"') for k, v in kv.items()}
        resource = kv.get("resource", "")
        if kv.get("subresource"):
            resource += "/" + kv["subresource"]
        key = ("TERMINATED" if terminated else kv.get("verb", ""), resource)
        out[key] = out.get(key, 0.0) + float(value)
    return out


def object_key(obj: dict[str, Any], ns: str | None) -> str:
    """An object's name within one namespace's scope (``ns`` set), else namespace/name."""
    meta = obj["metadata"]
    return str(meta["name"]) if ns else f"{meta['namespace']}/{meta['name']}"


def diff(after: dict[Any, float], before: dict[Any, float]) -> dict[Any, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


class Bench:
    def __init__(
        self,
        kube: KubeClient,
        op_pid: int,
        metrics_port: int,
        timeout: float,
        plane: Plane | None = None,
        audit: AuditLog | None = None,
        audit_user: str = "",
        resync_window: float = 0,
        namespaces: int = 1,
    ) -> None:
        self.plane = plane
        # Namespaces a size's clusters are spread over, round robin. The controller-manager
        # matches every pod against every Service selector of its namespace, so 10,000 head
        # Services in one namespace slow the plane's pod rate for any operator.
        self.namespaces = namespaces
        # Seconds to watch a converged size before it is deleted (the steady "resync" phase).
        self.resync_window = resync_window
        # The apiserver's record of the operator's requests (its ServiceAccount), when the
        # plane is this benchmark's own; see scale_report.
        self.audit = audit
        self.audit_user = audit_user
        self.kube = kube
        self.op_pid = op_pid
        self.metrics_port = metrics_port
        self.timeout = timeout

    async def ready_states(self, ns: str) -> dict[str, dict[str, Any]]:
        items = (await self.kube.list(RAYCLUSTERS, ns))["items"]
        return {c["metadata"]["name"]: c for c in items}

    async def wait_all_ready(  # noqa: C901
        self,
        ns: str | None,
        names: set[str],
        want_workers: dict[str, int] | None = None,
        seen_ready: dict[str, float] | None = None,
        since: float | None = None,
    ) -> float:
        """Seconds until every named cluster is ``ready`` (with the wanted worker counts). It
        watches rather than polls: a list of every RayCluster twice a second loaded the
        apiserver in the operator's runs only, and rounded latencies up to the poll period.
        With ``ns`` None it watches every namespace and ``names`` are ``namespace/name``.
        ``seen_ready`` gets, per cluster, the seconds since ``since`` at which it was last seen
        turn ready (``scale_report.status_lag`` compares them with its pods')."""
        start = time.monotonic()
        origin = start if since is None else since

        def mark(name: str) -> None:
            if seen_ready is not None and name in pending:
                seen_ready[name] = time.monotonic() - origin

        def key(obj: dict[str, Any]) -> str:
            return object_key(obj, ns)

        def converged(obj: dict[str, Any] | None) -> bool:
            st = (obj or {}).get("status") or {}
            if st.get("state") != "ready":
                return False
            if want_workers is None:
                return True
            name = key(obj or {})
            return (
                st.get("availableWorkerReplicas") == want_workers[name]
                and st.get("desiredWorkerReplicas") == want_workers[name]
            )

        pending = set(names)
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    try:
                        listed = await self.kube.list(RAYCLUSTERS, ns)
                    except ServerError:  # 504 while the watch cache catches up: try again
                        await asyncio.sleep(0.5)
                        continue
                    for obj in listed["items"]:
                        if key(obj) in names and converged(obj):
                            mark(key(obj))
                            pending.discard(key(obj))
                    if not pending:
                        return time.monotonic() - start
                    rv = listed["metadata"]["resourceVersion"]
                    async for ev in self.kube.watch(
                        RAYCLUSTERS, ns, resource_version=rv, timeout_seconds=int(self.timeout)
                    ):
                        if ev.type == "ERROR":
                            break  # relist
                        if ev.type == "BOOKMARK":
                            continue
                        name = key(ev.object)
                        if name not in names:
                            continue
                        if ev.type != "DELETED" and converged(ev.object):
                            mark(name)
                            pending.discard(name)
                        else:
                            pending.add(name)
                        if not pending:
                            return time.monotonic() - start
        except TimeoutError:
            raise TimeoutError(f"clusters in {ns} not converged after {self.timeout}s") from None

    async def count_pods_watch(
        self,
        ns: str | None,
        total: int,
        started: float,
        spaces: frozenset[str] = frozenset(),
        owners: dict[str, str] | None = None,
        ready: dict[str, float] | None = None,
    ) -> tuple[float, float, dict[str, Any]]:
        """Seconds until every pod exists, and until every pod is Running+Ready (the same
        end point as the ceiling's, so the two rates compare), and the pods' timeline
        (``scale_report.pod_timeline``: when each was first seen, bound, Ready). With ``ns``
        None it watches every namespace and counts the pods of ``spaces`` only. ``owners``
        gets each pod's cluster (``ray.io/cluster``, keyed as ``wait_all_ready`` keys it) and
        ``ready`` each pod's first Ready moment."""
        seen: dict[str, float] = {}
        bound: dict[str, float] = {}
        ready = {} if ready is None else ready
        exist_s = 0.0

        def note(pod: dict[str, Any]) -> None:
            if ns is None and pod["metadata"]["namespace"] not in spaces:
                return
            name = object_key(pod, ns)
            now = time.monotonic() - started
            if owners is not None and name not in seen:
                owner = (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")
                owners[name] = owner if ns else f"{pod['metadata']['namespace']}/{owner}"
            seen.setdefault(name, now)
            if (pod.get("spec") or {}).get("nodeName"):
                bound.setdefault(name, now)
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                ready.setdefault(name, now)

        rv = (await list_retrying(self.kube, ns))["metadata"]["resourceVersion"]
        while True:
            async for ev in self.kube.watch(
                PODS, ns, resource_version=rv, timeout_seconds=int(self.timeout)
            ):
                if ev.type == "ERROR":
                    break
                rv = ev.object["metadata"]["resourceVersion"]
                if ev.type in ("ADDED", "MODIFIED"):
                    note(ev.object)
                    if not exist_s and len(seen) >= total:
                        exist_s = time.monotonic() - started
                    if len(ready) >= total:
                        return exist_s, time.monotonic() - started, pod_timeline(seen, bound, ready)
            listed = await list_retrying(self.kube, ns)
            for pod in listed["items"]:
                note(pod)
            rv = listed["metadata"]["resourceVersion"]
            if not exist_s and len(seen) >= total:
                exist_s = time.monotonic() - started
            if len(ready) >= total:
                return exist_s, time.monotonic() - started, pod_timeline(seen, bound, ready)

    async def delete_namespace(self, ns: str) -> None:
        """Deletes the RayClusters first (or the operator recreates heads while the namespace
        goes), then every pod at once with no grace period (or KWOK finalizes them one by
        one: minutes at 2,200 pods), then the namespace."""
        opts = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        for res in (RAYCLUSTERS, PODS):
            for attempt in range(10):
                try:
                    await self.kube.request("DELETE", res.path(ns), opts, timeout=self.timeout)
                    break
                except NotFound:
                    break
                except ApiError as exc:
                    # A collection delete that outlasted the server's request timeout: a 5xx
                    # over HTTP/1.1, a stream reset (status 0) over HTTP/2. What it deleted
                    # stays deleted; the next attempt goes on with the rest.
                    if not (isinstance(exc, ServerError) or exc.status == 0) or attempt == 9:
                        raise
                    await asyncio.sleep(2)
        try:
            await self.kube.delete(NAMESPACES, ns)
        except NotFound:
            return
        start = time.monotonic()
        while time.monotonic() - start < self.timeout:
            try:
                await self.kube.get(NAMESPACES, ns)
            except NotFound:
                return
            await asyncio.sleep(1)

    async def delete_namespaces(self, spaces: list[str]) -> None:
        """``delete_namespace`` for many, a few at a time: a hundred at once (10,000 clusters)
        made a collection delete fail, and the apiserver's namespace controller works through
        only a few namespaces at a time anyway. Every namespace is tried before a failure is
        raised."""
        sem = asyncio.Semaphore(8)

        async def one(ns: str) -> None:
            async with sem:
                await self.delete_namespace(ns)

        results = await asyncio.gather(*(one(ns) for ns in spaces), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise RuntimeError(
                f"{len(failed)} of {len(spaces)} namespaces not deleted: {failed[0]!r}"
            ) from failed[0]

    async def size(self, n: int, m: int, idle_rss: float) -> dict[str, Any]:
        base = f"bench-{n}x{m}"
        spaces = [base] if self.namespaces == 1 else [f"{base}-{j}" for j in range(self.namespaces)]
        for each in spaces:
            await create_namespace(self.kube, each)
        # One namespace: scoped list and watch; several: cluster-wide, keyed namespace/name.
        ns = base if self.namespaces == 1 else None
        total = n * (m + 1)
        before = scrape(self.metrics_port)
        server_before = await apiserver_requests(self.kube)
        audit0 = self.audit.offset() if self.audit else 0
        probe0 = speed_probe()
        kwok_path = self.plane.logs / "kwok.log" if self.plane is not None else None
        kwok_log = AuditLog(kwok_path) if kwok_path is not None and kwok_path.exists() else None
        kwok0 = kwok_log.offset() if kwok_log is not None else 0
        p0 = proc_stats(self.op_pid)
        cpu0 = plane_cpu(self.plane)
        start = time.monotonic()
        owners: dict[str, str] = {}
        pods_ready: dict[str, float] = {}
        clusters_ready: dict[str, float] = {}
        counter = asyncio.create_task(
            self.count_pods_watch(ns, total, start, frozenset(spaces), owners, pods_ready)
        )
        sem = asyncio.Semaphore(16)

        def space(i: int) -> str:
            return spaces[i % len(spaces)]

        async def make(i: int) -> None:
            async with sem:
                await self.kube.create(RAYCLUSTERS, cluster(f"rc-{i}", m), space(i))

        await asyncio.gather(*(make(i) for i in range(n)))
        names = {f"rc-{i}" if ns else f"{space(i)}/rc-{i}" for i in range(n)}
        ready = await self.wait_all_ready(ns, names, seen_ready=clusters_ready, since=start)
        exist, all_pods_ready, timeline = await asyncio.wait_for(counter, self.timeout)
        timeline |= status_lag(clusters_ready, pods_ready, owners)
        cpu_busy = plane_cpu(self.plane, cpu0)
        p_ready = proc_stats(self.op_pid)
        wall = time.monotonic() - start
        server = diff(await apiserver_requests(self.kube), server_before)
        await asyncio.sleep(5)  # steady state
        probe1 = speed_probe()
        p1 = proc_stats(self.op_pid)
        reqs = diff(scrape(self.metrics_port), before)
        audit = (
            audit_figures(
                parse_audit(self.audit.lines(audit0, self.audit.offset()), self.audit_user), n
            )
            if self.audit
            else None
        )
        by_verb: dict[str, float] = {}
        reconciles = sum(v for (mth, _r, _c), v in reqs.items() if mth == "RECONCILE")
        for (method, resource, _code), count in reqs.items():
            if method == "RECONCILE":
                continue
            key = f"{method} {resource}"
            by_verb[key] = by_verb.get(key, 0.0) + count
        conflicts = sum(v for (_m, _r, code), v in reqs.items() if code == "409")
        status_writes = sum(
            v for (mth, res, _c), v in reqs.items() if mth == "PUT" and res == "rayclusters/status"
        )
        result = {
            "clusters": n,
            "workers": m,
            "namespaces": len(spaces),
            "pods": total,
            "all_pods_exist_s": round(exist, 1),
            "all_ready_s": round(ready, 1),
            "all_pods_ready_s": round(all_pods_ready, 1),
            "pods_per_s": round(total / exist, 1),
            "pods_ready_per_s": round(total / all_pods_ready, 1),
            "operator_cpu_s": round(p1["cpu"] - p0["cpu"], 1),
            "operator_peak_rss_mib": round(p1.get("VmHWM", 0), 1),
            "operator_steady_rss_mib": round(p1.get("VmRSS", 0), 1),
            "rss_per_pod_kib": round((p1.get("VmRSS", 0) - idle_rss) * 1024 / total, 2),
            "requests_per_cluster": {k: round(v / n, 2) for k, v in sorted(by_verb.items())},
            "conflicts_409": int(conflicts),
            "status_writes_per_cluster": round(status_writes / n, 2),
            "reconciles_per_cluster": round(reconciles / n, 2),
            "plane_cpu_s": cpu_busy,
            "cpu_budget": cpu_budget(
                p_ready["cpu"] - p0["cpu"], cpu_busy, total, wall, os.cpu_count() or 1
            ),
            "speed_probe_s": round((probe0 + probe1) / 2, 3),
            "timeline": timeline,
            "watchers_terminated": int(
                sum(v for (verb, _r), v in server.items() if verb == "TERMINATED")
            ),
            "watchers_terminated_by_resource": terminated_by_resource(server),
            # All clients (operator, scheduler, KWOK, controller-manager, this benchmark):
            # where the apiserver's work came from, per cluster, until every pod was Ready.
            "apiserver_requests_per_cluster": {
                f"{verb} {res}": round(v / n, 2)
                for (verb, res), v in sorted(server.items())
                if v / n >= 0.05 and verb != "TERMINATED"
            },
        }
        if audit is not None:
            result["audit"] = audit
        if kwok_log is not None:
            result["kwok"] = kwok_play(kwok_log.lines(kwok0, kwok_log.offset()), total)
        if self.resync_window:
            result["resync"] = await self.resync(n, self.resync_window)
        # The figures are in hand: a teardown that fails is recorded, not allowed to lose them
        # (the run's clear_workloads tries again before the next operator starts).
        started = time.monotonic()
        try:
            await self.delete_namespaces(spaces)
        except Exception as exc:
            result["teardown_error"] = repr(exc)
        result["teardown_s"] = round(time.monotonic() - started, 1)
        return result

    async def resync(self, n: int, window: float) -> dict[str, Any]:
        """The steady cost of ``n`` converged clusters: nothing changes, so what the operator
        does in ``window`` seconds is its periodic requeue (the environment variable
        ``RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV``, set for both operators by
        --requeue-seconds) and its own upkeep."""
        before = scrape(self.metrics_port)
        audit0 = self.audit.offset() if self.audit else 0
        p0 = proc_stats(self.op_pid)
        await asyncio.sleep(window)
        p1 = proc_stats(self.op_pid)
        after = diff(scrape(self.metrics_port), before)
        reconciles = sum(v for (mth, _r, _c), v in after.items() if mth == "RECONCILE")
        cpu = p1["cpu"] - p0["cpu"]
        out: dict[str, Any] = {
            "window_s": window,
            "operator_cpu_s": round(cpu, 2),
            "operator_cpu_share": round(cpu / window, 3),
            "reconciles_per_cluster": round(reconciles / n, 2),
            "cpu_ms_per_reconcile": round(cpu * 1000 / reconciles, 2) if reconciles else None,
            "operator_rss_mib": round(p1.get("VmRSS", 0), 1),
        }
        if self.audit:
            figures = audit_figures(
                parse_audit(self.audit.lines(audit0, self.audit.offset()), self.audit_user), n
            )
            out["requests_per_cluster"] = figures.get("requests_total_per_cluster")
            out["status_writes_per_cluster"] = figures.get("status_writes_per_cluster")
        return out

    async def small_cluster_latency(self, ns: str, count: int, prefix: str) -> list[float]:
        latencies: list[float] = []

        async def one(i: int) -> None:
            name = f"{prefix}-{i}"
            start = time.monotonic()
            await self.kube.create(RAYCLUSTERS, cluster(name, 1), ns)
            latencies.append(await self.wait_all_ready(ns, {name}) + 0.0)
            del start

        tasks = []
        for i in range(count):
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0.5)
        await asyncio.gather(*tasks)
        return latencies

    async def fairness(self, big_workers: int, small: int) -> dict[str, Any]:
        ns = "bench-fair"
        await create_namespace(self.kube, ns)
        idle = await self.small_cluster_latency(ns, small, "idle")
        await self.kube.create(RAYCLUSTERS, cluster("big", 0), ns)
        await self.wait_all_ready(ns, {"big"})
        patch = [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": big_workers}
        ]
        audit0 = self.audit.offset() if self.audit else 0
        p0 = proc_stats(self.op_pid)
        start = time.monotonic()
        await self.kube.patch(RAYCLUSTERS, "big", patch, ns, content_type=JSON_PATCH)
        busy = await self.small_cluster_latency(ns, small, "busy")
        big_ready = await self.wait_all_ready(ns, {"big"}, {"big": big_workers}) + 0.0
        big_total = time.monotonic() - start
        p1 = proc_stats(self.op_pid)
        # The busy phase's writes: the big cluster's progress plus the small clusters' own.
        busy_audit = (
            audit_figures(
                parse_audit(self.audit.lines(audit0, self.audit.offset()), self.audit_user), 1
            )
            if self.audit
            else None
        )
        await self.delete_namespace(ns)
        del big_ready
        out: dict[str, Any] = {
            "big_cluster_workers": big_workers,
            "big_cluster_ready_s": round(big_total, 1),
            "small_clusters": small,
            "idle_p50_s": round(percentile(idle, 0.5), 2),
            "idle_p99_s": round(percentile(idle, 0.99), 2),
            "busy_p50_s": round(percentile(busy, 0.5), 2),
            "busy_p99_s": round(percentile(busy, 0.99), 2),
            "p99_penalty_s": round(percentile(busy, 0.99) - percentile(idle, 0.99), 2),
            "busy_operator_cpu_s": round(p1["cpu"] - p0["cpu"], 2),
        }
        if busy_audit is not None:
            out["busy_status_writes"] = busy_audit["status_writes_per_cluster"]
            out["busy_requests"] = busy_audit["requests_total_per_cluster"]
        return out

    async def churn(self, clusters: int, waves: int) -> dict[str, Any]:
        ns = "bench-churn"
        await create_namespace(self.kube, ns)
        names = {f"ch-{i}" for i in range(clusters)}
        for name in names:
            await self.kube.create(RAYCLUSTERS, cluster(name, 2), ns)
        await self.wait_all_ready(ns, names)
        convergence: list[dict[str, Any]] = []
        duplicates = 0
        for wave in range(waves):
            for label, workers in (("scale-up", 8), ("scale-down", 2)):
                patch = [
                    {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": workers}
                ]
                await asyncio.gather(
                    *(
                        self.kube.patch(RAYCLUSTERS, n, patch, ns, content_type=JSON_PATCH)
                        for n in names
                    )
                )
                took = await self.wait_all_ready(ns, names, dict.fromkeys(names, workers))
                await asyncio.sleep(2)
                duplicates += await self.count_extra_pods(ns, dict.fromkeys(names, workers))
                convergence.append({"wave": wave, "step": label, "seconds": round(took, 1)})
            start = time.monotonic()
            await asyncio.gather(*(self.kube.delete(RAYCLUSTERS, n, ns) for n in names))
            while time.monotonic() - start < self.timeout:
                if not await self.ready_states(ns):
                    break
                await asyncio.sleep(0.5)
            for name in names:
                await self.kube.create(RAYCLUSTERS, cluster(name, 2), ns)
            took = await self.wait_all_ready(ns, names, dict.fromkeys(names, 2))
            await asyncio.sleep(2)
            duplicates += await self.count_extra_pods(ns, dict.fromkeys(names, 2))
            convergence.append({"wave": wave, "step": "delete+recreate", "seconds": round(took, 1)})
        orphans = await self.count_orphans(ns)
        await self.delete_namespace(ns)
        return {
            "clusters": clusters,
            "waves": waves,
            "convergence": convergence,
            "max_convergence_s": max(c["seconds"] for c in convergence),
            "duplicate_pods": duplicates,
            "orphaned_pods": orphans,
        }

    async def count_extra_pods(self, ns: str, want_workers: dict[str, int]) -> int:
        pods = [
            p
            for p in (await self.kube.list(PODS, ns, label_selector="ray.io/cluster"))["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        extra = 0
        for name, workers in want_workers.items():
            mine = [p for p in pods if p["metadata"]["labels"]["ray.io/cluster"] == name]
            extra += max(0, len(mine) - (workers + 1))
        return extra

    async def count_orphans(self, ns: str) -> int:
        """Pods whose RayCluster (by owner uid) no longer exists, once GC had time to act."""
        await asyncio.sleep(5)
        uids = {c["metadata"]["uid"] for c in (await self.kube.list(RAYCLUSTERS, ns))["items"]}
        pods = (await self.kube.list(PODS, ns, label_selector="ray.io/cluster"))["items"]
        return sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and not any(o["uid"] in uids for o in p["metadata"].get("ownerReferences") or [])
        )


def start_operator(
    kubeconfig: Path,
    log: Path,
    concurrency: int,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    binary: list[str] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """An operator serving metrics on the returned port: this one, or ``binary`` (given the
    flags both understand and the kubeconfig in KUBECONFIG)."""
    port = free_port()
    # Both operators get the same client rate limits (the Go operator's flags are the same), so
    # that a comparison measures the operators rather than their defaults' token buckets.
    common = [
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{port}",
        "--health-probe-bind-address=127.0.0.1:0",
        f"--reconcile-concurrency={concurrency}",
        "--qps=1000",
        "--burst=2000",
    ]
    ours = [
        f"--kubeconfig={kubeconfig}",
        "--log-stdout-encoder=console",
    ]
    argv = (
        [*binary, *common]
        if binary
        else [sys.executable, "-m", "kuberay.cli.main", "operator", *common, *ours]
    )
    out = open(log, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [*argv, *extra],
        env={**os.environ, "KUBECONFIG": str(kubeconfig), **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    out.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"operator did not serve metrics; see {log}")


async def operator_identity(
    kube: KubeClient, plane: Plane, workdir: Path, cfg: OperatorConfig
) -> Path:
    """A kubeconfig for the operator under test as its own ServiceAccount (cluster-admin), with
    a token from the TokenRequest API: the audit policy logs that account's requests only."""
    with contextlib.suppress(AlreadyExists):
        await kube.create(NAMESPACES, {"metadata": {"name": OPERATORS_NAMESPACE}})
    with contextlib.suppress(AlreadyExists):
        await kube.create(SERVICEACCOUNTS, {"metadata": {"name": cfg.account}}, OPERATORS_NAMESPACE)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"bench-{cfg.account}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": cfg.account, "namespace": OPERATORS_NAMESPACE}
        ],
    }
    with contextlib.suppress(AlreadyExists):
        await kube.request(
            "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding
        )
    token = await kube.request(
        "POST",
        SERVICEACCOUNTS.path(OPERATORS_NAMESPACE, cfg.account, "token"),
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86400},
        },
    )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "bench",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority": str(plane.pki.ca_cert),
                },
            }
        ],
        "users": [{"name": cfg.account, "user": {"token": token["status"]["token"]}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": cfg.account}}],
        "current-context": "bench",
    }
    path = workdir / f"{cfg.account}.kubeconfig"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


async def clear_workloads(kube: KubeClient, timeout: float) -> None:
    """Deletes what a run left behind (its namespaces and RayClusters) and waits until it is
    gone, so the next operator starts on an empty plane."""
    bench = Bench(kube, 0, 0, timeout)
    await bench.delete_namespaces(
        [
            ns["metadata"]["name"]
            for ns in (await kube.list(NAMESPACES))["items"]
            if ns["metadata"]["name"].startswith("bench-")
            and ns["metadata"]["name"] not in (OPERATORS_NAMESPACE, "bench-ceiling")
        ]
    )
    left = (await kube.list(RAYCLUSTERS))["items"]
    if left:
        names = [f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in left]
        raise RuntimeError(f"RayClusters left after a run: {names[:10]}")


async def run_operator(
    args: argparse.Namespace,
    st: Stage,
    cfg: OperatorConfig,
    run: int,
    ceilings: dict[str, Any],
) -> dict[str, Any]:
    """One operator alone on the plane: start it, every size, fairness and churn if asked,
    stop it. On this benchmark's own plane it runs as its own ServiceAccount and its requests
    are read from the apiserver's audit log."""
    kube, kubeconfig, plane, workdir = st.kube, st.kubeconfig, st.plane, st.workdir
    audit = None
    if plane is not None:
        kubeconfig = await operator_identity(kube, plane, workdir, cfg)
        audit = AuditLog(workdir / "audit.log")
    log = workdir / f"operator-{cfg.account}-{run}.log"
    binary = [str(go_operator_binary(log=lambda _: None))] if cfg.kind == "go" else None
    env = (
        {"RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV": str(args.requeue_seconds)}
        if args.requeue_seconds
        else None
    )
    proc, port = start_operator(kubeconfig, log, cfg.concurrency, env=env, binary=binary)
    result: dict[str, Any] = {"operator": cfg.label, "concurrency": cfg.concurrency, "run": run}
    try:
        await asyncio.sleep(3)
        idle = proc_stats(proc.pid)
        result["operator_idle_rss_mib"] = round(idle.get("VmRSS", 0), 1)
        bench = Bench(
            kube,
            proc.pid,
            port,
            args.timeout,
            plane,
            audit,
            cfg.username,
            args.resync_window,
            args.namespaces,
        )
        result["sizes"] = []
        for size in filter(None, args.sizes.split(",")):
            n, m = (int(x) for x in size.lower().split("x"))
            r = await bench.size(n, m, idle.get("VmRSS", 0))
            if "ceiling" in ceilings:
                # Same end point as the ceiling (every pod Running+Ready), so comparable;
                # the creation rate (pods_per_s) is reported beside it.
                ceiling_rate = ceilings["ceiling"]["ceiling_pods_per_second"]
                r["fraction_of_ceiling"] = round(r["pods_ready_per_s"] / ceiling_rate, 2)
                r["creation_fraction_of_ceiling"] = round(r["pods_per_s"] / ceiling_rate, 2)
            if "ceiling_with_services" in ceilings:
                rate = ceilings["ceiling_with_services"]["ceiling_pods_per_second"]
                r["fraction_of_ceiling_with_services"] = round(r["pods_ready_per_s"] / rate, 2)
            result["sizes"].append(r)
            print(
                f"{cfg.label} run {run} size {size}: {r['all_ready_s']}s to ready, "
                f"{r['pods_ready_per_s']} pods Ready/s",
                flush=True,
            )
        if args.fairness_workers:
            result["fairness"] = await bench.fairness(args.fairness_workers, args.small)
            print(f"{cfg.label} fairness: {result['fairness']}", flush=True)
        if args.churn_waves:
            result["churn"] = await bench.churn(args.churn_clusters, args.churn_waves)
            print(f"{cfg.label} churn: max {result['churn']['max_convergence_s']}s", flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if not st.fresh:
            await clear_workloads(kube, args.timeout)
    return result


Prepare = Callable[[KubeClient, str], Awaitable[None]]


@dataclasses.dataclass
class Stage:
    """Where one phase runs: its client, kubeconfig, plane (None with --kubeconfig) and work
    directory (the audit log and the operator's log)."""

    kube: KubeClient
    kubeconfig: Path
    plane: Plane | None
    workdir: Path
    fresh: bool


def bench_client(kubeconfig: Path) -> KubeClient:
    config = load_kubeconfig(kubeconfig)
    config.qps = 0
    config.max_connections = 100
    return KubeClient(config, user_agent="bench-scale")


@contextlib.asynccontextmanager
async def fresh_stage(args: argparse.Namespace, workdir: Path) -> AsyncIterator[Stage]:
    """A new plane for one phase, stopped after it. Every phase starts from the same state:
    a plane that has just created and deleted thousands of pods is measurably slower (etcd
    history, the watch cache, the controllers' queues), so on one shared plane the first
    phase, the ceiling, ran on a cleaner plane than every operator after it."""
    workdir.mkdir()
    with bench_plane(workdir, args.nodes, audit=True) as plane:
        async with bench_client(plane.kubeconfig) as kube:
            await install_crds(kube)
            yield Stage(kube, plane.kubeconfig, plane, workdir, fresh=True)


async def run_all(
    args: argparse.Namespace, kubeconfig: Path | None, plane: Plane | None, workdir: Path
) -> dict[str, Any]:
    """Every phase. ``kubeconfig`` None: each ceiling and each operator run gets a plane of
    its own (fresh_stage); otherwise they all share that cluster (and ``plane``, if it is this
    benchmark's own), taking turns with a cleanup between them."""
    configs = parse_operators(args.operators, args.concurrency)
    result: dict[str, Any] = {"inputs": {k: v for k, v in vars(args).items() if k != "out"}}
    result["planes"] = 0
    async with contextlib.AsyncExitStack() as stack:
        shared: Stage | None = None
        if kubeconfig is not None:
            kube = await stack.enter_async_context(bench_client(kubeconfig))
            await install_crds(kube)
            shared = Stage(kube, kubeconfig, plane, workdir, fresh=False)

        @contextlib.asynccontextmanager
        async def stage() -> AsyncIterator[Stage]:
            if shared is not None:
                yield shared
                return
            result["planes"] += 1
            async with fresh_stage(args, workdir / f"plane-{result['planes']}") as st:
                yield st

        own_plane = shared is None or shared.plane is not None
        if own_plane and not args.no_ceiling:
            n, m = (int(x) for x in (args.sizes.split(",")[-1] or "200x10").split("x"))
            pods = args.ceiling_pods or n * (m + 1)

            async def measure(key: str, prepare: Prepare | None = None) -> None:
                async with stage() as st:
                    assert st.plane is not None
                    cpu0 = plane_cpu(st.plane)
                    result[key] = await ceiling(
                        st.plane,
                        pods,
                        64,
                        args.timeout,
                        lambda i: operator_shaped_pod(i, m),
                        prepare,
                    )
                    result[key]["plane_cpu_s"] = plane_cpu(st.plane, cpu0)
                    print(f"{key.replace('_', ' ')}: {result[key]}", flush=True)
                    if not st.fresh:
                        # Its pods' deletion would load the next phase.
                        await Bench(st.kube, 0, 0, args.timeout).delete_namespace("bench-ceiling")

            await measure("ceiling")
            if args.ceiling_services:
                # The same pods again, now with each cluster's head Service in place: the
                # endpoint controllers and the scheduler's spreading match every pod event
                # against every Service selector in the namespace, a cost any operator's
                # clusters bring with them.
                async def services(client: KubeClient, ns: str) -> None:
                    sem = asyncio.Semaphore(32)

                    async def one(k: int) -> None:
                        async with sem:
                            await client.create(SERVICES, operator_head_service(k, m), ns)

                    await asyncio.gather(*(one(k) for k in range(pods // (m + 1))))

                await measure("ceiling_with_services", services)
        runs: dict[str, list[dict[str, Any]]] = {c.label: [] for c in configs}
        for k, cfg in run_order(configs, args.runs):
            async with stage() as st:
                try:
                    r = await run_operator(args, st, cfg, k, result)
                except Exception as exc:
                    if len(configs) == 1 and args.runs == 1:
                        raise
                    # One config failing (a timeout at a size) must not lose the others'
                    # figures.
                    print(f"{cfg.label} run {k} failed: {exc!r}", flush=True)
                    r = {"operator": cfg.label, "run": k, "error": repr(exc)}
                    if not st.fresh:
                        await clear_workloads(st.kube, args.timeout)
            runs[cfg.label].append(r)
    result["operators"] = {
        c.label: {
            "kind": c.kind,
            "concurrency": c.concurrency,
            "median": median_result(runs[c.label]),
            "runs": runs[c.label],
        }
        for c in configs
    }
    if len(configs) == 1:
        # The single-operator shape of earlier versions: its figures at the top level.
        only = result["operators"][configs[0].label]["median"]
        result.update({k: v for k, v in only.items() if k not in ("operator", "run")})
    return result


def _cpu(by_component: dict[str, float]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(by_component.items())) or "-"


def markdown(result: dict[str, Any]) -> str:
    lines = ["| figure | value |", "|---|---|"]
    if "ceiling" in result:
        ce = result["ceiling"]
        lines.append(
            f"| ceiling (no operator, {ce['pods']} operator-shaped pods) | "
            f"{ce['ceiling_pods_per_second']} pods/s |"
        )
        if ce.get("plane_cpu_s"):
            lines.append(f"| ceiling: plane CPU s | {_cpu(ce['plane_cpu_s'])} |")
    if "ceiling_with_services" in result:
        cs = result["ceiling_with_services"]
        lines.append(
            f"| ceiling with each cluster's head Service in place | "
            f"{cs['ceiling_pods_per_second']} pods/s |"
        )
        lines.append(f"| ceiling with Services: plane CPU s | {_cpu(cs['plane_cpu_s'])} |")
    if "error" in result:
        lines.append(f"| operator failed in every run | {result['error']} |")
        return "\n".join(lines)
    lines.append(f"| operator idle RSS | {result['operator_idle_rss_mib']} MiB |")
    for r in result.get("sizes", []):
        tag = f"{r['clusters']}x{r['workers']}"
        frac = f" ({r['fraction_of_ceiling']:.0%} of ceiling)" if "fraction_of_ceiling" in r else ""
        cfrac = (
            f" ({r['creation_fraction_of_ceiling']:.0%})"
            if "creation_fraction_of_ceiling" in r
            else ""
        )
        lines += [
            f"| {tag}: all pods exist / all pods Ready / all clusters ready | {r['all_pods_exist_s']} s / {r['all_pods_ready_s']} s / {r['all_ready_s']} s |",
            f"| {tag}: pods Ready per second | {r['pods_ready_per_s']}{frac} |",
            f"| {tag}: pods Ready per second / ceiling with Services | {r.get('fraction_of_ceiling_with_services', 0):.0%} |",
            f"| {tag}: pods created per second | {r['pods_per_s']}{cfrac} |",
            f"| {tag}: operator CPU | {r['operator_cpu_s']} s |",
            f"| {tag}: operator RSS peak / steady / per pod | {r['operator_peak_rss_mib']} / {r['operator_steady_rss_mib']} MiB / {r['rss_per_pod_kib']} KiB |",
            f"| {tag}: 409 conflicts, status writes per cluster, reconciles per cluster | {r['conflicts_409']}, {r['status_writes_per_cluster']}, {r.get('reconciles_per_cluster', '-')} |",
            f"| {tag}: plane CPU s until all Ready | {_cpu(r.get('plane_cpu_s') or {})} |",
            f"| {tag}: machine CPU per pod, ms / busy share / speed probe, s | {_budget(r)} |",
            f"| {tag}: KWOK patches per pod / pods patched twice / failed stages; watchers closed as too slow | {_kwok(r)} |",
            f"| {tag}: pod timeline | {', '.join(f'{k}={v}' for k, v in (r.get('timeline') or {}).items()) or '-'} |",
            f"| {tag}: apiserver requests per cluster, all clients | {', '.join(f'{k}={v}' for k, v in (r.get('apiserver_requests_per_cluster') or {}).items()) or '-'} |",
            f"| {tag}: operator requests per cluster | {', '.join(f'{k}={v}' for k, v in r['requests_per_cluster'].items())} |",
        ]
        resync = r.get("resync") or {}
        lines += [
            f"| {tag}: resync over {resync['window_s']} s: {name} | {resync.get(key, '-')} |"
            for key, name in (
                ("operator_cpu_share", "operator CPU share of one core"),
                ("reconciles_per_cluster", "reconciles per cluster"),
                ("cpu_ms_per_reconcile", "CPU ms per reconcile"),
                ("requests_per_cluster", "API requests per cluster"),
                ("status_writes_per_cluster", "status writes per cluster"),
                ("operator_rss_mib", "operator RSS, MiB"),
            )
            if resync
        ]
        if r.get("audit"):
            au = r["audit"]
            lines.append(
                f"| {tag}: operator requests per cluster (apiserver audit), status writes, 409s | "
                f"{', '.join(f'{k}={v}' for k, v in au['requests_per_cluster'].items())}; "
                f"{au['status_writes_per_cluster']}, {au['conflicts_409']} |"
            )
    f = result.get("fairness")
    if f:
        lines.append(
            f"| fairness: small clusters ready p50/p99 idle vs during {f['big_cluster_workers']}-worker scale-up | "
            f"{f['idle_p50_s']}/{f['idle_p99_s']} s vs {f['busy_p50_s']}/{f['busy_p99_s']} s (p99 +{f['p99_penalty_s']} s) |"
        )
        lines.append(
            "| fairness: during the scale-up, operator CPU, status writes, API requests | "
            f"{f['busy_operator_cpu_s']} s, {f.get('busy_status_writes', '-')}, "
            f"{f.get('busy_requests', '-')} |"
        )
    ch = result.get("churn")
    if ch:
        lines.append(
            f"| churn ({ch['clusters']} clusters, {ch['waves']} waves): max convergence, duplicates, orphans | "
            f"{ch['max_convergence_s']} s, {ch['duplicate_pods']}, {ch['orphaned_pods']} |"
        )
    return "\n".join(lines)


def _kwok(r: dict[str, Any]) -> str:
    """The single-operator table's cell for KWOK's replays and the closed watchers."""
    k = r.get("kwok") or {}
    play = (
        f"{k.get('patches_per_pod')} / {k.get('pods_patched_twice')} / {k.get('failed_stages')}"
        if k
        else "-"
    )
    by = r.get("watchers_terminated_by_resource") or {}
    parts = ", ".join(f"{res} {n}" for res, n in by.items())
    return f"{play}; {r.get('watchers_terminated', '-')}" + (f" ({parts})" if parts else "")


def _budget(r: dict[str, Any]) -> str:
    """The single-operator table's cell for ``cpu_budget`` and the speed probe."""
    b = r.get("cpu_budget") or {}
    if not b:
        return "-"
    parts = ", ".join(f"{k} {v}" for k, v in (b.get("ms_per_pod") or {}).items())
    return (
        f"{b.get('total_ms_per_pod')} ({parts}) / {b.get('busy_share')} / "
        f"{r.get('speed_probe_s', '-')}"
    )


@contextlib.contextmanager
def bench_plane(workdir: Path, nodes: int, audit: bool = False) -> Iterator[Plane]:
    """A quiet local plane with ``nodes`` roomy KWOK nodes, stopped on exit. With ``audit`` its
    apiserver logs the requests of the operators' ServiceAccounts to ``workdir/audit.log``
    (scale_report.audit_policy)."""
    extra: tuple[str, ...] = ()
    if audit:
        policy = workdir / "audit-policy.json"
        policy.write_text(json.dumps(audit_policy()))
        extra = audit_apiserver_args(policy, workdir / "audit.log")
    plane = Plane(
        PlaneConfig(
            directory=workdir / "plane",
            nodes=nodes,
            node_cpu="256",
            node_memory="1Ti",
            unlimited=True,
            apiserver_args=extra,
            log=lambda _: None,
        )
    )
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", default="50x10,100x10,200x10")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--ceiling-pods",
        type=int,
        default=0,
        help="pods for the ceiling run (default: as many as the last size has)",
    )
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument(
        "--no-ceiling-services",
        dest="ceiling_services",
        action="store_false",
        help="skip the second ceiling run that has the clusters' head Services in place",
    )
    parser.add_argument(
        "--namespaces",
        type=int,
        default=1,
        help="spread each size's clusters over this many namespaces, round robin (at 10,000 "
        "clusters one namespace's 10,000 head Services slow the controller-manager)",
    )
    parser.add_argument("--fairness-workers", type=int, default=1000)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--churn-clusters", type=int, default=20)
    parser.add_argument("--churn-waves", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--resync-window",
        type=float,
        default=0,
        help="after each size converges, watch it this many seconds: operator CPU, reconciles "
        "and requests of the steady state (the periodic requeue); 0 skips it",
    )
    parser.add_argument(
        "--requeue-seconds",
        type=int,
        default=0,
        help="RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV for both operators (upstream's default: 300), "
        "so that a --resync-window covers whole requeue rounds",
    )
    parser.add_argument(
        "--operators",
        default="ours",
        help="comma list of NAME[:CONCURRENCY], NAME ours or go (the upstream Go operator "
        "v1.6.1); default concurrency: --concurrency for ours, 1 for go. E.g. ours,go,go:10",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="runs of every operator, interleaved (median shown)"
    )
    parser.add_argument("--kubeconfig", type=Path, default=None, help="use an existing cluster")
    parser.add_argument(
        "--shared-plane",
        action="store_true",
        help="run every phase on one plane, taking turns; by default each ceiling and each "
        "operator run gets a plane of its own, so that none runs after another's deletions",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="work in this directory and keep it: every plane's component logs (KWOK's among "
        "them), audit logs and operator logs stay there for a look after the run",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/scale.json"))
    args = parser.parse_args()
    try:
        configs = parse_operators(args.operators, args.concurrency)
    except ValueError as exc:
        parser.error(str(exc))
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.namespaces < 1:
        parser.error("--namespaces must be at least 1")
    if any(c.kind == "go" for c in configs):
        go_operator_binary()  # built before the plane starts: minutes on a cold cache
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            workdir = args.keep.resolve()
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.kubeconfig:
            result = asyncio.run(run_all(args, args.kubeconfig, None, workdir))
        elif args.shared_plane:
            with bench_plane(workdir, args.nodes, audit=True) as plane:
                result = asyncio.run(run_all(args, plane.kubeconfig, plane, workdir))
        else:
            result = asyncio.run(run_all(args, None, None, workdir))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    if len(configs) == 1:
        print(markdown(result))
    else:
        medians = {label: op["median"] for label, op in result["operators"].items()}
        print(comparison_markdown(configs, medians, args.runs, result.get("ceiling")))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
