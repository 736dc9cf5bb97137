"""Small shape helpers shared by the scheduler plugins (plain dicts in, never raising)."""

from __future__ import annotations

from typing import Any

from kuberay.runtime.client import Resource


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def job_pod_template(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, spec) of a batch Job's pod template, created if absent: where scheduler
    fields go for the pods the Job will make."""
    template = job.setdefault("spec", {}).setdefault("template", {})
    return template.setdefault("metadata", {}), template.setdefault("spec", {})


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return as_dict(as_dict(obj.get("metadata")).get("labels"))


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return as_dict(as_dict(obj.get("metadata")).get("annotations"))


class NoJobLevelObjects:
    """For plugins that keep no object for a RayJob's gang: nothing to prepare or release, and
    by default no metadata either (the cluster's pods get theirs from the RayCluster, which
    carries the RayJob's labels)."""

    requires: tuple[Resource, ...] = ()

    async def on_job_submission(
        self, client: Any, job: dict[str, Any], submitter_template: dict[str, Any] | None
    ) -> None:
        del client, job, submitter_template

    async def on_job_completion(self, client: Any, job: dict[str, Any]) -> bool:
        del client, job
        return False

    def add_job_metadata(
        self,
        job: dict[str, Any],
        child: dict[str, Any],
        group_name: str,
        submitter_template: dict[str, Any],
    ) -> None:
        del job, child, group_name, submitter_template
