"""The RBAC statements of docs/threat-model.md, checked against the generated manifests.

The ClusterRole table in the document must be the committed ``deploy/rbac/cluster_role.yaml``
rule for rule, and every permission the document says is absent must be absent from every role
the operator can be installed with: the static ClusterRole, the leader-election Role, the Helm
chart's rules (with and without the batch-scheduler additions) and the autoscaler Role the
operator itself creates. The endpoint table is checked against the servers' routes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api import constants as c
from kuberay.api import rbac_rules as rr
from kuberay.api.webhook import PATHS, handlers
from kuberay.builders import rbac as autoscaler_rbac
from kuberay.cli import manifests
from kuberay.runtime.webhook import WebhookServer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "threat-model.md"
DEPLOY = ROOT / "deploy"
HELPERS = DEPLOY / "helm" / "kuberay-operator" / "templates" / "_rules.tpl"

Rule = dict[str, Any]
Triple = tuple[str, str, str]

# (group, resource, verb) the document promises the operator never holds.
ABSENT: list[Triple] = [
    *[("", "secrets", v) for v in ("list", "watch", "patch", "delete")],
    *[
        ("", sub, v)
        for sub in ("pods/exec", "pods/attach", "pods/portforward", "pods/log", "pods/proxy")
        for v in ("get", "create")
    ],
    *[("", res, v) for res in ("nodes", "namespaces", "configmaps") for v in ("get", "list")],
    ("", "serviceaccounts/token", "create"),
    ("", "pods", "deletecollection"),
    ("", "services", "deletecollection"),
    *[
        ("rbac.authorization.k8s.io", res, v)
        for res in ("clusterroles", "clusterrolebindings", "roles", "rolebindings")
        for v in ("create", "update", "bind", "escalate")
    ],
    ("", "users", "impersonate"),
    ("", "serviceaccounts", "impersonate"),
    ("", "groups", "impersonate"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "update"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "create"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "create"),
]
# ...but roles/rolebindings create is granted (the autoscaler Role): the escalation check is
# what makes that safe, so only bind/escalate/update on them must be absent.
GRANTED_EXCEPTIONS: set[Triple] = {
    ("rbac.authorization.k8s.io", "roles", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "create"),
}


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _helm_rules() -> tuple[list[Rule], list[Rule]]:
    """The chart's rule block and its batch-scheduler additions, read from the template."""
    text = HELPERS.read_text()
    start = text.index('{{- define "kuberay-operator.rules" -}}')
    body = text[start:].split("\n", 1)[1]
    base, rest = body.split('{{- if include "kuberay-operator.batchScheduler" . }}', 1)
    batch = rest.split("{{- end }}", 1)[0]
    return yaml.safe_load(base), yaml.safe_load(batch)


def _autoscaler_rules() -> list[Rule]:
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {"headGroupSpec": {"template": {"spec": {}}}},
    }
    rules: list[Rule] = autoscaler_rbac.build_autoscaler_role(cluster)["rules"]
    return rules


def all_roles() -> dict[str, list[Rule]]:
    helm, batch = _helm_rules()
    return {
        "deploy/rbac/cluster_role.yaml": _yaml(DEPLOY / "rbac" / "cluster_role.yaml")["rules"],
        "deploy/rbac/leader_election_role.yaml": _yaml(
            DEPLOY / "rbac" / "leader_election_role.yaml"
        )["rules"],
        "helm rules": helm,
        "helm batch-scheduler rules": batch,
        "autoscaler Role": _autoscaler_rules(),
    }


def triples(rules: list[Rule]) -> set[Triple]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule.get("verbs", [])
    }


def _doc() -> str:
    return DOC.read_text()


def _doc_cluster_role() -> list[Rule]:
    block = _doc().split("<!-- cluster-role-begin -->")[1].split("<!-- cluster-role-end -->")[0]
    rules = []
    for line in block.strip().splitlines()[2:]:  # header and separator
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        group = cells[0].strip("`")
        rules.append(
            {
                "apiGroups": ["" if group == "core" else group],
                "resources": [r.strip(" `") for r in cells[1].split(",")],
                "verbs": [v.strip() for v in cells[2].split(",")],
            }
        )
    return rules


def test_doc_table_is_the_generated_cluster_role() -> None:
    committed = _yaml(DEPLOY / "rbac" / "cluster_role.yaml")["rules"]
    assert _doc_cluster_role() == committed, "docs/threat-model.md's RBAC table is stale"
    assert committed == rr.policy(rr.OPERATOR_RULES)


def test_doc_is_linked_from_the_readme() -> None:
    assert "docs/threat-model.md" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("role", list(all_roles()))
