"""mTLS controller (gate RayClusterMTLS, cert-manager installed): the cert-manager PKI of each
TLS-enabled RayCluster. upstream: RayClusterMTLSController (raycluster_mtls_controller.go).

Per cluster, in order, each step only after the previous one succeeded: the self-signed Issuer,
the CA Certificate, the CA Issuer, the head Certificate, the shared worker Certificate (objects
and names from ``builders.mtls``). cert-manager issues them and writes the Secrets; the
RayCluster controller holds the cluster's pods back until both leaf Secrets are complete
(``builders.mtls.secrets_wait_reason``), and each new pod's ``wait-for-tls-ip-san`` init
container holds Ray back until its own IP is in the certificate it mounts.

Invariants and failure modes:
- The leaf Certificates' IP SANs follow the live pods: a new or removed pod IP rewrites the
  Certificate's SANs (Normal ``MTLSCertificatesUpdated``) and cert-manager re-issues the Secret,
  which the kubelet refreshes in running pods' volumes. Ray reads its certificate files at
  process start only, so running Ray processes keep serving the old certificate, which stays
  valid until it expires (90 days; renewal 15 days before). Nothing restarts pods: as upstream,
  a Warning ``MTLSCertificateExpiringSoon`` is the only signal once less than 24h remain.
- Issuers and the CA Certificate are created once and never updated; only labels and SANs of
  the leaf Certificates are kept in line (other drift is left alone, as upstream).
- Every Secret produced by one of the three Certificates gets a non-controller owner reference
  to it, so that deleting the RayCluster (which owns the Certificates) also collects the keys.
  The Secret is written only when that reference is missing (upstream writes on every pass).
- A failed step records Warning ``MTLSFailedToReconcile`` and raises (retried with backoff),
  except a Conflict (an update from a stale cached Certificate), which is only retried;
  Certificates not Ready record ``MTLSCertsNotReady`` and retry in 30s; a ready PKI records
  ``MTLSPKIReady`` and is looked at again every 60s.
- Turning TLS off, deleting the cluster, or handing it to another controller (``managedBy``) is
  not cleaned up here: owner references do that when the cluster goes, as upstream.
- Divergence: besides the RayClusters, Issuers and Certificates (upstream's watches), this
  controller also follows the clusters' pods, so a new pod's IP reaches its Certificate at once
  instead of on the next RayCluster status change or 30/60s timer.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final

from kuberay.api import constants as c
from kuberay.api.constants import CM_CERTIFICATES, CM_ISSUERS
from kuberay.api.resources import owner_reference
from kuberay.builders import mtls
from kuberay.builders.common import is_tls_enabled
from kuberay.builders.options import BuildOptions
from kuberay.controllers.reconcile import working_copy
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import SECRETS, KubeClient, Resource
from kuberay.runtime.controller import Controller, Request, Result
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import Obj

NOT_READY_REQUEUE_SECONDS: Final = 30.0
READY_REQUEUE_SECONDS: Final = 60.0
EXPIRY_WARNING_HOURS: Final = 24.0


class _StepFailed(Exception):
    def __init__(self, step: str, cause: ApiError) -> None:
        super().__init__(f"Failed to reconcile mTLS {step}: {cause}")


def hours_left(cert: Obj, now: dt.datetime) -> float | None:
    """Hours until the Certificate's ``status.notAfter`` (None when not issued yet)."""
    not_after = (cert.get("status") or {}).get("notAfter")
    if not not_after:
        return None
    try:
        end = dt.datetime.fromisoformat(str(not_after).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (end - now).total_seconds() / 3600


@dataclass(eq=False)
class MTLSReconciler:
    """Keeps each TLS-enabled RayCluster's Issuers and Certificates in place; built without a
    manager (the caches are handed in), wired in by ``register``."""

    client: KubeClient
    recorder: EventRecorder
    options: BuildOptions
    clusters: ResourceCache
    pods: ResourceCache
    issuers: ResourceCache
    certificates: ResourceCache
    controller: Controller | None = None

    async def reconcile(self, req: Request) -> Result | None:
        """upstream: RayClusterMTLSController.Reconcile / handleAutoGenerate."""
        ns = req.namespace or ""
        cluster = working_copy(
            self.clusters.get(ns, req.name), c.KIND_RAYCLUSTER, skip_deleting=True
        )
        if cluster is None or not is_tls_enabled(cluster, self.options):
            return None
        try:
            await self._ensure_pki(cluster)
        except _StepFailed as exc:
            self.recorder.event(
                cluster, WARNING, c.EVENT_MTLS_FAILED_TO_RECONCILE, str(exc), "Reconcile"
            )
            raise
        name = req.name
        leaves = [
            self.certificates.get(ns, mtls.leaf_certificate_name(name, t))
            for t in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER)
        ]
        if not all(mtls.certificate_ready(cert) for cert in leaves):
            self.recorder.event(
                cluster,
                NORMAL,
                c.EVENT_MTLS_CERTS_NOT_READY,
                "Waiting for cert-manager to issue mTLS certificates",
                "Reconcile",
            )
            return Result(requeue_after=NOT_READY_REQUEUE_SECONDS)
        self.recorder.event(
            cluster,
            NORMAL,
            c.EVENT_MTLS_PKI_READY,
            "mTLS PKI is ready: CA, head, and worker certificates issued",
            "Reconcile",
        )
        self._warn_expiring(
            cluster, [*leaves, self.certificates.get(ns, mtls.ca_certificate_name(name))]
        )
        return Result(requeue_after=READY_REQUEUE_SECONDS)

    async def _ensure_pki(self, cluster: Obj) -> None:
        meta = cluster["metadata"]
        name = meta["name"]
        for step, res, cache, want in (
            ("self-signed issuer", CM_ISSUERS, self.issuers, mtls.selfsigned_issuer(cluster)),
            ("CA certificate", CM_CERTIFICATES, self.certificates, mtls.ca_certificate(cluster)),
            ("CA issuer", CM_ISSUERS, self.issuers, mtls.ca_issuer(cluster)),
        ):
            await self._step(step, self._ensure_created(res, cache, want))
        pods = self.pods.list(index="cluster", value=f"{meta['namespace']}/{name}")
        for node_type in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER):
            ips = mtls.pod_ips(pods, name, node_type)
            want = mtls.leaf_certificate(cluster, node_type, ips, self.options)
            leaf = self._ensure_leaf(cluster, node_type, want)
            await self._step(f"{node_type} certificate", leaf)

    @staticmethod
    async def _step(step: str, work: Awaitable[None]) -> None:
        try:
            await work
        except Conflict:
            raise  # a stale cached version: redone at once on fresh data, no event
        except ApiError as exc:
            raise _StepFailed(step, exc) from exc

    async def _ensure_created(self, res: Resource, cache: ResourceCache, want: Obj) -> None:
        """Creates ``want`` when absent; an existing Certificate gets its Secret's owner
        reference instead. Never updates. upstream: ensureSelfSignedIssuer, ensureCACertificate,
        ensureCAIssuer."""
        meta = want["metadata"]
        have = cache.get(meta["namespace"], meta["name"])
        if have is None:
            try:
                written = await self.client.create(res, want, meta["namespace"])
            except AlreadyExists:
                return  # made by an earlier pass the cache has not seen yet
            cache.record_write(written)
            return
        if res is CM_CERTIFICATES:
            await self._own_secret(have)

    async def _ensure_leaf(self, cluster: Obj, node_type: str, want: Obj) -> None:
        """upstream: ensureHeadCertificate / ensureWorkerCertificate."""
        meta = want["metadata"]
        have = self.certificates.get(meta["namespace"], meta["name"])
        if have is None:
            try:
                written = await self.client.create(CM_CERTIFICATES, want, meta["namespace"])
            except AlreadyExists:
                return
            self.certificates.record_write(written)
            return
        if mtls.certificate_needs_update(want, have):
            body = copy.deepcopy(have)
            body["metadata"]["labels"] = want["metadata"]["labels"]
            body["metadata"]["ownerReferences"] = [owner_reference(cluster)]
            body["spec"] = want["spec"]
            ips = " ".join(want["spec"]["ipAddresses"])
            self.recorder.event(
                cluster,
                NORMAL,
                c.EVENT_MTLS_CERTIFICATES_UPDATED,
                f"Updated {node_type} certificate SANs (IPs: [{ips}])",
                "Update",
            )
            have = await self.client.update(CM_CERTIFICATES, body)
            self.certificates.record_write(have, based_on=body["metadata"].get("resourceVersion"))
        await self._own_secret(have)

    async def _own_secret(self, cert: Obj) -> None:
        """upstream: ensureSecretOwnedByCertificate."""
        name = (cert.get("spec") or {}).get("secretName")
        ns = cert["metadata"]["namespace"]
        if not name:
            return
        try:
            secret = await self.client.get(SECRETS, name, ns)
        except NotFound:
            return  # not issued yet
        refs = mtls.secret_owner_references(secret, cert)
        if refs is None:
            return
        secret["metadata"]["ownerReferences"] = refs
        with contextlib.suppress(NotFound):
            await self.client.update(SECRETS, secret)

    def _warn_expiring(self, cluster: Obj, certs: list[Obj | None]) -> None:
        """upstream: checkTLSCertificateExpiry."""
        now = dt.datetime.now(dt.UTC)
        for cert in certs:
            left = None if cert is None else hours_left(cert, now)
            if cert is None or left is None or left >= EXPIRY_WARNING_HOURS:
                continue
            self.recorder.event(
                cluster,
                WARNING,
                c.EVENT_MTLS_CERTIFICATE_EXPIRING_SOON,
                f"TLS certificate {cert['metadata']['name']} expires in {left:.1f} hours; Ray "
                "does not hot-reload certs so a pod restart will be needed after renewal",
                "Reconcile",
            )


def register(
    mgr: Manager,
    options: BuildOptions,
    clusters: ResourceCache,
    pods: ResourceCache,
    namespaces: list[str] | None = None,
) -> MTLSReconciler:
    """Builds the reconciler over the RayCluster controller's cluster and pod caches and
    caches of the Issuers and Certificates labelled with a cluster. Every RayCluster event
    triggers it (no generation predicate: a status change follows pod changes), as do changes
    of the objects it owns and of the clusters' pods. upstream: SetupWithManager."""
    reconciler = MTLSReconciler(
        mgr.client,
        mgr.recorder(c.RECORDER_MTLS),
        options,
        clusters,
        pods,
        mgr.cache(CM_ISSUERS, namespaces=namespaces, label_selector=c.LABEL_CLUSTER),
        mgr.cache(CM_CERTIFICATES, namespaces=namespaces, label_selector=c.LABEL_CLUSTER),
    )
    ctrl = mgr.controller("raycluster-mtls", reconciler.reconcile, concurrency=1)
    ctrl.for_(clusters)
    for owned in (reconciler.issuers, reconciler.certificates, pods):
        ctrl.owns(owned, c.KIND_RAYCLUSTER, c.GROUP)
    reconciler.controller = ctrl
    return reconciler
