"""Logging setup: JSON (default, as upstream's zap) or console lines, with reconcile context.

Every record logged inside a reconcile carries the controller, namespace, name and reconcile id
(from ``controller.reconcile_context``) without the reconciler passing them around.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
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


def setup(encoder: str = "json", level: str = "INFO", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    if encoder == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(ConsoleFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
