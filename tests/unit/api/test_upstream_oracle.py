"""Optional: compare the generated CRDs with upstream's (used only as an oracle, never copied).

Skipped when the reference material (``/work/shared`` or ``../shared`` next to the repository)
is absent. Every difference is listed in the failure message; both are generated against the
Kubernetes v1.36 API, so the only accepted difference is our additive RayJob status.conditions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from kuberay.api import crdgen

from .crd_compare import compare

REPO = Path(__file__).resolve().parents[3]
CANDIDATES = [
    Path(os.environ.get("KUBERAY_SHARED_DIR", "/nonexistent")),
    REPO.parent / "shared",
    Path("/work/shared"),
]
UPSTREAM = next(
    (
        p / "reference" / "upstream-crds"
        for p in CANDIDATES
        if (p / "reference/upstream-crds").is_dir()
    ),
    None,
)

# Additive fields that are ours on purpose (nothing existing clients read changes):
# - RayJob status.conditions (Kubernetes-style conditions, asked for upstream in kuberay#5152).
OUR_ADDITIONS = (
    re.compile(
        r"^RayJob v1\.schema\.openAPIV3Schema\.properties\.status\.properties\.conditions: "
        r"only ours "
    ),
)


@pytest.mark.skipif(UPSTREAM is None, reason="upstream reference CRDs not available")
@pytest.mark.parametrize("kind", crdgen.KINDS, ids=lambda k: k.kind)
def test_generated_crd_matches_upstream(kind: crdgen.Kind) -> None:
    assert UPSTREAM is not None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    theirs = yaml.load((UPSTREAM / crdgen.filename(kind)).read_text(), Loader=loader)
    differences = compare(crdgen.crd(kind), theirs)
    unexplained = [d for d in differences if not any(p.search(d) for p in OUR_ADDITIONS)]
    assert unexplained == [], "\n".join(unexplained)
    # Both are generated against Kubernetes v1.36: only our additive RayJob conditions remain.
    assert len(differences) <= 1
