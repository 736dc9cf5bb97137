"""RayService conditions (upstream's calculateConditions) as a table of transitions."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.controllers import rayservice_status as rss

NOW = "2026-12-01T00:00:00Z"
INIT = ("False", "Initializing", "RayService is initializing")
NO_PENDING = ("False", "NoPendingCluster", "Active Ray cluster exists and no pending Ray cluster")
BOTH = ("True", "BothActivePendingClustersExist", "Both active and pending Ray clusters exist")
SERVING = ("True", "NonZeroServeEndpoints", "Number of serve endpoints is greater than 0")
DROPPED = ("False", "ZeroServeEndpoints", "Number of serve endpoints dropped to 0")
NO_ACTIVE = ("Unknown", "NoActiveCluster", rss.MSG_NO_ACTIVE)
TIMEOUT = ("False", "InitializingTimeout", "timed out")
INVALID = ("False", "ValidationFailed", "bad spec")

Triple = tuple[str, str, str]


def conds(ready: Triple | None, upgrade: Triple | None) -> list[dict[str, Any]]:
    out = []
    for ctype, value in (("Ready", ready), ("UpgradeInProgress", upgrade)):
        if value is not None:
            status, reason, message = value
            out.append({"type": ctype, "status": status, "reason": reason, "message": message})
    return out


@pytest.mark.parametrize(
    ("before", "active", "pending", "endpoints", "after"),
    [
        # A new RayService: both seeded as initializing, with or without a pending cluster.
        ((None, None), False, False, 0, (INIT, INIT)),
        ((None, None), False, True, 0, (INIT, INIT)),
        ((INIT, INIT), False, True, 0, (INIT, INIT)),
        # The first cluster serves.
        ((INIT, INIT), True, False, 2, (SERVING, NO_PENDING)),
        # Promoted but no endpoint yet: still initializing for Ready.
        ((INIT, INIT), True, False, 0, (INIT, NO_PENDING)),
        # An upgrade, then its end.
        ((SERVING, NO_PENDING), True, True, 2, (SERVING, BOTH)),
        ((SERVING, BOTH), True, False, 2, (SERVING, NO_PENDING)),
        # Endpoints lost after having served.
        ((SERVING, NO_PENDING), True, False, 0, (DROPPED, NO_PENDING)),
        # The active cluster gone after initializing: upstream's "should not happen".
        ((DROPPED, NO_PENDING), False, True, 0, (DROPPED, NO_ACTIVE)),
        # A timed-out initialization keeps its reason.
        ((TIMEOUT, INIT), False, False, 0, (TIMEOUT, INIT)),
        # A fixed validation failure starts over.
        ((INVALID, INIT), False, True, 0, (INIT, INIT)),
    ],
)
def test_condition_transitions(
    before: tuple[Triple | None, Triple | None],
    active: bool,
    pending: bool,
    endpoints: int,
    after: tuple[Triple, Triple],
) -> None:
    status: dict[str, Any] = {"conditions": conds(*before), "numServeEndpoints": endpoints}
    rss.calculate_conditions(
        status, has_active=active, has_pending=pending, waiting="", generation=3, now=NOW
    )
    assert [c["type"] for c in status["conditions"]] == ["Ready", "UpgradeInProgress"]
    got = tuple((c["status"], c["reason"], c["message"]) for c in status["conditions"])
    assert got == after
    assert status["serviceStatus"] == ("Running" if after[0][0] == "True" else "")


def test_a_stalled_upgrade_says_what_it_waits_for() -> None:
    status: dict[str, Any] = {"conditions": conds(SERVING, NO_PENDING), "numServeEndpoints": 1}
    rss.calculate_conditions(
        status,
        has_active=True,
        has_pending=True,
        waiting="creating RayCluster x",
        generation=1,
        now=NOW,
    )
    upgrade = status["conditions"][1]
    assert upgrade["message"] == "Both active and pending Ray clusters exist; creating RayCluster x"


def test_transition_time_moves_only_with_status() -> None:
    status: dict[str, Any] = {"conditions": [], "numServeEndpoints": 0}
    rss.calculate_conditions(
        status, has_active=False, has_pending=True, waiting="", generation=1, now="t0"
    )
    status["numServeEndpoints"] = 1
    rss.calculate_conditions(
        status, has_active=True, has_pending=False, waiting="", generation=1, now="t1"
    )
    ready, upgrade = status["conditions"]
    assert ready["lastTransitionTime"] == "t1"
    assert upgrade["lastTransitionTime"] == "t0"
