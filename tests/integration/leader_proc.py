"""A minimal operator process for the leader-election test (run as a subprocess).

It reconciles ConfigMaps labelled ``work=1`` by creating one ``done-<name>`` record each, and
appends every write it makes to a shared log, so the test can prove that no write happened
twice across a leader change.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from kuberay.runtime.client import CONFIGMAPS, KubeClient, load_kubeconfig
from kuberay.runtime.controller import Request
from kuberay.runtime.errors import AlreadyExists, NotFound
from kuberay.runtime.manager import Manager, ManagerOptions


def _append(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    ns = args.namespace
    async with KubeClient(load_kubeconfig(args.kubeconfig)) as kube:
        mgr = Manager(
            kube,
            ManagerOptions(
                metrics_addr=None,
                probe_addr=None,
                leader_election_namespace=ns,
                identity=args.identity,
            ),
        )
        work = mgr.informer(CONFIGMAPS, namespace=ns, label_selector="work=1")

        async def reconcile(req: Request) -> None:
            record = f"done-{req.name}"
            try:
                await kube.get(CONFIGMAPS, record, ns)
                return
            except NotFound:
                pass
            try:
                await kube.create(CONFIGMAPS, {"metadata": {"name": record}}, ns)
                outcome = "write"
            except AlreadyExists:
                outcome = "DUPLICATE"
            # One short append per write: O_APPEND keeps lines from two processes whole.
            line = f"{outcome} {record} {args.identity}\n"
            await asyncio.to_thread(_append, args.log, line)

        mgr.controller("work", reconcile, concurrency=4).for_(work)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        return await mgr.run(stop)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
