"""Asking the apiserver what this process may do (SelfSubjectAccessReview).

Used at start-up to learn which resources may be listed and watched across the whole cluster,
so a manager watching many namespaces can use one watch per resource (``runtime.cache``).

Invariants and failure modes:
- A review that fails (an error answer, a transport error) counts as "not allowed": the caller
  then keeps its per-namespace watches, which work under every install's RBAC. Nothing here
  raises for an apiserver's answer.
- Every identity may create SelfSubjectAccessReviews (``system:basic-user``), so asking needs no
  rule of ours.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kuberay.runtime.client import KubeClient
from kuberay.runtime.errors import ApiError
from kuberay.runtime.resource import Resource

log = logging.getLogger("kuberay.runtime.access")

SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io",
    "v1",
    "selfsubjectaccessreviews",
    namespaced=False,
    kind="SelfSubjectAccessReview",
)


async def allowed(client: KubeClient, verb: str, group: str, resource: str) -> bool:
    """Whether this identity may ``verb`` ``group/resource`` in every namespace."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource}},
    }
    try:
        answer = await client.create(SELF_SUBJECT_ACCESS_REVIEWS, review)
    except ApiError as exc:
        log.info("access review of %s %s/%s failed: %s", verb, group, resource, exc)
        return False
    return bool((answer.get("status") or {}).get("allowed"))


async def watchable_cluster_wide(
    client: KubeClient, resources: Iterable[tuple[str, str]]
) -> frozenset[tuple[str, str]]:
    """The (group, plural) pairs of ``resources`` this identity may list and watch in every
    namespace."""
    pairs = sorted(set(resources))

    async def both(group: str, plural: str) -> bool:
        got = await asyncio.gather(
            allowed(client, "list", group, plural), allowed(client, "watch", group, plural)
        )
        return all(got)

    answers = await asyncio.gather(*(both(g, r) for g, r in pairs))
    return frozenset(pair for pair, ok in zip(pairs, answers, strict=True) if ok)
