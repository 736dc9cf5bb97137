"""JSON log lines carry upstream's zap keys. The expected shapes were read from the Go operator
v1.6.1's own output (``--log-stdout-encoder=json``) for a RayCluster reconcile and an invalid
spec: ``{"level","ts","logger","msg","RayCluster":{"name","namespace"},"reconcileID",...}`` and,
for errors, ``error`` plus ``stacktrace``."""

from __future__ import annotations

import json
import logging
import re
import uuid

from kuberay.runtime.controller import reconcile_context
from kuberay.runtime.logs import JSONFormatter, zap_time


def _record(level: int, msg: str, exc: BaseException | None = None, **extra: object) -> str:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    rec = logging.LogRecord("controllers.RayCluster", level, __file__, 7, msg, (), exc_info)
    rec.__dict__.update(extra)
    return JSONFormatter().format(rec)


def test_reconcile_line_has_upstream_keys_in_order() -> None:
    rid = str(uuid.uuid4())
    token = reconcile_context.set(
        {
            "controller": "raycluster-controller",
            "kind": "RayCluster",
            "namespace": "ns",
            "name": "c",
            "reconcileID": rid,
        }
    )
    try:
        line = json.loads(_record(logging.INFO, "Created service for RayCluster", svc="c-head"))
    finally:
        reconcile_context.reset(token)
    assert list(line)[:6] == ["level", "ts", "logger", "msg", "RayCluster", "reconcileID"]
    assert line["level"] == "info"
    assert line["RayCluster"] == {"name": "c", "namespace": "ns"}
    assert line["reconcileID"] == rid
    assert line["controller"] == "raycluster-controller"
    assert line["svc"] == "c-head"
    assert "name" not in line
    assert "namespace" not in line


def test_timestamp_is_zap_iso8601_utc_millis() -> None:
    assert zap_time(0.1234) == "1970-01-01T00:00:00.123Z"
    line = json.loads(_record(logging.INFO, "x"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"])


def test_levels_use_zap_names() -> None:
    assert json.loads(_record(logging.WARNING, "w"))["level"] == "warn"
    assert json.loads(_record(logging.DEBUG, "d"))["level"] == "debug"


def test_error_with_exception_has_error_text_and_stacktrace() -> None:
    try:
        raise ValueError("worker group g has minReplicas 3 greater than maxReplicas 2")
    except ValueError as exc:
        line = json.loads(_record(logging.ERROR, "The RayCluster spec is invalid", exc))
    assert line["level"] == "error"
    assert line["error"] == "worker group g has minReplicas 3 greater than maxReplicas 2"
    assert "Traceback" in line["stacktrace"]
    assert "ValueError" in line["stacktrace"]


def test_error_without_exception_still_says_where() -> None:
    line = json.loads(_record(logging.ERROR, "failed"))
    assert "error" not in line
    assert f"{__file__}:7" in line["stacktrace"]


def test_outside_a_reconcile_no_object_keys() -> None:
    line = json.loads(_record(logging.INFO, "starting"))
    assert set(line) == {"level", "ts", "logger", "msg"}
