"""The ``kuberay`` command: operator entry point and developer commands.

``dev`` and ``demo`` need the local plane (``kuberay.devenv``), which the operator's own
distribution (``kuberay-py``, the image) leaves out; it comes with ``kuberay-py-devenv``
(``devenv/`` in the repository). Without it those commands still parse, whatever follows them,
and fail with one line that says what to install.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from kuberay.api import crdgen
from kuberay.cli import docs, manifests, operator

DEVENV_MISSING = (
    "kuberay {command}: the local development plane is not installed "
    "(pip install kuberay-py-devenv, or from a checkout: pip install ./devenv)"
)


def _dev_modules() -> tuple[ModuleType, ModuleType] | None:
    """``(dev, demo)``, or None when ``kuberay.devenv`` is not installed (and only then)."""
    try:
        from kuberay.cli import demo, dev
    except ModuleNotFoundError as exc:
        if exc.name != "kuberay.devenv" and not (exc.name or "").startswith("kuberay.devenv."):
            raise
        return None
    return dev, demo


def _devenv_missing(args: argparse.Namespace) -> int:
    print(DEVENV_MISSING.format(command=args.command), file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kuberay", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--version", action="version", version=operator.version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    modules = _dev_modules()
    if modules is not None:
        for module in modules:
            module.register(sub)
    else:
        for name in ("dev", "demo"):
            # No option prefix: whatever follows (flags included) is taken, not rejected.
            stub = sub.add_parser(
                name, help="(not installed: needs kuberay-py-devenv)", prefix_chars="\0"
            )
            stub.add_argument("rest", nargs="*")
            stub.set_defaults(func=_devenv_missing)
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
