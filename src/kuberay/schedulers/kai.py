"""NVIDIA KAI Scheduler: pods carry its scheduler name and the cluster's queue label.

KAI's own pod grouper builds the gang from the pods' owner (the RayCluster), so nothing is
created here. A cluster without the ``kai.scheduler/queue`` label is logged: KAI leaves such
pods pending, and the reason belongs where an operator of the cluster will look.
"""

from __future__ import annotations

import logging
from typing import Any

from kuberay.schedulers import common as sc

NAME = "kai-scheduler"
LABEL_QUEUE = "kai.scheduler/queue"

log = logging.getLogger("kuberay.schedulers.kai")


class KaiScheduler(sc.NoJobLevelObjects):
    name = NAME

    async def on_submission(self, client: Any, cluster: dict[str, Any]) -> None:
        """Nothing to create: KAI's pod grouper works from the pods."""

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        queue = sc.labels_of(cluster).get(LABEL_QUEUE)
        pod.setdefault("spec", {})["schedulerName"] = NAME
        if queue:
            pod.setdefault("metadata", {}).setdefault("labels", {})[LABEL_QUEUE] = queue
        else:
            meta = sc.as_dict(cluster.get("metadata"))
            log.info(
                "RayCluster %s/%s has no %s label; KAI keeps its pods pending",
                meta.get("namespace"),
                meta.get("name"),
                LABEL_QUEUE,
            )
