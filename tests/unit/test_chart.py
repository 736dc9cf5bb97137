"""The Helm chart in deploy/helm, rendered and linted by real Helm (the ``helm`` fixture).

What the chart must keep true, value switch by value switch:
- its operator is the static manifests' operator (same container, rules and probes) and every
  argument it renders is one ``kuberay operator`` accepts;
- names and the Deployment selector are upstream's (``helm upgrade`` from an upstream release
  cannot change a selector), and the override values move them as upstream's do;
- every ``.Values`` reference in a template resolves and every value is read by some template;
- the user-facing editor and viewer ClusterRoles grant only what their names say.
Without Helm the tests skip on a developer's machine and fail in CI (``conftest.helm``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import kuberay
from kuberay.api import crdgen, features
from kuberay.api import rbac_rules as rr
from kuberay.cli import manifests
from kuberay.cli.main import build_parser
from kuberay.cli.operator import settings_from_args

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "kuberay-operator"
# The conftest fixtures' types: run_helm(*args, values=None), render_chart(values, ...).
HelmRun = Callable[..., subprocess.CompletedProcess[str]]
Render = Callable[..., list[dict[str, Any]]]
KINDS = ("raycluster", "rayjob", "rayservice", "raycronjob")
_VALUE_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")

Doc = dict[str, Any]


def _values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def _by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: list[Doc], kind: str) -> Doc:
    (doc,) = _by_kind(docs, kind)
    return doc


def _container(docs: list[Doc]) -> Doc:
    (ctr,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(ctr, dict)
    return ctr


def _args(docs: list[Doc]) -> Any:
    args = _container(docs)["args"]
    assert args[0] == "operator"
    return build_parser().parse_args(args)


def _user_roles(docs: list[Doc]) -> dict[str, Doc]:
    return {
        d["metadata"]["name"]: d
        for d in _by_kind(docs, "ClusterRole")
        if d["metadata"]["name"].endswith(("-editor-role", "-viewer-role"))
    }


# ---------------------------------------------------------------------- files


def test_chart_structure() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "kuberay-operator"
    assert chart["type"] == "application"
    assert chart["version"] == chart["appVersion"] == kuberay.__version__
    templates = {p.name for p in (CHART / "templates").iterdir()}
    assert {"_helpers.tpl", "_rules.tpl", "deployment.yaml", "rbac.yaml"} <= templates
    assert {"leader_election.yaml", "serviceaccount.yaml", "service.yaml"} <= templates
    assert {"servicemonitor.yaml", "configmap.yaml", "user_roles.yaml"} <= templates
    for kind in crdgen.KINDS:
        name = crdgen.filename(kind)
        copied = (CHART / "crds" / name).read_bytes()
        assert copied == (DEPLOY / "crds" / name).read_bytes()


def test_values_agree_with_the_code_and_every_reference_resolves() -> None:
    values = _values()
    assert values["image"]["tag"] == kuberay.__version__
    assert [(g["name"], g["enabled"]) for g in values["featureGates"]] == [
        (g.name, g.default) for g in features.GATES
    ]
    assert values["livenessProbe"] == manifests.LIVENESS
    assert values["readinessProbe"] == manifests.READINESS
    assert values["resources"] == manifests.RESOURCES
    assert values["securityContext"] == manifests.SECURITY_CONTEXT
    referenced: set[str] = set()
    for path in (CHART / "templates").iterdir():
        for match in _VALUE_REF.finditer(path.read_text()):
            keys = match.group(1).strip(".").split(".")
            node: Any = values
            for key in keys:
                assert isinstance(node, dict), f"{path.name}: .Values.{match.group(1)}"
                assert key in node, f"{path.name}: .Values{match.group(1)} is not in values.yaml"
                node = node[key]
            referenced.add(keys[0])
    assert sorted(set(values) - referenced) == [], "values no template reads"


def test_chart_lints_clean(run_helm: HelmRun) -> None:
    for values in (
        {},
        {"configuration": {"enabled": True}, "logging": {"baseDir": "/l", "fileName": "f"}},
        {"singleNamespaceInstall": True, "watchNamespace": ["a"]},
        {"metrics": {"serviceMonitor": {"enabled": True}}, "batchScheduler": {"name": "volcano"}},
    ):
        proc = run_helm("lint", "--strict", "--namespace", "ops", str(CHART), values=values)
        assert proc.returncode == 0, (values, proc.stdout, proc.stderr)
        assert "[WARNING]" not in proc.stdout, proc.stdout
        assert "[ERROR]" not in proc.stdout, proc.stdout


# ---------------------------------------------------------------------- defaults


def test_chart_renders_the_same_operator_as_the_static_manifests(render_chart: Render) -> None:
    docs = render_chart()
    role = next(d for d in _by_kind(docs, "ClusterRole") if d["metadata"]["name"] == manifests.NAME)
    assert role["rules"] == rr.policy(rr.OPERATOR_RULES)
    le_role = _one(docs, "Role")
    assert le_role["rules"] == rr.policy(rr.LEADER_ELECTION_RULES)
    assert le_role["metadata"]["namespace"] == "ops"
    binding = _one(docs, "ClusterRoleBinding")
    sa = _one(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "ops"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    ctr = _container(docs)
    static = manifests.container()
    for key in ("command", "env", "ports", "livenessProbe", "readinessProbe", "resources"):
        assert ctr[key] == static[key], key
    assert ctr["securityContext"] == static["securityContext"]
    assert ctr["args"][: len(static["args"])] == static["args"]
    args = _args(docs)
    assert args.reconcile_concurrency == 8
    assert args.qps == 100
    assert args.burst == 200
    assert args.watch_namespace == ""
    assert args.log_file_encoder == "json"
    assert args.log_file_path == ""
    assert features.FeatureGates.parse(args.feature_gates).enabled("RayClusterStatusConditions")
    assert not _by_kind(docs, "ServiceMonitor")
    assert not _by_kind(docs, "ConfigMap")
    assert settings_from_args(args).enable_metrics is True


def test_names_and_selector_are_upstreams(render_chart: Render) -> None:
    docs = render_chart(release="anything")
    for doc in docs:
        if not doc["metadata"]["name"].endswith(("-editor-role", "-viewer-role")):
            assert doc["metadata"]["name"].startswith(manifests.NAME), doc["kind"]
    dep = _one(docs, "Deployment")
    assert dep["metadata"]["name"] == "kuberay-operator"
    selector = {
        "app.kubernetes.io/name": "kuberay-operator",
        "app.kubernetes.io/instance": "anything",
    }
    assert dep["spec"]["selector"]["matchLabels"] == selector
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == {**selector, "app.kubernetes.io/component": "kuberay-operator"}
    assert _one(docs, "Service")["spec"]["selector"] == selector
    assert _one(docs, "ServiceAccount")["metadata"]["name"] == "kuberay-operator"
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Role", "kuberay-operator-leader-election") in names
    assert ("ClusterRoleBinding", "kuberay-operator") in names


# ---------------------------------------------------------------------- value switches


def test_name_overrides(render_chart: Render) -> None:
    plain = {"nameOverride": "", "fullnameOverride": ""}
    dep = _one(render_chart(plain, release="kr"), "Deployment")
    assert dep["metadata"]["name"] == "kr-kuberay-operator"
    dep = _one(render_chart(plain, release="my-kuberay-operator"), "Deployment")
    assert dep["metadata"]["name"] == "my-kuberay-operator", "contains the name: used as is"

    docs = render_chart(
        {"nameOverride": "ray", "fullnameOverride": "", "componentOverride": "ctl"}, release="kr"
    )
    dep = _one(docs, "Deployment")
    assert dep["metadata"]["name"] == "kr-ray"
    assert dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "ray"
    assert dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "ctl"
    assert _one(docs, "ServiceAccount")["metadata"]["name"] == "kuberay-operator"

    docs = render_chart({"fullnameOverride": "op", "serviceAccount": {"name": ""}})
    assert {d["metadata"]["name"] for d in _by_kind(docs, "Deployment")} == {"op"}
    assert _one(docs, "ServiceAccount")["metadata"]["name"] == "op"
    assert _one(docs, "Role")["metadata"]["name"] == "op-leader-election"


def test_service_account_switches(render_chart: Render) -> None:
    docs = render_chart({"serviceAccount": {"create": False, "name": "mine"}})
    assert not _by_kind(docs, "ServiceAccount")
    dep = _one(docs, "Deployment")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    for binding in _by_kind(docs, "ClusterRoleBinding") + _by_kind(docs, "RoleBinding"):
        assert binding["subjects"][0]["name"] == "mine"

    docs = render_chart({"serviceAccount": {"create": False, "name": ""}})
    assert _one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "default"

    docs = render_chart({"rbacEnable": False, "serviceAccount": {"create": False}})
    assert {d["kind"] for d in docs} == {"Deployment", "Service"}


def test_configuration_configmap_and_config_flag(render_chart: Render, tmp_path: Path) -> None:
    values = {
        "configuration": {
            "enabled": True,
            "defaultContainerEnvs": [{"name": "RAY_x", "value": "1"}],
            "defaultPodAnnotations": {"a": "b"},
            "defaultPodLabels": {"team": "ml"},
            "headSidecarContainers": [{"name": "fluentbit", "image": "fluent/fluent-bit"}],
            "workerSidecarContainers": [{"name": "w", "image": "busybox"}],
        },
        "reconcileConcurrency": 3,
        "kubeClient": {"qps": 50.5, "burst": 70},
        "watchNamespace": ["a", "b"],
        "batchScheduler": {"name": "yunikorn"},
        "leaderElectionEnabled": False,
        "useKubernetesProxy": True,
        "logging": {"baseDir": "/var/log/kuberay", "fileName": "op.log", "fileEncoder": "console"},
        "featureGates": [{"name": "RayCronJob", "enabled": True}],
    }
    docs = render_chart(values)
    cm = _one(docs, "ConfigMap")
    assert cm["metadata"]["name"] == "kuberay-operator-config"
    assert cm["metadata"]["namespace"] == "ops"
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["apiVersion"] == "config.ray.io/v1alpha1"
    assert config["kind"] == "Configuration"

    dep = _one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    ctr = _container(docs)
    assert ctr["args"] == [
        "operator",
        "--config=/etc/kuberay/config.yaml",
        "--feature-gates=RayCronJob=true",
    ]
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    assert mounts["operator-config"] == {
        "name": "operator-config",
        "mountPath": "/etc/kuberay",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["operator-config"]["configMap"]["name"] == "kuberay-operator-config"
    assert "checksum/configuration" in dep["spec"]["template"]["metadata"]["annotations"]

    # The operator reads the rendered file as the chart means it.
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    args = _args(docs)
    args.config = str(path)
    s = settings_from_args(args)
    assert (s.metrics_addr, s.probe_addr) == (":8080", ":8082")
    assert s.enable_leader_election is False
    assert s.enable_metrics is True
    assert s.reconcile_concurrency == 3
    assert (s.qps, s.burst) == (50.5, 70)
    assert s.watch_namespace == ["a", "b"]
    assert s.batch_scheduler == "yunikorn"
    assert s.use_kubernetes_proxy is True
    assert s.log_file_path == "/var/log/kuberay/op.log"
    assert (s.log_stdout_encoder, s.log_file_encoder) == ("json", "console")
    assert s.default_container_envs == [{"name": "RAY_x", "value": "1"}]
    assert s.default_pod_annotations == {"a": "b"}
    assert s.default_pod_labels == {"team": "ml"}
    assert s.head_sidecar_containers[0]["name"] == "fluentbit"
    assert s.worker_sidecar_containers[0]["name"] == "w"
    assert features.FeatureGates.parse(s.feature_gates).enabled("RayCronJob")

    other = render_chart({**values, "reconcileConcurrency": 4})
    assert (
        _one(other, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        != dep["spec"]["template"]["metadata"]["annotations"]
    ), "a changed configuration rolls the operator"


def test_logging_values(render_chart: Render) -> None:
    docs = render_chart(
        {
            "logging": {
                "stdoutEncoder": "console",
                "fileEncoder": "console",
                "baseDir": "/var/log/kuberay/",
                "fileName": "operator.log",
                "sizeLimit": "1Gi",
            }
        }
    )
    args = _args(docs)
    assert args.log_stdout_encoder == "console"
    assert args.log_file_encoder == "console"
    assert args.log_file_path == "/var/log/kuberay/operator.log"
    ctr = _container(docs)
    assert {"name": "kuberay-logs", "mountPath": "/var/log/kuberay/"} in ctr["volumeMounts"]
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "kuberay-logs", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"]

    docs = render_chart({"logging": {"baseDir": "/var/log/kuberay", "fileName": ""}})
    assert _args(docs).log_file_path == "", "no file without both baseDir and fileName"
    assert [v["name"] for v in _one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]] == [
        "tmp"
    ]


def test_single_namespace_install_uses_roles_per_watched_namespace(render_chart: Render) -> None:
    docs = render_chart({"singleNamespaceInstall": True, "watchNamespace": ["a", "b"]})
    assert not _by_kind(docs, "ClusterRole"), "no operator ClusterRole, no user-facing roles"
    assert not _by_kind(docs, "ClusterRoleBinding")
    roles = {d["metadata"]["namespace"]: d for d in _by_kind(docs, "Role")}
    assert set(roles) == {"a", "b", "ops"}
    assert roles["a"]["rules"] == roles["b"]["rules"] == rr.policy(rr.OPERATOR_RULES)
    bindings = _by_kind(docs, "RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"a", "b", "ops"}
    assert all(b["subjects"][0]["namespace"] == "ops" for b in bindings)
    assert _args(docs).watch_namespace == "a,b"

    docs = render_chart({"singleNamespaceInstall": True})
    assert {d["metadata"]["namespace"] for d in _by_kind(docs, "Role")} == {"ops"}
    assert _args(docs).watch_namespace == "ops"

    docs = render_chart({"singleNamespaceInstall": True, "crNamespacedRbacEnable": False})
    assert len(_by_kind(docs, "Role")) == 1, "only the leader-election Role"

    docs = render_chart({"watchNamespace": ["x"]})
    assert _args(docs).watch_namespace == "x"
    assert _by_kind(docs, "ClusterRole"), "watching some namespaces keeps the ClusterRole"


def test_metrics_and_service_monitor(render_chart: Render) -> None:
    docs = render_chart(
        {
            "metrics": {
                "enabled": False,  # as upstream: the ServiceMonitor does not depend on it
                "serviceMonitor": {
                    "enabled": True,
                    "interval": "15s",
                    "honorLabels": False,
                    "additionalLabels": {"release": "prom"},
                    "selector": {"legacy": "yes"},
                    "namespace": "monitoring",
                },
            },
            "service": {"port": 9090},
        }
    )
    assert _args(docs).enable_metrics is False
    mon = _one(docs, "ServiceMonitor")
    assert mon["metadata"]["namespace"] == "monitoring"
    assert mon["metadata"]["labels"]["release"] == "prom"
    assert mon["metadata"]["labels"]["legacy"] == "yes"
    assert mon["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}
    svc = _one(docs, "Service")
    assert mon["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]
    (endpoint,) = mon["spec"]["endpoints"]
    assert endpoint["port"] == svc["spec"]["ports"][0]["name"]
    assert (endpoint["interval"], endpoint["honorLabels"]) == ("15s", False)
    assert svc["spec"]["ports"][0]["port"] == 9090


def test_probes_and_pod_settings(render_chart: Render) -> None:
    docs = render_chart(
        {
            "livenessProbe": {"initialDelaySeconds": 1, "periodSeconds": 2, "failureThreshold": 3},
            "readinessProbe": {"initialDelaySeconds": 4, "periodSeconds": 6, "timeoutSeconds": 7},
            "operatorCommand": "/usr/local/bin/kuberay",
            "replicas": 2,
            "podSecurityContext": {"runAsUser": 1000},
            "priorityClassName": "high",
            "labels": {"team": "infra"},
            "annotations": {"note": "x"},
            "imagePullSecrets": [{"name": "pull"}],
            "env": [{"name": "ENABLE_RANDOM_POD_DELETE", "value": "true"}],
        }
    )
    ctr = _container(docs)
    assert ctr["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 1,
        "periodSeconds": 2,
        "failureThreshold": 3,
    }
    assert ctr["readinessProbe"]["timeoutSeconds"] == 7
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert ctr["command"] == ["/usr/local/bin/kuberay"]
    assert {"name": "ENABLE_RANDOM_POD_DELETE", "value": "true"} in ctr["env"]
    dep = _one(docs, "Deployment")
    pod = dep["spec"]["template"]
    assert dep["spec"]["replicas"] == 2
    assert pod["spec"]["securityContext"] == {"runAsUser": 1000}
    assert pod["spec"]["priorityClassName"] == "high"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "pull"}]
    assert pod["metadata"]["labels"]["team"] == "infra"
    assert pod["metadata"]["annotations"] == {"note": "x"}
    assert "team" not in dep["spec"]["selector"]["matchLabels"]
    assert _one(docs, "ServiceAccount")["imagePullSecrets"] == [{"name": "pull"}]


def test_scheduler_gates_and_leader_election(render_chart: Render) -> None:
    docs = render_chart(
        {
            "batchScheduler": {"name": "volcano"},
            "featureGates": [{"name": "RayCronJob", "enabled": True}],
            "leaderElectionEnabled": False,
            "image": {"repository": "registry.example/kuberay-py", "tag": "1.2.3"},
        }
    )
    role = next(d for d in _by_kind(docs, "ClusterRole") if d["metadata"]["name"] == manifests.NAME)
    groups = {r["apiGroups"][0] for r in role["rules"]}
    assert {"scheduling.volcano.sh", "scheduling.x-k8s.io"} <= groups
    assert not _by_kind(docs, "Role"), "no leader-election Role without leader election"
    ctr = _container(docs)
    assert ctr["image"] == "registry.example/kuberay-py:1.2.3"
    args = _args(docs)
    assert args.batch_scheduler == "volcano"
    assert args.feature_gates == "RayCronJob=true"
    assert args.enable_leader_election is False

    args = _args(render_chart({"batchScheduler": {"enabled": True}}))
    assert (args.enable_batch_scheduler, args.batch_scheduler) == (True, "")
    assert _args(render_chart({"featureGates": []})).feature_gates == ""


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"reconcileConcurrency": 0}, "reconcileConcurrency"),
        ({"kubeClient": {"qps": "fast"}}, "kubeClient.qps"),
        ({"kubeClient": {"burst": -1}}, "kubeClient.burst"),
        ({"batchScheduler": {"enabled": True, "name": "yunikorn"}}, "batchScheduler"),
    ],
)
def test_bad_values_fail_the_render(run_helm: HelmRun, values: Doc, message: str) -> None:
    proc = run_helm("template", "kr", str(CHART), values=values)
    assert proc.returncode != 0
    assert message in proc.stderr


# ---------------------------------------------------------------------- user-facing roles


def test_editor_and_viewer_cluster_roles(render_chart: Render) -> None:
    roles = _user_roles(render_chart())
    assert set(roles) == {f"{k}-{r}-role" for k in KINDS for r in ("editor", "viewer")}
    for kind in KINDS:
        plural = f"{kind}s"
        assert roles[f"{kind}-editor-role"]["rules"] == [
            {
                "apiGroups": ["ray.io"],
                "resources": [plural],
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            },
            {"apiGroups": ["ray.io"], "resources": [f"{plural}/status"], "verbs": ["get"]},
        ]
        assert roles[f"{kind}-viewer-role"]["rules"] == [
            {"apiGroups": ["ray.io"], "resources": [plural], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["ray.io"], "resources": [f"{plural}/status"], "verbs": ["get"]},
        ]
    for role in roles.values():
        assert role["metadata"]["labels"]["app.kubernetes.io/instance"] == "kr"
        assert "rbac.authorization.k8s.io/aggregate-to-view" not in role["metadata"]["labels"]
    assert not _user_roles(render_chart({"rbacEnable": False}))
    assert not _user_roles(render_chart({"singleNamespaceInstall": True}))