def test_no_wildcards(role: str) -> None:
    for rule in all_roles()[role]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(key, []), f"{role}: wildcard in {key}: {rule}"
        assert "nonResourceURLs" not in rule, f"{role}: {rule}"
        assert "resourceNames" not in rule or rule["resourceNames"], f"{role}: {rule}"


@pytest.mark.parametrize("role", list(all_roles()))
def test_no_escalation_verbs(role: str) -> None:
    verbs = {v for _, _, v in triples(all_roles()[role])}
    assert not verbs & {"escalate", "bind", "impersonate", "deletecollection"}, role


@pytest.mark.parametrize("role", list(all_roles()))
def test_documented_absences(role: str) -> None:
    held = triples(all_roles()[role])
    unexpected = sorted((set(ABSENT) - GRANTED_EXCEPTIONS) & held)
    assert unexpected == [], f"{role} grants what docs/threat-model.md says it does not"


def test_secrets_only_get_create_and_update() -> None:
    # update: the mTLS owner reference on cert-manager's Secrets (RayClusterMTLS), as upstream.
    for role, rules in all_roles().items():
        verbs = {v for g, r, v in triples(rules) if g == "" and r == "secrets"}
        assert verbs <= {"get", "create", "update"}, role
    assert rr.grants(rr.OPERATOR_RULES, "", "secrets", "get")


def test_leases_only_namespaced_and_status_only_updated() -> None:
    held = triples(all_roles()["deploy/rbac/cluster_role.yaml"])
    assert not any(g == "coordination.k8s.io" for g, _, _ in held)
    le = _yaml(DEPLOY / "rbac" / "leader_election_role.yaml")
    assert le["kind"] == "Role"
    assert triples(le["rules"]) == {
        ("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")
    }
    sub = {(r, v) for g, r, v in held if g == c.GROUP and "/" in r}
    assert {v for _, v in sub} == {"update"}


def test_autoscaler_role_within_what_the_operator_holds() -> None:
    """Without ``escalate`` the apiserver refuses a Role granting more than its creator holds."""
    held = triples(all_roles()["deploy/rbac/cluster_role.yaml"])
    assert triples(_autoscaler_rules()) <= held


def test_bindings_name_only_the_operator_service_account() -> None:
    for name, kind in (
        ("cluster_role_binding.yaml", "ClusterRole"),
        ("leader_election_role_binding.yaml", "Role"),
    ):
        binding = _yaml(DEPLOY / "rbac" / name)
        assert binding["roleRef"]["kind"] == kind
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": manifests.NAME, "namespace": "default"}
        ]


def test_deployment_hardening_and_exposed_ports() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "operator.yaml").read_text()))
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert not pod.get("hostNetwork")
    assert not pod.get("hostPID")
    (ctr,) = pod["containers"]
    sc = ctr["securityContext"]
    assert sc["runAsNonRoot"]
    assert sc["readOnlyRootFilesystem"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {p["containerPort"] for p in ctr["ports"]} == {8080, 8082}
    assert "ENABLE_WEBHOOKS" not in {e["name"] for e in ctr.get("env", [])}
    svc = next(d for d in docs if d["kind"] == "Service")
    assert [p["port"] for p in svc["spec"]["ports"]] == [8080], "only metrics has a Service"
    assert svc["spec"]["type"] == "ClusterIP"
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}


def test_webhook_routes_are_the_documented_ones(tmp_path: Path) -> None:
    server = WebhookServer(handlers(), cert_dir=tmp_path)
    routes = {
        (route.method, route.resource.canonical)
        for route in server._app().router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    assert routes == {("POST", path) for path in PATHS} | {("GET", "/healthz")}
    assert server.port == c.WEBHOOK_PORT == 9443
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0, "serving key is private"
    documented = re.search(r"validate-ray-io-v1-\{([^}]*)\}", _doc())
    assert documented is not None
    assert {f"/validate-ray-io-v1-{k}" for k in documented.group(1).split(",")} == set(PATHS)


async def test_probe_and_metrics_routes_are_the_documented_ones() -> None:
    import aiohttp
    from prometheus_client import CollectorRegistry

    from kuberay.runtime.serving import Endpoints

    endpoints = Endpoints(CollectorRegistry())
    await endpoints.start("127.0.0.1:0", "127.0.0.1:0")
    try:
        (host, port), *_ = endpoints.bound
        async with aiohttp.ClientSession() as session:
            codes = {}
            for path in ("/metrics", "/healthz", "/readyz", "/debug/pprof/", "/", "/configz"):
                async with session.get(f"http://{host}:{port}{path}") as resp:
                    codes[path] = resp.status
    finally:
        await endpoints.stop()
    assert codes == {
        "/metrics": 200,
        "/healthz": 200,
        "/readyz": 200,
        "/debug/pprof/": 404,
        "/": 404,
        "/configz": 404,
    }
