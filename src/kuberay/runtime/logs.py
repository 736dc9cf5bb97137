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
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = reconcile_context.get()
        if ctx:
            out.update(ctx)
        for key, value in record.__dict__.items():
            if key not in _STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


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
