"""Re-diffs a dumped differential run without the operators:
``python tests/conformance/recheck.py bench-results/conformance-samples.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conf_run import Input, compare, normalized

from conftest import GO_NS, PY_NS


def main(path: str) -> None:
    from test_differential import explain, rewrites, summary

    raw = json.loads(Path(path).read_text())
    lines: list[str] = []
    for name, entry in raw.items():
        item = Input(
            origin=entry["origin"], body={"kind": entry["kind"], "metadata": {"name": name}}
        )
        lines += compare(
            item, normalized(entry["ours"], PY_NS), normalized(entry["upstream"], GO_NS), rewrites()
        )
    counts, unexplained, kinds = explain(lines)
    inputs = [
        Input(origin=e["origin"], body={"kind": e["kind"], "metadata": {"name": n}})
        for n, e in raw.items()
    ]
    print(summary(inputs, kinds))
    for key, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{count:5d}  {key}")
    print(f"{len(unexplained)} unexplained of {len(lines)}")
    for line in unexplained:
        print(line[:400])


if __name__ == "__main__":
    main(sys.argv[1])
