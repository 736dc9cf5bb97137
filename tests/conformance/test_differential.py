"""The Go operator (upstream v1.6.1) and ours on the same inputs: every difference explained.

Inputs: every manifest in ``deploy/samples`` (upstream's ``config/samples`` are kept for
acceptance and never used here) and seeded, hypothesis-generated RayClusters, RayJobs and
RayServices (``conf_specs``). Each difference must match an entry of ``allowlist.yaml``, which
says why it exists: a change from v1.6.1 to v1.7.0 that we follow (naming the upstream file),
or a deliberate difference listed in the README's migration section. A new difference fails.

``KUBERAY_CONFORMANCE_GENERATED`` sets how many generated inputs run (CI runs a short slice;
``scripts/conformance.sh`` the whole suite).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conf_run import Input, apply, collect, compare, delete_all, normalized, wait_quiet
from conf_specs import generated_inputs

from conftest import GO_NS, PY_NS, GoOperatorProcess
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.runtime.client import KubeClient

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = Path(__file__).with_name("allowlist.yaml")
BATCH = 10
# Samples that need a feature gate the Go operator v1.6.1 does not have (or has off by
# default); the gate is not passed to either operator, so they are compared without it.
REPORT = Path(os.environ.get("KUBERAY_CONFORMANCE_REPORT", "bench-results/conformance.md"))


def sample_inputs() -> list[Input]:
    out = []
    for path in sorted((REPO / "deploy" / "samples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in ("RayCluster", "RayJob", "RayService"):
                out.append(Input(origin=path.name, body=doc))
    return out


def load_allowlist() -> list[dict[str, Any]]:
    entries = yaml.safe_load(ALLOWLIST.read_text()) or []
    for entry in entries:
        entry["re"] = re.compile(entry.get("match") or entry["rewrite"])
        assert entry.get("reason"), entry
        assert entry.get("why") in ("upstream-change", "deliberate", "test-setup"), entry
        if entry["why"] == "upstream-change":
            assert str(entry.get("ref", "")).startswith("ray-operator/"), entry
    return list(entries)


def rewrites() -> list[tuple[re.Pattern[str], str]]:
    """Allow-list entries that undo a known change inside our strings before comparing."""
    return [(e["re"], e["to"]) for e in load_allowlist() if "rewrite" in e]


async def run_inputs(kube: KubeClient, inputs: list[Input], dump: Path) -> list[str]:
    """Runs the inputs in batches; the raw objects of both sides go to ``dump`` (JSON), so a
    normalisation or allow-list change can be checked again without the operators."""
    lines: list[str] = []
    raw: dict[str, Any] = {}
    for start in range(0, len(inputs), BATCH):
        batch = inputs[start : start + BATCH]
        await apply(kube, batch, GO_NS)
        await apply(kube, batch, PY_NS)
        quiet = await wait_quiet(kube, [GO_NS, PY_NS])
        theirs = await collect(kube, batch, GO_NS)
        ours = await collect(kube, batch, PY_NS)
        for item in batch:
            raw[item.name] = {
                "origin": item.origin,
                "kind": item.kind,
                "quiet": quiet,
                "ours": ours[item.name],
                "upstream": theirs[item.name],
            }
            lines += compare(
                item,
                normalized(ours[item.name], PY_NS),
                normalized(theirs[item.name], GO_NS),
                rewrites(),
            )
        await delete_all(kube, batch, GO_NS)
        await delete_all(kube, batch, PY_NS)
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.write_text(json.dumps(raw, indent=1, sort_keys=True))
    return lines


def explain(lines: list[str]) -> tuple[dict[str, int], list[str], dict[str, set[str]]]:
    """Counts per allow-list entry, the unexplained lines, and per input the kinds of reason
    (``upstream-change``, ``deliberate``, ``test-setup``) its differences have."""
    counts: dict[str, int] = {}
    unexplained = []
    kinds: dict[str, set[str]] = {}
    entries = load_allowlist()
    for line in lines:
        origin = line.split(" ", 1)[0]
        for entry in (e for e in entries if "match" in e):
            if entry["re"].search(line):
                counts[entry["match"]] = counts.get(entry["match"], 0) + 1
                kinds.setdefault(origin, set()).add(entry["why"])
                break
        else:
            unexplained.append(line)
            kinds.setdefault(origin, set()).add("unexplained")
    return counts, unexplained, kinds


def summary(inputs: list[Input], kinds: dict[str, set[str]]) -> dict[str, int]:
    """How many inputs are identical, or differ only by v1.7.0 changes, or (also) on purpose,
    or (also) where the setup cannot compare."""
    out = {
        "inputs": len(inputs),
        "identical": 0,
        "only upstream changes": 0,
        "with deliberate differences": 0,
        "with test-setup limits": 0,
        "unexplained": 0,
    }
    for item in inputs:
        got = kinds.get(item.origin, set())
        if not got:
            out["identical"] += 1
        elif "unexplained" in got:
            out["unexplained"] += 1
        elif got == {"upstream-change"}:
            out["only upstream changes"] += 1
        elif "test-setup" in got:
            out["with test-setup limits"] += 1
        else:
            out["with deliberate differences"] += 1
    return out


def write_report(
    name: str, inputs: list[Input], counts: dict[str, int], kinds: dict[str, set[str]]
) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    numbers = summary(inputs, kinds)
    entries = {e["match"]: e["why"] for e in load_allowlist() if "match" in e}
    text = [f"# Differential run: {name}", ""]
    text += [f"- {k}: {v}" for k, v in numbers.items()]
    text += ["", "| reason kind | allow-list entry | differences |", "|---|---|---|"]
    text += [
        f"| {entries[k]} | `{k}` | {v} |"
        for k, v in sorted(counts.items(), key=lambda kv: (entries[kv[0]], -kv[1]))
    ]
    with REPORT.open("a") as fh:
        fh.write("\n".join(text) + "\n\n")


@pytest.mark.parametrize("source", ["samples", "generated"])
async def test_differential(
    conf_kube: KubeClient,
    pair: tuple[GoOperatorProcess, OperatorProcess],
    source: str,
) -> None:
    go, ours = pair
    if source == "samples":
        inputs = sample_inputs()
    else:
        inputs = generated_inputs(int(os.environ.get("KUBERAY_CONFORMANCE_GENERATED", "20")))
    lines = await run_inputs(conf_kube, inputs, REPORT.with_name(f"conformance-{source}.json"))
    assert go.running(), "the Go operator exited"
    assert ours.proc is not None
    assert ours.proc.poll() is None, ours.tail()
    counts, unexplained, kinds = explain(lines)
    write_report(source, inputs, counts, kinds)
    assert not unexplained, f"{len(unexplained)} unexplained differences:\n" + "\n".join(
        unexplained[:300]
    )
