"""The background process behind ``kuberay dev up``: owns one plane until told to stop.

Invariants and failure modes:
- The plane's children die with this process (PDEATHSIG), so a SIGKILL of the supervisor leaves
  no orphans; SIGTERM, SIGINT and SIGHUP stop the plane in order and remove ``state.json``.
- ``state.json`` in the plane directory exists only while the plane is ready; ``dev status``
  and ``dev down`` find the supervisor through it (its ``pid``).
- A component that exits on its own is reported in the supervisor log, and the whole plane is
  stopped: a half-working plane that looks up is worse than one that is visibly down.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from kuberay.devenv.binaries import BuildError, source_root
from kuberay.devenv.plane import Plane, PlaneConfig, PlaneError
from kuberay.devenv.prometheus import Prometheus


def _shipped_rules() -> list[Path]:
    """The alert rules from ``deploy/prometheus`` of this checkout, when there is one."""
    folder = source_root().parent / "deploy" / "prometheus"
    return sorted(folder.glob("*.rules.yaml"))


def plane_config_from_args(args: argparse.Namespace, directory: Path) -> PlaneConfig:
    return PlaneConfig(
        directory=directory,
        nodes=args.nodes,
        node_cpu=args.node_cpu,
        node_memory=args.node_memory,
        node_gpus=args.node_gpus,
        unlimited=args.unlimited,
        runtime=args.runtime,
        process_nodes=args.process_nodes,
        egress=not args.no_egress,
        image_map=args.image_map,
        log=lambda m: print(m, flush=True),
    )


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (a clear one-line error else)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def add_plane_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes", type=_count(1), default=4, help="number of KWOK nodes (default 4)"
    )
    parser.add_argument("--node-cpu", default="64", help="CPU capacity of each node")
    parser.add_argument("--node-memory", default="512Gi", help="memory capacity of each node")
    parser.add_argument("--node-gpus", type=_count(0), default=4, help="nvidia.com/gpu per node")
    parser.add_argument(
        "--runtime",
        choices=("kwok", "process"),
        default="kwok",
        help="kwok: fake nodes, pods never run (default); process: pods run as Linux processes "
        "with real Ray (needs root), see kuberay.devenv.nodeagent",
    )
    parser.add_argument(
        "--process-nodes",
        type=_count(1),
        default=1,
        help="nodes of the process runtime (default 1)",
    )
    parser.add_argument(
        "--no-egress",
        action="store_true",
        help="process runtime: pods reach only the host and each other (no NAT through the "
        "host, cluster DNS answers no outside names); by default they reach what the host "
        "reaches, e.g. package indexes for a runtime_env's pip",
    )
    parser.add_argument(
        "--image-map",
        type=Path,
        default=None,
        help="JSON/YAML file mapping image prefixes to Python environments (process runtime)",
    )
    parser.add_argument(
        "--with-prometheus",
        action="store_true",
        help="also run a real Prometheus (built on demand) scraping the operator on "
        "127.0.0.1:8080 and every Ray pod's metrics port; its URL is in `kuberay dev status`",
    )
    parser.add_argument(
        "--unlimited",
        action="store_true",
        help="lift apiserver inflight limits and client rate limits (benchmarks)",
    )


def run(config: PlaneConfig, *, with_prometheus: bool = False) -> int:
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        del frame
        print(f"supervisor: signal {signum}, stopping the plane", flush=True)
        stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    plane = Plane(config)
    try:
        plane.start()
    except (PlaneError, OSError, RuntimeError) as exc:
        print(f"supervisor: the plane failed to start: {exc}", flush=True)
        return 1
    print(f"supervisor: plane ready in {plane.ready_seconds:.1f}s at {plane.server}", flush=True)
    prom: Prometheus | None = None
    if with_prometheus:
        prom = Prometheus(plane, rule_files=_shipped_rules())
        try:
            prom.start()
        except (PlaneError, OSError, BuildError) as exc:
            print(f"supervisor: prometheus failed to start: {exc}", flush=True)
            plane.stop()
            return 1
        plane.extra_state["prometheus"] = prom.url
        plane.write_state()
        print(f"supervisor: prometheus ready at {prom.url}", flush=True)
    code = 0
    while not stopping:
        dead = [(n, p.returncode) for n, p in plane.procs.items() if p.poll() is not None]
        if prom is not None and prom.proc is not None and prom.proc.poll() is not None:
            dead.append(("prometheus", prom.proc.returncode))
        if dead:
            for name, rc in dead:
                print(f"supervisor: {name} exited with {rc}:\n{plane.log_tail(name)}", flush=True)
            code = 1
            break
        time.sleep(0.5)
    if prom is not None:
        prom.stop()
    plane.stop()
    print("supervisor: plane stopped", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kuberay.devenv.supervisor")
    parser.add_argument("--dir", required=True, type=Path)
    add_plane_arguments(parser)
    args = parser.parse_args(argv)
    return run(plane_config_from_args(args, args.dir), with_prometheus=args.with_prometheus)


if __name__ == "__main__":
    sys.exit(main())
