"""RayCronJob reconciler (gate RayCronJob, alpha): creates a RayJob per schedule tick
(upstream: ray-operator/controllers/ray/raycronjob_controller.go).

Invariants and failure modes:
- One RayJob per tick, even across crashes: the child's name is derived from the tick
  (``<cron>-<unix minutes>``), so re-running a pass after a crash between the create and the
  ``lastScheduleTime`` write finds the child (AlreadyExists) instead of making a second one.
- Missed ticks (operator down) are caught up one per pass, oldest first, as upstream.
- The schedule is evaluated in ``spec.timeZone`` (IANA, from the bundled tzdata) or the
  operator's local zone; a wall-clock time skipped by a DST jump is never scheduled and a
  repeated one is scheduled once (the first occurrence).
- An invalid spec gets a Warning event and is not retried; a suspended RayCronJob gets a Normal
  event and is not requeued (a spec change brings it back).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import validation as v
from kuberay.api.constants import RAYCRONJOBS as RAYCRONJOBS
from kuberay.api.constants import RAYJOBS
from kuberay.api.features import FeatureGates
from kuberay.api.k8svalidation import parse_go_duration
from kuberay.api.raycronjob import RayCronJob
from kuberay.controllers.reconcile import fetch_working_copy
from kuberay.runtime import rfc3339
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import KubeClient
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.errors import AlreadyExists
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import Obj

log = logging.getLogger("kuberay.controllers.raycronjob")


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    (0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_SEARCH_YEARS = 5


def _values(text: str, low: int, high: int, names: dict[str, int]) -> tuple[set[int], bool]:
    """The values a field allows and whether it was written with ``*``/``?`` (robfig's star)."""
    out: set[int] = set()
    star = False
    for part in text.split(","):
        range_part, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if range_part in ("*", "?"):
            start, end = low, high
            star = star or not step_text
        else:
            first, dash, last = range_part.partition("-")
            start_value = names.get(first.lower()) if not first.isdigit() else int(first)
            if start_value is None:
                raise ValueError(f"bad cron value {first!r}")
            start = start_value
            if dash:
                end_value = names.get(last.lower()) if not last.isdigit() else int(last)
                if end_value is None:
                    raise ValueError(f"bad cron value {last!r}")
                end = end_value
            else:
                end = high if step_text else start
        out.update(range(start, end + 1, step))
    return out, star


@dataclass(frozen=True)
class Schedule:
    """A parsed standard cron expression (or descriptor) in one time zone."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool
    dow_star: bool
    zone: dt.tzinfo
    every: float | None = None

    @classmethod
    def parse(cls, text: str, zone: dt.tzinfo) -> Schedule:
        text = text.strip()
        if text.startswith("@every "):
            seconds = parse_go_duration(text[len("@every ") :])
            empty: frozenset[int] = frozenset()
            return cls(empty, empty, empty, empty, empty, True, True, zone, every=seconds)
        text = _DESCRIPTORS.get(text, text)
        fields = text.split()
        if len(fields) != 5:
            raise ValueError(f"expected 5 fields: {text!r}")
        parsed = [
            _values(f, lo, hi, names) for f, (lo, hi, names) in zip(fields, _FIELDS, strict=True)
        ]
        weekdays = {d % 7 for d in parsed[4][0]}
        return cls(
            frozenset(parsed[0][0]),
            frozenset(parsed[1][0]),
            frozenset(parsed[2][0]),
            frozenset(parsed[3][0]),
            frozenset(weekdays),
            parsed[2][1],
            parsed[4][1],
            zone,
        )

    def _day_matches(self, day: dt.date) -> bool:
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def _candidates(self, start: dt.datetime) -> Iterator[dt.datetime]:
        day = start.date()
        for _ in range(366 * _SEARCH_YEARS):
            if day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        yield dt.datetime(day.year, day.month, day.day, hour, minute)
            day += dt.timedelta(days=1)

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        """The first tick strictly after ``after`` (an aware datetime), in UTC; None if none."""
        if self.every is not None:
            step = max(self.every, 1.0)
            return (after + dt.timedelta(seconds=step)).replace(microsecond=0)
        local = after.astimezone(self.zone)
        for naive in self._candidates(local.replace(tzinfo=None)):
            aware = naive.replace(tzinfo=self.zone, fold=0)
            # A wall-clock time that does not exist (spring forward) does not round-trip.
            if aware.astimezone(dt.UTC).astimezone(self.zone).replace(tzinfo=None) != naive:
                continue
            if aware > after:
                return aware.astimezone(dt.UTC)
        return None


def _zone(name: str | None) -> dt.tzinfo:
    if name:
        return zoneinfo.ZoneInfo(name)
    local = dt.datetime.now().astimezone().tzinfo
    return local if local is not None else dt.UTC


def child_name(cron_name: str, tick: dt.datetime) -> str:
    return f"{cron_name}-{int(tick.timestamp()) // 60}"


def build_child(cron: Obj, tick: dt.datetime) -> Obj:
    meta = cron["metadata"]
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RAYJOB,
        "metadata": {
            "name": child_name(meta["name"], tick),
            "namespace": meta.get("namespace"),
            "labels": {c.LABEL_CRONJOB_NAME: meta["name"]},
            "annotations": {
                c.ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP: rfc3339.format_datetime(tick)
            },
            "ownerReferences": [
                {
                    "apiVersion": c.API_VERSION,
                    "kind": c.KIND_RAYCRONJOB,
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": cron["spec"]["jobTemplate"],
    }


@dataclass
class RayCronJobConfig:
    gates: FeatureGates = field(default_factory=FeatureGates)
    concurrency: int = 4
    clock: Callable[[], float] = time.time


class RayCronJobReconciler:
    def __init__(
        self, mgr: Manager, config: RayCronJobConfig, *, namespaces: list[str] | None = None
    ) -> None:
        self.client: KubeClient = mgr.client
        self.config = config
        self.recorder: EventRecorder = mgr.recorder(c.RECORDER_RAYCRONJOB)
        self.crons: ResourceCache = mgr.cache(RAYCRONJOBS, namespaces=namespaces)
        ctrl = mgr.controller("raycronjob", self.reconcile, concurrency=config.concurrency)
        ctrl.for_(self.crons)
        self.controller = ctrl

    async def reconcile(self, req: Request) -> Result | None:
        # A RayCronJob has no managedBy and nothing to clean up when it goes away.
        cron = fetch_working_copy(
            self.crons, req, c.KIND_RAYCRONJOB, honour_managed_by=False, skip_deleting=True
        )
        if cron is None:
            return None
        try:
            model = RayCronJob.model_validate(cron)
            err = v.validate_raycronjob(model, self.config.gates)
        except ValidationError as exc:
            err = f"invalid RayCronJob: {exc}"
        if err:
            self.recorder.event(cron, WARNING, c.EVENT_INVALID_RAYCRONJOB_SPEC, err, "Validate")
            return None
        spec = cron["spec"]
        if spec.get("suspend"):
            self.recorder.event(
                cron, NORMAL, c.EVENT_SUSPENDED_RAYCRONJOB, "RayCronJob is suspended", "Suspend"
            )
            return None
        schedule = Schedule.parse(spec["schedule"], _zone(spec.get("timeZone")))
        status = cron.get("status") or {}
        last = rfc3339.parse_datetime(status.get("lastScheduleTime")) or rfc3339.parse_datetime(
            cron["metadata"].get("creationTimestamp")
        )
        now = dt.datetime.fromtimestamp(self.config.clock(), dt.UTC)
        tick = schedule.next_after(last or now)
        if tick is None:
            return None
        if tick > now:
            return Result(requeue_after=max((tick - now).total_seconds(), 0.001))
        child = build_child(cron, tick)
        try:
            await self.client.create(RAYJOBS, child, cron["metadata"].get("namespace"))
        except AlreadyExists:
            log.info("RayJob %s already exists", child["metadata"]["name"])
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_RAYCRONJOB,
            "metadata": {
                "name": cron["metadata"]["name"],
                "namespace": cron["metadata"].get("namespace"),
                "resourceVersion": cron["metadata"]["resourceVersion"],
            },
            "spec": spec,
            "status": {**status, "lastScheduleTime": rfc3339.format_datetime(tick)},
        }
        await self.client.update_status(RAYCRONJOBS, body)
        following = schedule.next_after(tick)
        if following is None:
            return None
        return Result(requeue_after=max((following - now).total_seconds(), 0.001))


def register(
    mgr: Manager, config: RayCronJobConfig, namespaces: list[str] | None = None
) -> RayCronJobReconciler:
    return RayCronJobReconciler(mgr, config, namespaces=namespaces)
