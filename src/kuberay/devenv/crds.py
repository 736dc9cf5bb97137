"""Install (or update) the generated CRDs on a cluster with server-side apply.

Server-side apply with one field manager makes installation idempotent and lets other managers
(kubectl, Helm) co-own unrelated fields; ``force`` takes over fields a previous installer set,
since the generated schema is authoritative. Waiting for ``Established`` means the caller can
use the new types immediately; a CRD the apiserver refuses to establish raises ``TimeoutError``
with its conditions, which is where a NonStructuralSchema problem would show.

The CRDs come straight from ``kuberay.api.crdgen`` (not from ``deploy/crds``), so tests that use
this exercise the models' current schema. The operator itself never installs CRDs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kuberay.api import crdgen
from kuberay.runtime.client import APPLY_PATCH, CRDS, KubeClient

FIELD_MANAGER = "kuberay-operator"


def conditions(crd: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}


async def apply_crds(
    kube: KubeClient, *, field_manager: str = FIELD_MANAGER, timeout: float = 180.0
) -> list[dict[str, Any]]:
    """Apply every CRD, then wait until all are Established; returns the stored CRDs."""
    for crd in crdgen.all_crds():
        await kube.patch(
            CRDS,
            crd["metadata"]["name"],
            crd,
            content_type=APPLY_PATCH,
            field_manager=field_manager,
            force=True,
        )
    deadline = time.monotonic() + timeout
    stored = []
    for crd in crdgen.all_crds():
        name = crd["metadata"]["name"]
        while True:
            got = await kube.get(CRDS, name)
            state = conditions(got)
            if state.get("Established") == "True":
                stored.append(got)
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established: {state}")
            await asyncio.sleep(0.1)
    return stored
