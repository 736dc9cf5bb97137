"""``kuberay operator``: the operator process, with upstream's flags and configuration file.

Flags keep upstream's names and defaults so existing Deployments and Helm values work; when
``--config`` names a ``config.ray.io/v1alpha1 Configuration`` file, the file wins and the flags are
ignored, as upstream does, except ``--feature-gates`` and the ``--zap-*`` log level. Bad flags or a
bad file exit with code 2 and a message, never a traceback. The process exits 0 after SIGTERM/SIGINT
and 1 when it loses leadership (so that it restarts as a standby).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kuberay import __version__
from kuberay.api import constants as c
from kuberay.api import rbac_rules
from kuberay.api import validation as v
from kuberay.api.features import FeatureGates
from kuberay.api.webhook import handlers as webhook_handlers
from kuberay.builders.options import BuildOptions
from kuberay.controllers.crd_metrics import RayClusterMetrics, RayJobMetrics, RayServiceMetrics
from kuberay.controllers.mtls import register as register_mtls
from kuberay.controllers.networkpolicy import register as register_networkpolicy
from kuberay.controllers.raycluster import (
    RayClusterConfig,
    detect_cert_manager,
    detect_openshift,
)
from kuberay.controllers.raycluster import register as register_raycluster
from kuberay.controllers.raycronjob import RayCronJobConfig
from kuberay.controllers.raycronjob import register as register_raycronjob
from kuberay.controllers.rayjob import RayJobConfig
from kuberay.controllers.rayjob import register as register_rayjob
from kuberay.controllers.rayservice import RayServiceConfig
from kuberay.controllers.rayservice import register as register_rayservice
from kuberay.ray.http_client import HttpDashboardFactory, proxy_factory_for
from kuberay.runtime import logs
from kuberay.runtime.access import watchable_cluster_wide
from kuberay.runtime.client import KubeClient, KubeconfigError, Resource, auto_config
from kuberay.runtime.errors import ApiError, NotFound
from kuberay.runtime.manager import Manager, ManagerOptions
from kuberay.runtime.webhook import WebhookServer
from kuberay.schedulers import UnknownScheduler, get_scheduler

log = logging.getLogger("kuberay.operator")

DEFAULT_RECONCILE_CONCURRENCY = 8
SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass
class OperatorSettings:
    metrics_addr: str = ":8080"
    probe_addr: str = ":8082"
    enable_leader_election: bool = True
    leader_election_namespace: str = ""
    reconcile_concurrency: int = DEFAULT_RECONCILE_CONCURRENCY
    watch_namespace: list[str] = field(default_factory=list)
    log_stdout_encoder: str = "json"
    log_file_path: str = ""
    log_file_encoder: str = "json"
    log_level: str = "info"
    batch_scheduler: str = ""
    enable_batch_scheduler: bool = False
    use_kubernetes_proxy: bool = False
    enable_metrics: bool = False
    qps: float = 100.0
    burst: int = 200
    feature_gates: str = ""
    kubeconfig: str | None = None
    head_sidecar_containers: list[dict[str, Any]] = field(default_factory=list)
    worker_sidecar_containers: list[dict[str, Any]] = field(default_factory=list)
    default_container_envs: list[dict[str, Any]] = field(default_factory=list)
    default_pod_labels: dict[str, str] = field(default_factory=dict)
    default_pod_annotations: dict[str, str] = field(default_factory=dict)
    delete_rayjob_after_job_finishes: bool | None = None


_CONFIG_KEYS = {
    "metricsAddr": "metrics_addr",
    "probeAddr": "probe_addr",
    "enableLeaderElection": "enable_leader_election",
    "leaderElectionNamespace": "leader_election_namespace",
    "reconcileConcurrency": "reconcile_concurrency",
    "logStdoutEncoder": "log_stdout_encoder",
    "logFile": "log_file_path",
    "logFileEncoder": "log_file_encoder",
    "batchScheduler": "batch_scheduler",
    "enableBatchScheduler": "enable_batch_scheduler",
    "useKubernetesProxy": "use_kubernetes_proxy",
    "enableMetrics": "enable_metrics",
    "qps": "qps",
    "burst": "burst",
    "headSidecarContainers": "head_sidecar_containers",
    "workerSidecarContainers": "worker_sidecar_containers",
    "defaultContainerEnvs": "default_container_envs",
    "defaultPodLabels": "default_pod_labels",
    "defaultPodAnnotations": "default_pod_annotations",
    "deleteRayJobAfterJobFinishes": "delete_rayjob_after_job_finishes",
}
_IGNORED_CONFIG_KEYS = {
    "apiVersion",
    "kind",
    "featureGates",
}


class SettingsError(ValueError):
    """Bad flags, configuration file or kubeconfig: exit code 2."""


class Unreachable(RuntimeError):
    """The apiserver did not answer within STARTUP_WAIT_SECONDS: exit code 1 (as upstream's
    'unable to start manager'); the kubelet restarts the pod."""


# How long a starting operator waits for an apiserver that does not answer yet (back-off
# between tries), e.g. while a local control plane is still coming up; the environment
# variable KUBERAY_APISERVER_WAIT_SECONDS overrides it.
STARTUP_WAIT_SECONDS = 60.0


async def wait_for_apiserver(client: KubeClient, limit: float, stop: asyncio.Event) -> None:
    """GET /version until it answers, with exponential back-off (0.5 s doubling to 8 s);
    raises the last error after ``limit`` seconds. An answer of any status means the server is
    there (authorization problems surface on the first real request with their own message)."""
    deadline = time.monotonic() + limit
    delay = 0.5
    while True:
        try:
            await client.request("GET", "/version", timeout=5)
            return
        except ApiError as exc:
            if exc.status != 0:
                return
            if time.monotonic() + delay > deadline or stop.is_set():
                raise
            log.warning("apiserver not reachable yet; retrying", extra={"error": str(exc)})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 8.0)


def load_config_file(path: str, kubeconfig: str | None) -> OperatorSettings:
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SettingsError(f"cannot read --config {path}: {exc}") from exc
    if doc.get("kind") != "Configuration" or doc.get("apiVersion") != "config.ray.io/v1alpha1":
        raise SettingsError(
            f"{path}: expected apiVersion config.ray.io/v1alpha1, kind Configuration"
        )
    settings = OperatorSettings(kubeconfig=kubeconfig)
    for key, value in doc.items():
        if key == "watchNamespace":
            settings.watch_namespace = [n for n in str(value or "").split(",") if n]
        elif key in _CONFIG_KEYS:
            setattr(settings, _CONFIG_KEYS[key], value)
        elif key not in _IGNORED_CONFIG_KEYS:
            raise SettingsError(f"{path}: unknown field {key!r}")
    if isinstance(doc.get("featureGates"), dict):
        settings.feature_gates = ",".join(f"{k}={v}" for k, v in doc["featureGates"].items())
    return settings


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def version_text() -> str:
    """``kuberay-py <version> (KubeRay <API version>)``: this package and the upstream release
    whose API and behaviour it follows."""
    return f"kuberay-py {__version__} (KubeRay {c.KUBERAY_VERSION})"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "operator",
        help="run the operator",
        description="Runs the KubeRay operator: reconciles RayCluster, RayJob, RayService and "
        "RayCronJob objects. Flags and defaults are those of the Go operator.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    flag = p.add_argument
    flag(
        "--metrics-addr", default=":8080", help="address the Prometheus /metrics endpoint serves on"
    )
    flag(
        "--health-probe-bind-address",
        default=":8082",
        help="address of the /healthz and /readyz probe endpoints",
    )
    flag(
        "--enable-leader-election",
        type=_bool,
        default=True,
        nargs="?",
        const=True,
        help="elect one active replica through the ray-operator-leader Lease",
    )
    flag(
        "--leader-election-namespace",
        default="",
        help="namespace of the leader Lease; empty: the pod's own namespace",
    )
    flag(
        "--reconcile-concurrency",
        type=int,
        default=DEFAULT_RECONCILE_CONCURRENCY,
        help="objects each controller reconciles at the same time",
    )
    flag(
        "--watch-namespace",
        default="",
        help="comma-separated namespaces to watch; empty: every namespace",
    )
    flag(
        "--log-stdout-encoder",
        default="json",
        choices=["json", "console"],
        help="format of the log lines on standard output",
    )
    flag("--log-file-path", default="", help="also write logs to this file (rotated by size)")
    flag(
        "--log-file-encoder",
        default="json",
        choices=["json", "console"],
        help="format of the log lines in --log-file-path",
    )
    flag(
        "--batch-scheduler",
        default="",
        help="gang scheduler to integrate with: volcano, yunikorn, kai-scheduler or "
        "scheduler-plugins",
    )
    flag(
        "--enable-batch-scheduler",
        type=_bool,
        default=False,
        nargs="?",
        const=True,
        help="deprecated: the same as --batch-scheduler=volcano",
    )
    flag(
        "--forced-cluster-upgrade",
        type=_bool,
        default=False,
        nargs="?",
        const=True,
        help="deprecated and without effect; accepted so old manifests still start",
    )
    flag(
        "--use-kubernetes-proxy",
        type=_bool,
        default=False,
        nargs="?",
        const=True,
        help="reach Ray dashboards through the apiserver's service proxy",
    )
    flag(
        "--enable-metrics",
        type=_bool,
        default=False,
        nargs="?",
        const=True,
        help="export the per-object kuberay_* metrics of RayClusters, RayJobs and RayServices",
    )
    flag(
        "--feature-gates",
        default="",
        help="comma-separated Gate=true|false pairs, e.g. RayJobDeletionPolicy=true",
    )
    flag("--qps", type=float, default=100.0, help="sustained request rate to the apiserver (per s)")
    flag("--burst", type=int, default=200, help="requests allowed above --qps in a short burst")
    flag(
        "--config",
        default="",
        help="config.ray.io/v1alpha1 Configuration file; its fields take the place of the "
        "matching flags",
    )
    flag(
        "--kubeconfig",
        default=None,
        help="kubeconfig file; default: $KUBECONFIG, the in-cluster service account, then "
        "~/.kube/config",
    )
    # controller-runtime's zap flags, so upstream's manifests start unchanged: the level is
    # honoured; the rest shape Go's encoder and are accepted without effect.
    flag(
        "--zap-log-level",
        default="info",
        type=_zap_level,
        help="lowest level logged: debug, info, error, or a verbosity number (1+ = debug)",
    )
    flag(
        "--zap-devel",
        type=_bool,
        default=False,
        nargs="?",
        const=True,
        help="accepted for compatibility; no effect",
    )
    flag(
        "--zap-encoder",
        default="",
        choices=["", "json", "console"],
        help="accepted for compatibility; use --log-stdout-encoder",
    )
    flag("--zap-stacktrace-level", default="", help="accepted for compatibility; no effect")
    flag("--zap-time-encoding", default="", help="accepted for compatibility; no effect")
    flag("--version", action="version", version=version_text(), help="print the version and exit")
    p.set_defaults(func=cmd_operator)


def _zap_level(text: str) -> str:
    """zap's names, or an integer verbosity (a higher number logs more, 1 or more = debug)."""
    names = {"debug": "debug", "info": "info", "warn": "warning", "error": "error"}
    names.update({"dpanic": "critical", "panic": "critical", "fatal": "critical"})
    if text.lower() in names:
        return names[text.lower()]
    if text.isdigit():
        return "debug" if int(text) > 0 else "info"
    raise argparse.ArgumentTypeError(f"unrecognized level {text!r}")


