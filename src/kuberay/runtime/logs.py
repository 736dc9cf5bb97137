"""Logging setup: JSON (default, as upstream's zap) or console lines, with reconcile context.

Every record logged inside a reconcile carries the controller, namespace, name and reconcile id
(from ``controller.reconcile_context``) without the reconciler passing them around. The
optional log file rotates by size only (upstream also drops files older than 30 days; old
files here are bounded by count instead).
"""

from __future__ import annotations

import datetime as dt
import logging
import logging.handlers
import sys
from pathlib import Path
from typing import Any

import orjson

from kuberay.runtime.controller import reconcile_context

_STD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JSONFormatter(logging.Formatter):
    """One JSON object per record with the keys of upstream's zap production encoder, so log
    queries written for the Go operator keep working: ``level`` (lower case), ``ts`` (ISO 8601,
    milliseconds, UTC), ``logger``, ``msg``; inside a reconcile the object as
    ``{"<Kind>": {"name", "namespace"}}``, ``reconcileID`` (a UUID) and ``controller``; extra
    fields as given; for failures ``error`` (the error's text) and ``stacktrace``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "level": _LEVELS.get(record.levelno, record.levelname.lower()),
            "ts": zap_time(record.created),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = reconcile_context.get()
        if ctx:
            obj = {"name": ctx.get("name", ""), "namespace": ctx.get("namespace", "")}
            out[ctx.get("kind") or "object"] = obj
            out["reconcileID"] = ctx.get("reconcileID", "")
            out["controller"] = ctx.get("controller", "")
        for key, value in record.__dict__.items():
            if key not in _STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out.setdefault("error", str(exc) or type(exc).__name__)
            out["stacktrace"] = self.formatException(record.exc_info)
        elif record.levelno >= logging.ERROR:
            out["stacktrace"] = f"{record.funcName}\n\t{record.pathname}:{record.lineno}"
        return orjson.dumps(out, default=str).decode()


# zap's level names (Python's WARNING is zap's "warn", CRITICAL its "fatal").
_LEVELS = {logging.WARNING: "warn", logging.CRITICAL: "fatal"}


def zap_time(created: float) -> str:
    """``created`` as zap's ISO 8601 encoder writes it in UTC: ``2006-01-02T15:04:05.000Z``."""
    when = dt.datetime.fromtimestamp(created, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = reconcile_context.get()
        if ctx:
            line += f" [{ctx['controller']} {ctx['namespace']}/{ctx['name']} {ctx['reconcileID']}]"
        return line


def _formatter(encoder: str) -> logging.Formatter:
    if encoder == "json":
        return JSONFormatter()
    return ConsoleFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


# Upstream rotates its log file at 500 MB and keeps 10 old files (lumberjack).
LOG_FILE_MAX_BYTES = 500 * 1024 * 1024
LOG_FILE_BACKUPS = 10


def setup(
    encoder: str = "json",
    level: str = "INFO",
    stream: Any = None,
    *,
    file_path: str | None = None,
    file_encoder: str = "json",
) -> None:
    """Logs to stderr and, with ``file_path``, also to a size-rotated file (each with its own
    encoder, as upstream's --log-stdout-encoder and --log-file-encoder)."""
    handler: logging.Handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_formatter(encoder))
    handlers = [handler]
    if file_path:
        Path(file_path).parent.mkdir(parents=True, exist_ok=True)
        rotating = logging.handlers.RotatingFileHandler(
            file_path, maxBytes=LOG_FILE_MAX_BYTES, backupCount=LOG_FILE_BACKUPS
        )
        rotating.setFormatter(_formatter(file_encoder))
        handlers.append(rotating)
    root = logging.getLogger()
    root.handlers = handlers
    root.setLevel(level.upper())
