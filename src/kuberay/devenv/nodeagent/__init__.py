"""A node runtime for the local plane that runs Kubernetes pods as Linux processes (no Docker).

``PlaneConfig(runtime="process")`` creates a bridge, binds the apiserver on the bridge address and
starts one agent (``agent.py``) that registers ``process_nodes`` Nodes and runs every pod bound
to them: a sandbox per pod (network, mount, UTS and IPC namespaces, ``launcher.py``), containers
as processes in their own mount and PID namespaces, volumes bind-mounted for that pod only,
probes, restarts, status and graceful deletion (``pod.py``), and a cluster DNS (``dns.py``).
Images map to local Python environments (``spec.py``); the host network is in ``network.py``.

Container logs are files, one per container instance: ``container_log()`` reads the current one;
``containerlog.py`` adds a per-line timestamp index beside each. The agent also serves the
kubelet API (``kubelet.py``: logs, exec, attach, port-forward over SPDY/3.1, see ``spdy.py`` and
``streams.py``), so ``kubectl logs/exec/attach/port-forward`` work against process nodes.

Invariants: every process of a pod dies with the agent (PDEATHSIG chain and PID namespaces);
namespaces and veths belong to processes, so they vanish with them; the plane's bridge and state
directory are removed by ``Plane.stop()`` or, after a crash, by the next plane that starts.
Needs Linux, root, ``ip`` and ``nsenter``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def supported() -> str | None:
    """None when this machine can run the process runtime, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the process runtime needs root (network and mount namespaces)"
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"the process runtime needs `{tool}` on PATH"
    return None


def pod_log_dirs(log_dir: Path, namespace: str, pod: str) -> list[Path]:
    """Log directories of every instance (uid) of ``namespace/pod``, oldest first."""
    found = list(log_dir.glob(f"{namespace}_{pod}_*"))
    return sorted(found, key=lambda p: p.stat().st_mtime)


def container_log(
    log_dir: Path, namespace: str, pod: str, container: str, *, previous: int | None = None
) -> str:
    """The output (stdout and stderr) of a container of the newest pod with that name.

    ``previous=N`` reads the instance that ran before restart N+1 (``kubectl logs --previous``
    is ``previous=restartCount-1``). Empty when the container has not started (yet).
    """
    dirs = pod_log_dirs(log_dir, namespace, pod)
    if not dirs:
        return ""
    name = f"{container}.log" if previous is None else f"{container}.{previous}.log"
    path = dirs[-1] / name
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
