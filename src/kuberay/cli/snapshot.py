"""Refresh the committed Kubernetes OpenAPI snapshot from a running apiserver.

``python -m kuberay.cli.snapshot --kubeconfig PATH`` fetches the OpenAPI v3 group documents
listed in ``openapi.GROUP_PATHS``, trims them to what the CRDs embed and rewrites the package
data file. Run it when the pinned Kubernetes version changes, then regenerate the CRDs; the
integration test that compares the snapshot with the live apiserver says when that is due.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from kuberay.api import openapi
from kuberay.runtime.client import KubeClient, load_kubeconfig


async def fetch(kubeconfig: Path) -> dict[str, Any]:
    async with KubeClient(load_kubeconfig(kubeconfig), user_agent="kuberay-crdgen") as kube:
        documents = [await kube.request("GET", f"/openapi/v3/{p}") for p in openapi.GROUP_PATHS]
    return openapi.trim(documents)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kuberay.cli.snapshot", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    args = parser.parse_args(argv)
    snap = asyncio.run(fetch(args.kubeconfig))
    target = Path(str(resources.files("kuberay.api").joinpath("data", openapi.SNAPSHOT_NAME)))
    target.write_text(openapi.dumps_snapshot(snap), "utf-8")
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
