"""The Secret holding a cluster's Ray auth token (``authOptions.mode: token``).

The token itself is a parameter (upstream uses base64 of 32 random bytes) so this stays pure.
Whether a Secret is wanted at all follows upstream's QUIRK, exposed as ``wants_auth_secret``:
any non-null ``authOptions`` whose mode is not ``disabled`` (an empty ``{}`` included) gets
one, unless the user named their own Secret or Kubernetes token auth replaces it.
"""

from __future__ import annotations

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    auth_options,
    cluster_name,
    cluster_namespace,
    owner_reference,
)


def wants_auth_secret(cluster: JsonDict) -> bool:
    options = auth_options(cluster)
    if options is None or options.get("mode") == c.AUTH_MODE_DISABLED:
        return False
    if options.get("secretName"):
        return False
    return options.get("enableK8sTokenAuth") is not True


def build_auth_secret(cluster: JsonDict, token: str) -> JsonDict:
    """The Secret holding the cluster's auth token. upstream: createAuthSecret."""
    name = cluster_name(cluster)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": names.auth_secret_name(name),
            "namespace": cluster_namespace(cluster),
            "labels": {c.LABEL_CLUSTER: name},
            "ownerReferences": [owner_reference(cluster)],
        },
        "stringData": {c.AUTH_TOKEN_SECRET_KEY: token},
    }
