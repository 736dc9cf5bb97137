"""Ingress (or, on OpenShift, Route) to the head's dashboard (``headGroupSpec.enableIngress``).

Every RayCluster annotation is copied onto the Ingress so users can configure their controller
through the RayCluster, except ``kubernetes.io/ingress.class``, which becomes
``spec.ingressClassName`` instead (setting both is rejected by the apiserver).
The backend port is the head Service's ``dashboard`` port (8265 unless the head container says
otherwise).
"""

from __future__ import annotations

import copy

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    as_dict,
    as_list,
    cluster_annotations,
    cluster_name,
    cluster_namespace,
    head_spec,
    owner_reference,
)
from kuberay.builders.options import BuildOptions
from kuberay.builders.service import service_ports


def build_head_ingress(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """The dashboard Ingress in front of the head Service.
    upstream: ingress.go BuildIngressForHeadService."""
    name = cluster_name(cluster)
    head = head_spec(cluster)
    ingress_options = as_dict(head.get("ingressOptions"))
    annotations = cluster_annotations(cluster)
    ingress_class = annotations.pop(c.ANNOTATION_INGRESS_CLASS, None)
    dashboard_port = service_ports(cluster).get(c.DASHBOARD_PORT_NAME, c.DASHBOARD_PORT)
    rule: JsonDict = {
        "http": {
            "paths": [
                {
                    "path": ingress_options.get("path") or "/",
                    "pathType": ingress_options.get("pathType") or "Prefix",
                    "backend": {
                        "service": {
                            "name": names.head_service_name(cluster),
                            "port": {"number": dashboard_port},
                        }
                    },
                }
            ]
        }
    }
    if ingress_options.get("host"):
        rule = {"host": ingress_options["host"], **rule}
    spec: JsonDict = {"rules": [rule]}
    if ingress_class is not None:
        spec = {"ingressClassName": ingress_class, **spec}
    if as_list(ingress_options.get("tls")):
        spec["tls"] = copy.deepcopy(ingress_options["tls"])
    metadata: JsonDict = {
        "name": names.ingress_name(name),
        "namespace": cluster_namespace(cluster),
        "labels": {
            c.LABEL_CLUSTER: name,
            c.LABEL_IDENTIFIER: names.identifier(name, c.NODE_TYPE_HEAD),
            c.LABEL_APP_NAME: c.APP_NAME,
            c.LABEL_CREATED_BY: c.CREATED_BY,
        },
    }
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(cluster)]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }


def build_head_route(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """OpenShift Route to the dashboard, used instead of an Ingress where the Route API exists
    (unless ``USE_INGRESS_ON_OPENSHIFT``). Unlike the Ingress it keeps every annotation.
    upstream: route.go BuildRouteForHeadService."""
    name = cluster_name(cluster)
    namespace = cluster_namespace(cluster)
    metadata: JsonDict = {
        "name": names.route_name(name, namespace),
        "namespace": namespace,
        "labels": {
            c.LABEL_CLUSTER: name,
            c.LABEL_IDENTIFIER: f"{name}-{c.NODE_TYPE_HEAD}",
            c.LABEL_APP_NAME: c.APP_NAME,
            c.LABEL_CREATED_BY: c.CREATED_BY,
        },
    }
    annotations = cluster_annotations(cluster)
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(cluster)]
    return {
        "apiVersion": "route.openshift.io/v1",
        "kind": "Route",
        "metadata": metadata,
        "spec": {
            "to": {"kind": "Service", "name": names.head_service_name(cluster), "weight": 100},
            "port": {
                "targetPort": service_ports(cluster).get(c.DASHBOARD_PORT_NAME, c.DASHBOARD_PORT)
            },
            "wildcardPolicy": "None",
        },
    }
