"""The head Service, the headless worker Service (multi-host groups) and the serve Service.

Invariants: selectors always come from the operator (a user-supplied ``headService`` keeps its
other fields but never its selector, and our labels win over its labels); port lists are emitted
in a fixed order so rebuilding a Service never produces a spurious diff. The head Service is
headless by default (``clusterIP: None`` with ``publishNotReadyAddresses``) because a cluster
has at most one head pod and workers must reach it before it reports ready; only a
ClusterIP-typed, operator-built Service is switched, and ``ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE``
turns that off.

Failure modes: ``build_serve_service`` raises ``BuildError`` when the head container declares
ports but none is named ``serve`` / ``serve-*``.
"""

from __future__ import annotations

import copy
from typing import Any

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    as_dict,
    as_list,
    cluster_name,
    cluster_namespace,
    head_spec,
    owner_reference,
    spec_of,
)
from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions

APP_PROTOCOL = "tcp"


def service_ports(cluster: JsonDict) -> dict[str, int]:
    """Head container ports by name (unnamed ones as ``<n>-port``), else the five defaults;
    ``metrics`` is always present.
    upstream: getServicePorts (with getPortsFromCluster, getDefaultPorts)."""
    template_spec = as_dict(as_dict(head_spec(cluster).get("template")).get("spec"))
    containers = as_list(template_spec.get("containers"))
    ports: dict[str, int] = {}
    if containers:
        for port in as_list(as_dict(containers[0]).get("ports")):
            port = as_dict(port)
            number = int(port.get("containerPort", 0))
            ports[str(port.get("name") or f"{number}-port")] = number
    if not ports:
        ports = dict(c.DEFAULT_PORTS)
    ports.setdefault(c.METRICS_PORT_NAME, c.METRICS_PORT)
    return ports


def head_service_labels(cluster: JsonDict) -> dict[str, str]:
    """Labels (and selector) of the head Service; the app name follows the head template.
    upstream: HeadServiceLabels."""
    name = cluster_name(cluster)
    template_labels = as_dict(as_dict(head_spec(cluster).get("template")).get("metadata")).get(
        "labels"
    )
    app_name = as_dict(template_labels).get(c.LABEL_APP_NAME, c.APP_NAME)
    return {
        c.LABEL_CLUSTER: name,
        c.LABEL_NODE_TYPE: c.NODE_TYPE_HEAD,
        c.LABEL_IDENTIFIER: names.identifier(name, c.NODE_TYPE_HEAD),
        c.LABEL_APP_NAME: str(app_name),
        c.LABEL_CREATED_BY: c.CREATED_BY,
    }


def build_head_service(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """The cluster's head Service, merged with the user's ``headService``.
    upstream: service.go BuildServiceForHeadPod."""
    head = head_spec(cluster)
    selector = head_service_labels(cluster)
    annotations = {
        str(k): str(v) for k, v in as_dict(spec_of(cluster).get("headServiceAnnotations")).items()
    }
    ports: list[JsonDict] = [
        {"name": name, "port": port, "appProtocol": APP_PROTOCOL}
        for name, port in sorted(service_ports(cluster).items())
    ]
    service_type = head.get("serviceType") or ""
    namespace = cluster_namespace(cluster)
    custom = head.get("headService")
    if isinstance(custom, dict):
        service: JsonDict = copy.deepcopy(custom)
        meta = as_dict(service.get("metadata"))
        spec = as_dict(service.get("spec"))
        spec["selector"] = dict(selector)
        meta["annotations"] = {**as_dict(meta.get("annotations")), **annotations}
        user_ports = [as_dict(p) for p in as_list(spec.get("ports"))]
        taken_names = {p.get("name") for p in user_ports}
        taken_numbers = {p.get("port") for p in user_ports}
        # Defaults fill in only what the user's Service does not already expose.
        spec["ports"] = user_ports + [
            p for p in ports if p["name"] not in taken_names and p["port"] not in taken_numbers
        ]
        meta["labels"] = {**as_dict(meta.get("labels")), **selector}
        meta["name"] = meta.get("name") or names.head_service_name(cluster)
        meta["namespace"] = namespace
        if not spec.get("type") and service_type:
            spec["type"] = service_type
        meta["ownerReferences"] = [owner_reference(cluster)]
        service.update({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})
        return service
    metadata: JsonDict = {
        "name": names.head_service_name(cluster),
        "namespace": namespace,
        "labels": dict(selector),
    }
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(cluster)]
    spec_out: JsonDict = {"selector": selector, "ports": ports}
    if service_type:
        spec_out["type"] = service_type
    if not options.head_cluster_ip_service and service_type in ("", "ClusterIP"):
        spec_out["clusterIP"] = "None"
        spec_out["publishNotReadyAddresses"] = True
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec_out}


