"""Errors a builder raises when the RayCluster cannot produce the requested object.

They are ``ValueError`` subclasses so that callers treating any bad-spec condition uniformly
keep working; the message is written for the user (it ends up in events and conditions).
"""

from __future__ import annotations


class BuildError(ValueError):
    """The spec is valid enough to admit but cannot yield this object (e.g. no serve port)."""
