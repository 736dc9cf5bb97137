"""What the ray.io controllers share: the RayCluster resource, the cache scoping selectors,
generated-name suffixes and (re-exported from ``kuberay.runtime.rfc3339``) RFC 3339 helpers.

The selectors scope the operator's caches as upstream does (pods of Ray nodes only; Services and
batch Jobs the operator created), which keeps memory proportional to what it manages.
"""

from __future__ import annotations

import random

from kuberay.api import constants as c
from kuberay.api.constants import RAYCLUSTERS as RAYCLUSTERS
from kuberay.runtime.rfc3339 import format_time
from kuberay.runtime.rfc3339 import parse_time as parse_time

POD_SELECTOR = f"{c.LABEL_NODE_TYPE} in (head,worker,redis-cleanup)"
OWNED_SELECTOR = f"{c.LABEL_CREATED_BY}={c.CREATED_BY}"
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet

# The RFC 3339 helpers live in kuberay.runtime.rfc3339; these names stay for the controllers.
rfc3339 = format_time


def random_suffix(n: int = 5) -> str:
    return "".join(random.choice(_SUFFIX_ALPHABET) for _ in range(n))