def build_head_service_for_cr(
    cluster: JsonDict, options: BuildOptions, cr_name: str, crd: str, owner: JsonDict
) -> JsonDict:
    """``<cr>-head-svc``: the head Service of ``cluster`` under a RayJob's or RayService's name.

    upstream: BuildHeadServiceForRayJob / BuildHeadServiceForRayService. The selector still picks
    the cluster's head pod, but the labels are the custom resource's alone (it is not one of the
    cluster's Services, so a ``ray.io/cluster`` selector must not match it), and the cluster's
    ``headServiceAnnotations`` stay on the cluster's own Service.
    """
    bare = copy.deepcopy(cluster)
    as_dict(bare.get("spec")).pop("headServiceAnnotations", None)
    service = build_head_service(bare, options)
    meta = as_dict(service.get("metadata"))
    meta["name"] = f"{cr_name}-head-svc"
    meta["namespace"] = cluster_namespace(cluster)
    meta["labels"] = {
        c.LABEL_ORIGINATED_FROM_CR_NAME: cr_name,
        c.LABEL_ORIGINATED_FROM_CRD: crd,
        c.LABEL_NODE_TYPE: c.NODE_TYPE_HEAD,
        c.LABEL_IDENTIFIER: names.identifier(cr_name, c.NODE_TYPE_HEAD),
    }
    meta["ownerReferences"] = [owner]
    if not meta.get("annotations"):
        meta.pop("annotations", None)
    service["metadata"] = meta
    return service


def build_headless_service(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """Peer DNS for multi-host worker groups; ready or not, every worker is published.
    upstream: BuildHeadlessServiceForRayCluster."""
    name = cluster_name(cluster)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.headless_service_name(name),
            "namespace": cluster_namespace(cluster),
            "labels": {c.LABEL_HEADLESS_WORKER_SVC: name},
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {c.LABEL_CLUSTER: name, c.LABEL_NODE_TYPE: c.NODE_TYPE_WORKER},
            "type": "ClusterIP",
            "publishNotReadyAddresses": True,
        },
    }


def _is_serve_port(name: Any) -> bool:
    """A port named ``serve`` or ``serve-*``. upstream: isServingPort."""
    return name == c.SERVE_PORT_NAME or str(name).startswith(c.SERVE_PORT_NAME + "-")


def build_serve_service(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """``<cluster>-serve-svc`` for clusters annotated ``ray.io/enable-serve-service: "true"``.
    upstream: BuildServeServiceForRayCluster (via BuildServeService)."""
    name = cluster_name(cluster)
    ports = [
        {"name": port_name, "port": number}
        for port_name, number in service_ports(cluster).items()
        if _is_serve_port(port_name)
    ]
    if not ports:
        raise BuildError(
            "Please specify the port named 'serve' in the Ray head container; "
            "otherwise, the Kubernetes service for Ray Serve will not be created."
        )
    spec: JsonDict = {"selector": {c.LABEL_CLUSTER: name}, "ports": ports}
    service_type = head_spec(cluster).get("serviceType")
    if service_type:
        spec["type"] = service_type
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.serve_service_name(name),
            "namespace": cluster_namespace(cluster),
            "labels": {
                c.LABEL_ORIGINATED_FROM_CR_NAME: name,
                c.LABEL_ORIGINATED_FROM_CRD: c.KIND_RAYCLUSTER,
                c.LABEL_SERVE: f"{name}-serve",
            },
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": spec,
    }
