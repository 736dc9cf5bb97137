"""Batch-scheduler plugins (Volcano, YuniKorn, scheduler-plugins, KAI): the hook points.

The RayCluster controller calls a plugin at two points, as upstream does: once per reconcile
before pods are created (``on_submission``: create or update a PodGroup and the like), and on
every pod it builds (``add_pod_metadata``: scheduler name, group annotations/labels). The RayJob
controller calls ``add_job_metadata`` on the RayCluster and the submitter Job of a K8sJobMode
job. With no
``--batch-scheduler`` there is no plugin and nothing changes. An unknown name is a startup
error, never a silent fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kuberay.runtime.client import KubeClient, Resource


class BatchScheduler(Protocol):
    name: str
    # APIs that must be served for the plugin to work: checked once at startup, so a missing
    # CRD is a clear refusal to start rather than a failure on every reconcile.
    requires: tuple[Resource, ...]

    async def on_submission(self, client: KubeClient, cluster: dict[str, Any]) -> None:
        """Prepares scheduler objects before the cluster's pods are created."""
        ...

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        """Adds scheduler-specific fields to a pod about to be created (mutates ``pod``)."""
        ...

    def add_job_metadata(
        self,
        job: dict[str, Any],
        child: dict[str, Any],
        group_name: str,
        submitter_template: dict[str, Any],
    ) -> None:
        """Adds scheduler fields to what a K8sJobMode RayJob creates (mutates ``child``): its
        RayCluster (``group_name`` "") and its submitter Job (``SUBMITTER_GROUP``).
        ``submitter_template`` is the submitter's pod template, so a gang can include it."""
        ...

    async def on_job_submission(
        self,
        client: KubeClient,
        job: dict[str, Any],
        submitter_template: dict[str, Any] | None,
    ) -> None:
        """Prepares a RayJob-level gang before the job's cluster is created (a RayJob that
        brings its own cluster spec; ``submitter_template`` is None without a submitter pod)."""
        ...

    async def on_job_completion(self, client: KubeClient, job: dict[str, Any]) -> bool:
        """Releases what the RayJob's gang still reserves once it ended, retried or
        suspended; True when something changed (reported as BatchSchedulerCleanedUp)."""
        ...


SUBMITTER_GROUP = "submittergroup"


SchedulerFactory = Callable[[], BatchScheduler]


def _registry() -> dict[str, SchedulerFactory]:
    # Imported here: the plugins import this package's helpers.
    from kuberay.schedulers.kai import KaiScheduler
    from kuberay.schedulers.scheduler_plugins import SchedulerPluginsScheduler
    from kuberay.schedulers.volcano import VolcanoScheduler
    from kuberay.schedulers.yunikorn import YuniKornScheduler

    return {
        "kai-scheduler": KaiScheduler,
        "scheduler-plugins": SchedulerPluginsScheduler,
        "volcano": VolcanoScheduler,
        "yunikorn": YuniKornScheduler,
    }


class UnknownScheduler(ValueError):
    pass


def get_scheduler(name: str) -> BatchScheduler | None:
    if not name or name == "default":
        return None
    registry = _registry()
    factory = registry.get(name)
    if factory is None:
        known = ", ".join(sorted(registry))
        raise UnknownScheduler(f"unsupported --batch-scheduler {name!r} (available: {known})")
    return factory()
