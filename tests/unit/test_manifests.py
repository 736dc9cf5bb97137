"""Install artefacts in deploy/: current, least-privilege yet sufficient (the chart: test_chart.py).

The RBAC check reads the controllers' and runtime's source: every API call names a Resource constant
and a client verb, so the permissions the code needs can be computed and compared with
``kuberay.api.rbac_rules`` both ways (nothing missing, nothing unused). Calls through a variable are
listed in ``INDIRECT`` by hand; a new one fails the test until it is listed.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kuberay.api import constants, crdgen
from kuberay.api import rbac_rules as rr
from kuberay.builders import rbac as autoscaler_rbac
from kuberay.cli import manifests
from kuberay.cli.main import build_parser
from kuberay.cli.main import main as cli_main
from kuberay.controllers import (
    common,
    dashboards,
    mtls,
    networkpolicy,
    raycluster,
    raycronjob,
    rayjob,
    rayservice,
)
from kuberay.devenv.testing import skip_unless_strict
from kuberay.runtime import client, events, leader
from kuberay.runtime.client import Resource

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCANNED: tuple[ModuleType, ...] = (
    raycluster,
    raycronjob,
    rayjob,
    rayservice,
    networkpolicy,
    mtls,
    dashboards,
    events,
    leader,
)
RESOURCE_MODULES: tuple[ModuleType, ...] = (client, events, common, *SCANNED)

# client method (or controller helper wrapping one) -> RBAC verbs it needs.
VERBS = {
    "get": ("get",),
    "list": ("list",),
    "watch": ("watch",),
    "create": ("create",),
    "update": ("update",),
    "update_status": ("update",),
    "patch": ("patch",),
    "delete": ("delete",),
    "informer": ("list", "watch"),
    "cache": ("list", "watch"),
    "_create_if_missing": ("create",),
    "_get_optional": ("get",),
    "_delete_child": ("get", "delete"),
}
# Where the Resource is in the call, when it is not the first argument.
RESOURCE_ARG = {"_delete_child": 1}
# Helpers whose bodies call the client with their parameter; their callers are scanned instead.
GENERIC = {"_create_if_missing", "_get_optional", "_delete_child"}
# (module, function) -> resources the variable first argument can be there.
INDIRECT: dict[tuple[str, str], tuple[Resource, ...]] = {
    ("rayservice", "_delete_children"): (constants.RAYCLUSTERS, client.SERVICES),
    ("rayservice", "_apply_gateway_object"): (rayservice.GATEWAYS, rayservice.HTTPROUTES),
    ("rayservice", "_delete_gateway_objects"): (rayservice.GATEWAYS, rayservice.HTTPROUTES),
    ("raycluster", "_mtls_wait_reason"): (constants.CM_CERTIFICATES, client.SECRETS),
    ("mtls", "_ensure_created"): (constants.CM_ISSUERS, constants.CM_CERTIFICATES),
}
# Granted although no client call in the scanned code issues them, with the reason.
NOT_CALLED = {
    ("", "services/proxy", "create"): "dashboard POST through the API server proxy",
    ("", "services/proxy", "delete"): "dashboard DELETE through the API server proxy",
    ("", "services/proxy", "get"): "dashboard GET through the API server proxy",
    ("", "services/proxy", "update"): "dashboard PUT through the API server proxy",
    ("cert-manager.io", "certificates/finalizers", "update"): "blockOwnerDeletion on Secrets",
    **{
        ("ray.io", f"{plural}/finalizers", "update"): "blockOwnerDeletion"
        for plural in ("rayclusters", "rayjobs", "rayservices", "raycronjobs")
    },
}

Triple = tuple[str, str, str]


def _resources_by_name() -> dict[str, Resource]:
    out: dict[str, Resource] = {}
    for module in RESOURCE_MODULES:
        out.update({k: v for k, v in vars(module).items() if isinstance(v, Resource)})
    return out


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, str]:
    owner: dict[ast.AST, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                owner[node] = fn.name  # ast.walk is outer-first: the innermost name wins
    return owner


def _subresource(call: ast.Call, method: str) -> str:
    if method == "update_status":
        return "status"
    for kw in call.keywords:
        if kw.arg == "subresource" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    return ""


def used_permissions() -> tuple[set[Triple], set[tuple[str, str]]]:
    """(group, resource, verb) the scanned code needs, and the indirect call sites seen."""
    names = _resources_by_name()
    used: set[Triple] = set()
    indirect_seen: set[tuple[str, str]] = set()
    for module in SCANNED:
        path = Path(module.__file__ or "")
        tree = ast.parse(path.read_text())
        owner = _enclosing_functions(tree)
        short = module.__name__.rsplit(".", 1)[-1]
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            method = call.func.attr
            receiver = ast.unparse(call.func.value)
            index = RESOURCE_ARG.get(method, 0)
            if method not in VERBS or len(call.args) <= index:
                continue
            # ``caches``: the CacheSource (the Manager) a reconciler builds its caches from.
            if not (receiver.endswith("client") or receiver in ("mgr", "self", "caches")):
                continue
            fn = owner.get(call, "")
            first = call.args[index]
            if isinstance(first, ast.Name) and first.id in names:
                targets: tuple[Resource, ...] = (names[first.id],)
            elif fn in GENERIC:
                continue
            elif (short, fn) in INDIRECT:
                indirect_seen.add((short, fn))
                targets = INDIRECT[(short, fn)]
            else:
                pytest.fail(f"{path.name}:{call.lineno}: unresolved {ast.unparse(call)[:80]}")
            sub = _subresource(call, method)
            for res in targets:
                plural = f"{res.plural}/{sub}" if sub else res.plural
                used.update((res.group, plural, verb) for verb in VERBS[method])
    return used, indirect_seen


def granted(rules: tuple[rr.Rule, ...]) -> set[Triple]:
    return {(r.group, res, v) for r in rules for res in r.resources for v in r.verbs}


def _autoscaler_role() -> dict[str, Any]:
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {"headGroupSpec": {"template": {"spec": {}}}},
    }
    return autoscaler_rbac.build_autoscaler_role(cluster)


def autoscaler_grants() -> set[Triple]:
    return {
        (group, res, verb)
        for rule in _autoscaler_role()["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }


# ---------------------------------------------------------------------- RBAC


def test_rbac_rules_grant_every_call_the_code_makes() -> None:
    used, indirect = used_permissions()
    assert indirect == set(INDIRECT), "an INDIRECT entry no longer matches any call"
    have = granted(rr.OPERATOR_RULES) | granted(rr.LEADER_ELECTION_RULES)
    assert sorted(used - have) == []


def test_rbac_rules_grant_nothing_unused() -> None:
    used, _ = used_permissions()
    justified = used | autoscaler_grants() | set(NOT_CALLED)
    have = granted(rr.OPERATOR_RULES) | granted(rr.LEADER_ELECTION_RULES)
    assert sorted(have - justified) == []


def test_operator_holds_what_the_autoscaler_role_grants() -> None:
    """Kubernetes refuses to let a subject create a Role granting more than it holds."""
    assert sorted(autoscaler_grants() - granted(rr.OPERATOR_RULES)) == []


def test_leases_only_in_the_leader_election_role() -> None:
    assert all(r.group != "coordination.k8s.io" for r in rr.OPERATOR_RULES)
    assert rr.grants(rr.LEADER_ELECTION_RULES, "coordination.k8s.io", "leases", "update")
    assert not rr.grants(rr.OPERATOR_RULES, "", "secrets", "list"), "no cluster-wide secret reads"


def test_policy_is_sorted_and_merged_per_group_and_resource() -> None:
    rules = rr.policy(rr.OPERATOR_RULES)
    keys = [(r["apiGroups"][0], r["resources"]) for r in rules]
    assert keys == sorted(keys)
    seen = [(g, res) for g, rs in keys for res in rs]
    assert len(seen) == len(set(seen)), "a resource appears in two rules"


# ---------------------------------------------------------------------- generated files


def test_committed_manifests_are_current() -> None:
    stale = manifests.stale_files(DEPLOY)
    assert not stale, f"regenerate with `kuberay manifests`: {stale}"


def _copy_crds(target: Path) -> None:
    (target / "crds").mkdir(parents=True)
    for kind in crdgen.KINDS:
        name = crdgen.filename(kind)
        shutil.copyfile(DEPLOY / "crds" / name, target / "crds" / name)


def test_check_flag_and_cli_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["manifests", "--check", "--output", str(tmp_path)]) == 1
    assert "run `kuberay crds` first" in capsys.readouterr().err
    _copy_crds(tmp_path)
    assert cli_main(["manifests", "--check", "--output", str(tmp_path)]) == 1
    assert cli_main(["manifests", "--output", str(tmp_path)]) == 0
    assert cli_main(["manifests", "--check", "--output", str(tmp_path)]) == 0
    (tmp_path / "rbac" / "cluster_role.yaml").write_text("stale\n")
    assert manifests.stale_files(tmp_path) == ["rbac/cluster_role.yaml"]
    capsys.readouterr()
    assert cli_main(["manifests", "--output", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "rbac" / "cluster_role.yaml")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_static_manifests_wire_up() -> None:
    (sa,) = _docs(DEPLOY / "rbac" / "service_account.yaml")
    (role,) = _docs(DEPLOY / "rbac" / "cluster_role.yaml")
    (binding,) = _docs(DEPLOY / "rbac" / "cluster_role_binding.yaml")
    (le_role,) = _docs(DEPLOY / "rbac" / "leader_election_role.yaml")
    (le_binding,) = _docs(DEPLOY / "rbac" / "leader_election_role_binding.yaml")
    dep, svc = _docs(DEPLOY / "operator.yaml")
    assert role["rules"] == rr.policy(rr.OPERATOR_RULES)
    assert le_role["rules"] == rr.policy(rr.LEADER_ELECTION_RULES)
    for bind, target in ((binding, role), (le_binding, le_role)):
        assert bind["roleRef"]["kind"] == target["kind"]
        assert bind["roleRef"]["name"] == target["metadata"]["name"]
        assert bind["subjects"][0]["name"] == sa["metadata"]["name"] == "kuberay-operator"
    for obj in (sa, le_role, le_binding, dep, svc):
        assert "namespace" not in obj["metadata"], "namespace comes from kustomize / kubectl -n"
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kuberay-operator"
    (ctr,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert ports == {"http-metrics": 8080, "health": 8082}
    assert svc["spec"]["ports"][0]["targetPort"] == "http-metrics"
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert ctr["securityContext"]["readOnlyRootFilesystem"] is True
    assert ctr["resources"]["limits"] == {"cpu": "100m", "memory": "512Mi"}
    args = build_parser().parse_args(ctr["args"])
    assert args.command == "operator"
    assert args.enable_leader_election is True
    assert args.health_probe_bind_address == ":8082"


def _kubectl() -> str | None:
    from kuberay.devenv import binaries

    found = binaries.locate("kubectl")
    return str(found) if found else shutil.which("kubectl")


@pytest.mark.needs_go
def test_kustomization_moves_every_object_and_binding_to_its_namespace(tmp_path: Path) -> None:
    kubectl = _kubectl()
    if kubectl is None:
        skip_unless_strict("no kubectl (kustomize): `kuberay dev build` builds one")
    shutil.copytree(DEPLOY, tmp_path / "deploy", ignore=shutil.ignore_patterns("helm", "crds"))
    kfile = tmp_path / "deploy" / "kustomization.yaml"
    kfile.write_text(kfile.read_text().replace("namespace: kuberay-system", "namespace: ops"))
    out = subprocess.run(
        [kubectl, "kustomize", str(tmp_path / "deploy")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = {d["kind"]: d for d in docs}
    assert kinds["Namespace"]["metadata"]["name"] == "ops"
    for d in docs:
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"]["namespace"] == "ops", d["kind"]
        for subject in d.get("subjects", []):
            assert subject["namespace"] == "ops", d["kind"]
