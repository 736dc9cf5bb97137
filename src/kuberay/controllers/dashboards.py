"""Reaching a RayCluster's dashboard, shared by the RayJob and RayService reconcilers: where
it is (directly, or through the API server's service proxy with ``--use-kubernetes-proxy``)
and the auth token it wants (``authOptions.mode: token``).

Invariants and failure modes:
- The token is read from the cluster's auth Secret (``authOptions.secretName``, else the name
  the RayCluster controller gives the Secret it generates) in the cluster's namespace, at the
  moment a client is opened, so a rotated token is picked up by the next pass.
- An unreadable Secret never yields a client without a token (the dashboard would refuse
  every call): ``open`` raises ``TokenUnreadable``, a ``DashboardError``, so callers that
  already treat dashboard failures as "ask again later" need nothing more. It keeps the API
  error for callers that report it themselves.
- Opening a client does no network I/O towards the dashboard; the caller closes the client.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders import rayjob as rjb
from kuberay.ray.dashboard import DashboardClient, DashboardError, DashboardFactory
from kuberay.ray.http_client import service_proxy_base_url
from kuberay.runtime.client import SECRETS, KubeClient
from kuberay.runtime.errors import ApiError
from kuberay.runtime.store import Obj


class TokenUnreadable(DashboardError):
    """The auth token Secret could not be read; ``error`` is the API server's answer."""

    def __init__(self, secret_name: str, error: ApiError) -> None:
        super().__init__(f"cannot read the auth token secret {secret_name}: {error}")
        self.error = error


def dashboard_base_url(dashboard_url: str, namespace: str, apiserver: str | None) -> str:
    """Where to reach a dashboard: ``dashboard_url`` (``status.dashboardURL``,
    ``host:port``) directly, or (with an API server URL, ``--use-kubernetes-proxy``) the same
    head Service through the API server's service proxy. Upstream:
    ``RayDashboardClient.InitClient``."""
    base = rjb.with_scheme(dashboard_url)
    if apiserver is None:
        return base
    service = (urlsplit(base).hostname or "").split(".")[0]
    return service_proxy_base_url(apiserver, namespace, service)


def auth_secret_name(cluster_spec: Obj, cluster_name: str) -> str | None:
    """The Secret holding the cluster's dashboard token, or None when it wants none."""
    options = cluster_spec.get("authOptions") or {}
    if options.get("mode") != c.AUTH_MODE_TOKEN:
        return None
    return str(options.get("secretName") or names.auth_secret_name(cluster_name))


class ProxySettings(Protocol):
    """The operator settings that say how dashboards are reached (RayJob's and RayService's
    configs both carry them)."""

    use_kubernetes_proxy: bool
    apiserver: str


@dataclass(frozen=True)
class DashboardAccess:
    """Opens dashboard clients for one reconciler. Upstream: ``GetRayDashboardClientFunc``
    (the factory bound to the manager and ``useKubernetesProxy``)."""

    client: KubeClient
    factory: DashboardFactory
    apiserver: str | None  # the API server's URL with --use-kubernetes-proxy, else None

    @classmethod
    def configured(
        cls, client: KubeClient, factory: DashboardFactory, settings: ProxySettings
    ) -> DashboardAccess:
        """Direct, or through the API server when ``--use-kubernetes-proxy`` is set."""
        apiserver = settings.apiserver if settings.use_kubernetes_proxy else None
        return cls(client, factory, apiserver)

    async def auth_token(self, cluster_spec: Obj, cluster_name: str, namespace: str) -> str | None:
        """The token of the cluster ``cluster_name`` whose spec is ``cluster_spec``; None when
        its dashboard needs none (or the Secret holds none). Raises ``TokenUnreadable``."""
        secret_name = auth_secret_name(cluster_spec, cluster_name)
        if secret_name is None:
            return None
        try:
            secret = await self.client.get(SECRETS, secret_name, namespace)
        except ApiError as exc:
            raise TokenUnreadable(secret_name, exc) from exc
        data = (secret.get("data") or {}).get(c.AUTH_TOKEN_SECRET_KEY)
        return base64.b64decode(data).decode() if data else None

    async def open(
        self, address: str, namespace: str, cluster_spec: Obj, cluster_name: str
    ) -> DashboardClient:
        """A client for the dashboard at ``address`` (``host:port``) of the cluster
        ``namespace/cluster_name`` whose spec is ``cluster_spec``. Raises ``TokenUnreadable``."""
        token = await self.auth_token(cluster_spec, cluster_name, namespace)
        base = dashboard_base_url(address, namespace, self.apiserver)
        return self.factory(base, auth_token=token)