def settings_from_args(args: argparse.Namespace) -> OperatorSettings:
    if args.config:
        settings = load_config_file(args.config, args.kubeconfig)
        # As upstream, --feature-gates and the log level still apply with --config (the Helm
        # chart passes the gates as a flag next to the file); gates in the file win.
        settings.feature_gates = settings.feature_gates or args.feature_gates
        settings.log_level = args.zap_log_level
        return settings
    if args.reconcile_concurrency < 1:
        raise SettingsError("--reconcile-concurrency must be at least 1")
    return OperatorSettings(
        metrics_addr=args.metrics_addr,
        probe_addr=args.health_probe_bind_address,
        enable_leader_election=args.enable_leader_election,
        leader_election_namespace=args.leader_election_namespace,
        reconcile_concurrency=args.reconcile_concurrency,
        watch_namespace=[n for n in args.watch_namespace.split(",") if n],
        log_stdout_encoder=args.log_stdout_encoder,
        log_file_path=args.log_file_path,
        log_file_encoder=args.log_file_encoder,
        log_level=args.zap_log_level,
        batch_scheduler=args.batch_scheduler,
        enable_batch_scheduler=args.enable_batch_scheduler,
        use_kubernetes_proxy=args.use_kubernetes_proxy,
        enable_metrics=args.enable_metrics,
        qps=args.qps,
        burst=args.burst,
        feature_gates=args.feature_gates,
        kubeconfig=args.kubeconfig,
    )


