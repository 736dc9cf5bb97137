"""A real Prometheus beside the dev plane, scraping what a cluster's Prometheus would scrape.

Scrape jobs, with the labels a ServiceMonitor for the operator and Ray's documented PodMonitors
for head and worker pods would give, so that the dashboards and alert rules in ``deploy/`` run
here unchanged:

- ``kuberay-operator``: the operator's ``/metrics`` on the host (static targets; the operator runs
  outside the plane), labels ``job``, ``namespace``, ``service``, honouring the scraped labels
  as the chart's ServiceMonitor does;
- ``ray-head`` and ``ray-workers``: every pod with ``ray.io/node-type`` head or worker and a
  container port named ``metrics``, found through the plane's apiserver (pod service
  discovery, with the admin client certificate), labels ``namespace``, ``pod``, ``container``
  and ``ray_io_cluster``. On KWOK the pods do not run, so these targets are down (``up == 0``);
  on the process runtime they are real Ray processes.

Invariants and failure modes:
- The binaries come from the versioned cache (built on demand from ``controlplane/prometheus``).
- The child dies with its parent (``PR_SET_PDEATHSIG``); ``stop()`` is bounded (SIGTERM, then
  SIGKILL), so a test session never leaves it behind.
- ``start()`` returns only when ``/-/ready`` answers, or raises ``PlaneError`` with the log tail.
- The configuration is written as JSON (a subset of YAML): no YAML writer is needed, and what is
  written is exactly what was computed.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries
from kuberay.devenv.pki import ADMIN
from kuberay.devenv.plane import Plane, PlaneError, _terminate, free_port, spawn_logged

OPERATOR_JOB = "kuberay-operator"
HEAD_JOB = "ray-head"
WORKER_JOB = "ray-workers"
# Where `kuberay operator` serves metrics by default (upstream's --metrics-addr default).
DEFAULT_OPERATOR_TARGET = "127.0.0.1:8080"


def _ray_pod_job(plane: Plane, job: str, node_type: str, interval: str) -> dict[str, Any]:
    """A scrape job equivalent to a PodMonitor selecting ``ray.io/node-type=<node_type>`` pods
    on their ``metrics`` port, with Ray's documented ``ray_io_cluster`` relabelling."""
    pki = plane.pki
    return {
        "job_name": job,
        "scrape_interval": interval,
        "kubernetes_sd_configs": [
            {
                "role": "pod",
                "api_server": plane.server,
                "tls_config": {
                    "ca_file": str(pki.ca_cert),
                    "cert_file": str(pki.client_cert(ADMIN)),
                    "key_file": str(pki.client_key(ADMIN)),
                },
            }
        ],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_ray_io_node_type"],
                "regex": node_type,
                "action": "keep",
            },
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": "metrics",
                "action": "keep",
            },
            *(
                {"source_labels": [f"__meta_kubernetes_{source}"], "target_label": target}
                for source, target in (
                    ("namespace", "namespace"),
                    ("pod_name", "pod"),
                    ("pod_container_name", "container"),
                    ("pod_label_ray_io_cluster", "ray_io_cluster"),
                )
            ),
        ],
    }


def config(
    plane: Plane,
    *,
    operator_targets: Sequence[str] = (DEFAULT_OPERATOR_TARGET,),
    interval: str = "5s",
    rule_files: Iterable[Path] = (),
    operator_namespace: str = "ray-system",
) -> dict[str, Any]:
    """The Prometheus configuration for ``plane`` (a dict; written as JSON)."""
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {
                "job_name": OPERATOR_JOB,
                "scrape_interval": interval,
                # As the chart's ServiceMonitor (honorLabels: true): the kuberay_* series carry
                # the namespace of the object they describe, which must win over the target's.
                "honor_labels": True,
                "static_configs": [
                    {
                        "targets": list(operator_targets),
                        "labels": {"namespace": operator_namespace, "service": OPERATOR_JOB},
                    }
                ],
            },
            _ray_pod_job(plane, HEAD_JOB, "head", interval),
            _ray_pod_job(plane, WORKER_JOB, "worker", interval),
        ],
    }


class Prometheus:
    """One Prometheus process for one plane; ``with Prometheus(plane) as prom:`` or start/stop."""

    def __init__(
        self,
        plane: Plane,
        *,
        operator_targets: Sequence[str] = (DEFAULT_OPERATOR_TARGET,),
        interval: str = "5s",
        rule_files: Iterable[Path] = (),
        port: int = 0,
    ) -> None:
        self.plane = plane
        self.dir = plane.dir / "prometheus"
        self.port = port or free_port()
        self.settings = config(
            plane, operator_targets=operator_targets, interval=interval, rule_files=rule_files
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.plane.logs / "prometheus.log"

    def __enter__(self) -> Prometheus:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> None:
        binary = binaries.prometheus_binaries()["prometheus"]
        shutil.rmtree(self.dir / "data", ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        config_file = self.dir / "prometheus.yml"
        config_file.write_text(json.dumps(self.settings, indent=2))
        argv = [
            str(binary),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1d",
        ]
        self.proc = spawn_logged(argv, self.log_path, self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PlaneError(
                    f"prometheus exited with code {self.proc.returncode}; log {self.log_path}:\n"
                    + self._tail()
                )
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise PlaneError(f"prometheus was not ready within {timeout:.0f}s:\n{self._tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc, 10.0)
            self.proc = None

    def _tail(self, lines: int = 25) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>``; returns ``data`` or raises with Prometheus's error."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (or matrix) as Prometheus returns it."""
        data = self.api("query", query=expr)
        result = data["result"]
        return result if isinstance(result, list) else [result]

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["activeTargets"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])


def dashboard_panels(dashboard: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(title, PromQL queries) of every Grafana panel that has queries, rows' panels included."""
    out: list[tuple[str, list[str]]] = []
    panels = list(dashboard.get("panels") or [])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels") or [])
        exprs = [str(t["expr"]) for t in panel.get("targets") or [] if t.get("expr")]
        if exprs:
            out.append((str(panel.get("title")), exprs))
    return out


def grafana_substitute(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's ``$var``/``${var}``/``${var:format}`` replaced from ``values``
    (plus ``$__rate_interval`` 30s, ``$__interval`` 5s, ``$__range`` 5m unless given), as
    Grafana does before sending a panel's query to Prometheus."""
    known = {"__rate_interval": "30s", "__interval": "5s", "__range": "5m", **values}
    return re.sub(r"\$\{?(\w+)(?::\w+)?\}?", lambda m: known.get(m.group(1), m.group(0)), expr)


async def panels_without_data(
    prom: Prometheus,
    dashboard: dict[str, Any],
    values: dict[str, str],
    *,
    timeout: float,
    interval: float = 2.0,
) -> list[str]:
    """Panels of ``dashboard`` none of whose queries returns data within ``timeout`` (all
    panels are polled at once), as ``"<title>: <query> | <query>"`` lines; empty when every panel
    shows something. A panel may have one query for a state the workload does not reach."""

    async def shows_data(exprs: list[str]) -> bool:
        for expr in exprs:
            if await asyncio.to_thread(prom.query, grafana_substitute(expr, values)):
                return True
        return False

    async def check(title: str, exprs: list[str]) -> str:
        deadline = time.monotonic() + timeout
        while not await shows_data(exprs):
            if time.monotonic() >= deadline:
                return f"{title}: " + " | ".join(grafana_substitute(e, values) for e in exprs)
            await asyncio.sleep(interval)
        return ""

    found = await asyncio.gather(*(check(t, e) for t, e in dashboard_panels(dashboard)))
    return [line for line in found if line]
