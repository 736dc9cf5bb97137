"""The ``kuberay`` command: operator entry point and developer commands."""

from __future__ import annotations

import argparse
import sys

from kuberay.api import crdgen
from kuberay.cli import demo, dev, docs, manifests, operator


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kuberay", description=__doc__)
    parser.add_argument("--version", action="version", version=operator.version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    dev.register(sub)
    demo.register(sub)
    operator.register(sub)
    crds = sub.add_parser("crds", help="regenerate (or --check) deploy/crds from the API models")
    crdgen.add_arguments(crds)
    crds.set_defaults(func=crdgen.run)
    install = sub.add_parser(
        "manifests",
        help="regenerate (or --check) deploy/rbac, deploy/operator.yaml and the Helm chart",
    )
    manifests.add_arguments(install)
    install.set_defaults(func=manifests.run)
    reference = sub.add_parser(
        "docs", help="regenerate (or --check) docs/api-reference.md and the chart's values table"
    )
    docs.add_arguments(reference)
    reference.set_defaults(func=docs.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