# Beyond upstream: above this many watched namespaces, resources the operator may list and
# watch cluster-wide get one filtered cluster-wide watch each (runtime.cache); per-namespace
# watches fit one HTTP/2 connection (100 streams) up to about this many namespaces.
MERGE_WATCHES_ABOVE = 4


def _merge_watches_above(env: dict[str, str] | os._Environ[str]) -> int:
    """``KUBERAY_MERGE_WATCHES_ABOVE`` (0 turns merging off), else ``MERGE_WATCHES_ABOVE``;
    a value that is not a whole number >= 0 is ignored with a warning."""
    raw = env.get("KUBERAY_MERGE_WATCHES_ABOVE", "")
    if not raw:
        return MERGE_WATCHES_ABOVE
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        log.warning("KUBERAY_MERGE_WATCHES_ABOVE=%r is not a whole number >= 0; ignored", raw)
        return MERGE_WATCHES_ABOVE
    return value


def _lease_namespace(settings: OperatorSettings) -> str:
    if settings.leader_election_namespace:
        return settings.leader_election_namespace
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SA_NAMESPACE_FILE.exists():
        return SA_NAMESPACE_FILE.read_text().strip()
    return "default"


async def require_kubernetes(client: KubeClient, minimum: tuple[int, int], why: str) -> None:
    """Refuses to start against an API server older than ``minimum`` (upstream's startup check)."""
    version = await client.request("GET", "/version")
    have = (int(version["major"]), int("".join(ch for ch in version["minor"] if ch.isdigit())))
    if have < minimum:
        raise SettingsError(
            f"{why} needs Kubernetes {minimum[0]}.{minimum[1]} or newer; the API server is "
            f"{version.get('gitVersion', '.'.join(map(str, have)))}"
        )


