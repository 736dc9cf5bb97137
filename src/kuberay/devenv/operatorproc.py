"""The operator as a real subprocess against a plane: what integration and e2e tests and the demo
need to exercise the real entry point and flags, and to SIGKILL it.

Invariants: the child gets its own log file (appended, with a start marker per start) and its
ports are picked by the kernel; ``stop()`` is bounded (SIGTERM, then SIGKILL after 20 s), so a
wedged operator can never hang a test session.

With ``trace=True`` the same entry point runs with ``kuberay.devenv.testing``'s reconcile trace
installed first, written beside the log: a test that asserts that the operator did *not* act
waits on it (``self.trace``) for a reconcile that saw its write, instead of sleeping.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import TRACE_ENV, ReconcileTrace

# ``python -m kuberay.cli.main`` with the trace hooks installed before anything is constructed.
_TRACED_MAIN = (
    "import os, runpy; "
    "from kuberay.devenv.testing import install_reconcile_trace_file as install; "
    f"install(os.environ[{TRACE_ENV!r}]); "
    "runpy.run_module('kuberay.cli.main', run_name='__main__', alter_sys=True)"
)


class OperatorProcess:
    def __init__(
        self,
        plane: Plane,
        log_dir: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        trace: bool = False,
    ):
        self.plane = plane
        self.log_path = log_dir / "operator.log"
        self.extra = extra
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        # Kept across restarts: records carry machine-wide monotonic instants.
        self.trace: ReconcileTrace | None = (
            ReconcileTrace(log_dir / "reconcile-trace.tsv") if trace else None
        )

    def start(self) -> None:
        entry = ["-c", _TRACED_MAIN] if self.trace is not None else ["-m", "kuberay.cli.main"]
        argv = [
            sys.executable,
            *entry,
            "operator",
            f"--kubeconfig={self.plane.kubeconfig}",
            "--metrics-addr=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--enable-leader-election=false",
            "--log-stdout-encoder=console",
            *self.extra,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        log.write(f"\n==== start {time.strftime('%H:%M:%S')}\n".encode())
        log.flush()
        env = dict(os.environ, **self.env)
        if self.trace is not None:
            env[TRACE_ENV] = str(self.trace.path)
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