async def require_api(client: KubeClient, res: Resource, why: str) -> None:
    """Refuses to start when ``res`` is not served (its CRD is not installed): upstream's
    Volcano plugin checks this too, and every reconcile would otherwise fail on it."""
    try:
        found = await client.request("GET", f"/apis/{res.group}/{res.version}")
    except NotFound:
        found = {}
    if not any(r.get("name") == res.plural for r in found.get("resources") or []):
        raise SettingsError(
            f"{why} needs the {res.plural}.{res.group}/{res.version} API, which this cluster "
            "does not serve: install it first"
        )


async def run(settings: OperatorSettings, stop: asyncio.Event | None = None) -> int:  # noqa: C901, PLR0912, PLR0915
    try:
        gates = FeatureGates.parse(settings.feature_gates)
    except ValueError as exc:
        raise SettingsError(f"--feature-gates: {exc}") from exc
    problem = v.validate_operator_options(
        gates, settings.batch_scheduler, settings.enable_batch_scheduler
    )
    if problem:
        raise SettingsError(problem)
    try:
        # The deprecated --enable-batch-scheduler meant Volcano.
        legacy = "volcano" if settings.enable_batch_scheduler else ""
        scheduler = get_scheduler(settings.batch_scheduler or legacy)
    except UnknownScheduler as exc:
        raise SettingsError(str(exc)) from exc
    try:
        config = auto_config(settings.kubeconfig)
    except KubeconfigError as exc:
        raise SettingsError(f"kubeconfig: {exc}") from exc
    config.qps, config.burst = settings.qps, settings.burst
    # HTTP/2 to the apiserver (a few multiplexed connections) unless switched off; HTTP/1.1
    # holds one connection per open watch. Not a flag: the Go operator has no such flag.
    config.http2 = os.environ.get("KUBERAY_APISERVER_HTTP2", "").lower() != "false"
    build = BuildOptions.from_env(
        os.environ,
        default_container_envs=tuple(settings.default_container_envs),
        default_pod_labels=dict(settings.default_pod_labels),
        default_pod_annotations=dict(settings.default_pod_annotations),
        head_sidecar_containers=tuple(settings.head_sidecar_containers),
        worker_sidecar_containers=tuple(settings.worker_sidecar_containers),
        multi_host_indexing=gates.enabled("RayMultiHostIndexing"),
        mtls=gates.enabled("RayClusterMTLS"),
        history_server=gates.enabled("RayClusterHistoryServer"),
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with KubeClient(config, user_agent=f"kuberay-operator/{c.KUBERAY_VERSION}") as client:
        try:
            limit = float(os.environ.get("KUBERAY_APISERVER_WAIT_SECONDS", STARTUP_WAIT_SECONDS))
            await wait_for_apiserver(client, limit, stop)
        except ApiError as exc:
            raise Unreachable(f"cannot reach the apiserver at {config.server}: {exc}") from exc
        merge_above = _merge_watches_above(os.environ)
        cluster_wide: frozenset[tuple[str, str]] = frozenset()
        if merge_above and len(set(settings.watch_namespace)) > merge_above:
            cluster_wide = await watchable_cluster_wide(client, rbac_rules.watched_resources())
            log.info(
                "watching %d namespaces: one cluster-wide watch for %d resource(s)",
                len(set(settings.watch_namespace)),
                len(cluster_wide),
            )
        mgr = Manager(
            client,
            ManagerOptions(
                metrics_addr=settings.metrics_addr,
                probe_addr=settings.probe_addr,
                leader_election=settings.enable_leader_election,
                leader_election_namespace=_lease_namespace(settings),
                merge_watches_above=merge_above,
                cluster_wide=cluster_wide,
            ),
        )
        rc = RayClusterConfig.from_env(
            os.environ,
            build=build,
            gates=gates,
            concurrency=settings.reconcile_concurrency,
            scheduler=scheduler,
            use_routes=await detect_openshift(client),
            cert_manager=gates.enabled("RayClusterMTLS") and await detect_cert_manager(client),
        )
        clusters = register_raycluster(mgr, rc, settings.watch_namespace or None)
        if rc.cert_manager:
            register_mtls(
                mgr, build, clusters.clusters, clusters.pods, settings.watch_namespace or None
            )
        elif gates.enabled("RayClusterMTLS"):
            # upstream: main's check; tlsOptions clusters are then refused by validation.
            log.info("cert-manager API not found; mTLS controller disabled")
        if settings.enable_metrics:
            mgr.metrics.registry.register(RayClusterMetrics(clusters.clusters))
        dashboards = (
            proxy_factory_for(config) if settings.use_kubernetes_proxy else HttpDashboardFactory()
        )
        rj = RayJobConfig.from_env(
            os.environ,
            build=build,
            gates=gates,
            concurrency=settings.reconcile_concurrency,
            use_kubernetes_proxy=settings.use_kubernetes_proxy,
            apiserver=config.server,
            scheduler=scheduler,
        )
        if settings.delete_rayjob_after_job_finishes is not None:
            rj.delete_rayjob_after_finishes = settings.delete_rayjob_after_job_finishes
        if scheduler is not None:
            for res in scheduler.requires:
                await require_api(client, res, f"--batch-scheduler={scheduler.name}")
        if gates.enabled("SidecarSubmitterRestart"):
            await require_kubernetes(client, (1, 35), "the SidecarSubmitterRestart feature gate")
        jobs = register_rayjob(mgr, rj, settings.watch_namespace or None, dashboards)
        if settings.enable_metrics:
            job_metrics = RayJobMetrics(jobs.rayjobs)
            jobs.on_attempt_end = job_metrics.observe_execution
            mgr.metrics.registry.register(job_metrics)
        rs = RayServiceConfig(
            build=build,
            gates=gates,
            concurrency=settings.reconcile_concurrency,
            zero_downtime=os.environ.get(c.ENV_ENABLE_ZERO_DOWNTIME, "").lower() != "false",
            use_kubernetes_proxy=settings.use_kubernetes_proxy,
            apiserver=config.server,
        )
        services = register_rayservice(mgr, rs, settings.watch_namespace or None, dashboards)
        if settings.enable_metrics:
            mgr.metrics.registry.register(RayServiceMetrics(services.rayservices))
        if gates.enabled("RayClusterNetworkPolicy"):
            register_networkpolicy(
                mgr, settings.watch_namespace or None, settings.reconcile_concurrency
            )
        if gates.enabled("RayCronJob"):
            register_raycronjob(
                mgr, RayCronJobConfig(gates=gates), settings.watch_namespace or None
            )
        log.info(
            "operator starting",
            extra={
                "version": c.KUBERAY_VERSION,
                "watchNamespaces": settings.watch_namespace or "all",
                "reconcileConcurrency": settings.reconcile_concurrency,
            },
        )
        webhook = None
        if os.environ.get(c.ENV_ENABLE_WEBHOOKS, "").lower() == "true":
            webhook = WebhookServer(webhook_handlers(gates=gates))
            port = await webhook.start()
            log.info("validating webhook serving", extra={"port": port})
        try:
            return await mgr.run(stop)
        finally:
            await dashboards.close()
            if webhook is not None:
                await webhook.stop()


def cmd_operator(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
        logs.setup(
            settings.log_stdout_encoder,
            settings.log_level,
            file_path=settings.log_file_path or None,
            file_encoder=settings.log_file_encoder,
        )
        return asyncio.run(run(settings))
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Unreachable as exc:
        log.error(str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 1
