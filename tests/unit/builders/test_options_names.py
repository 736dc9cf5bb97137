from __future__ import annotations

from typing import Any

import pytest

from kuberay.builders import names
from kuberay.builders.options import BuildOptions

from . import samples


def test_options_defaults_match_upstream_env_defaults() -> None:
    opts = BuildOptions.from_env({})
    assert opts == BuildOptions()
    assert opts.enable_init_container_injection
    assert opts.enable_probes_injection
    assert not opts.enable_login_shell
    assert not opts.deterministic_head_pod_name
    assert not opts.head_cluster_ip_service
    assert opts.cluster_domain == "cluster.local"


@pytest.mark.parametrize(
    ("env", "field", "expected"),
    [
        ({"ENABLE_INIT_CONTAINER_INJECTION": "FALSE"}, "enable_init_container_injection", False),
        ({"ENABLE_INIT_CONTAINER_INJECTION": "no"}, "enable_init_container_injection", True),
        ({"ENABLE_PROBES_INJECTION": "false"}, "enable_probes_injection", False),
        ({"ENABLE_LOGIN_SHELL": "True"}, "enable_login_shell", True),
        ({"ENABLE_LOGIN_SHELL": "1"}, "enable_login_shell", False),
        ({"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"}, "deterministic_head_pod_name", True),
        ({"ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": "true"}, "head_cluster_ip_service", True),
        ({"CLUSTER_DOMAIN": "corp.example"}, "cluster_domain", "corp.example"),
        ({"CLUSTER_DOMAIN": ""}, "cluster_domain", "cluster.local"),
    ],
)
def test_options_from_env(env: dict[str, str], field: str, expected: Any) -> None:
    assert getattr(BuildOptions.from_env(env), field) == expected


def test_options_overrides_win() -> None:
    opts = BuildOptions.from_env({"ENABLE_LOGIN_SHELL": "true"}, enable_login_shell=False)
    assert opts.enable_login_shell is False


def test_check_name_keeps_tail_and_fixes_first_char() -> None:
    long = "a" * 10 + "-" + "b" * 49  # 60 chars
    assert names.check_name(long) == "r" + "b" * 49
    assert names.check_name("9lives") == "rlives"
    assert names.check_name("_x") == "rx"
    assert names.check_name("fine-name") == "fine-name"
    assert names.check_name("$x") == "$x"  # a symbol, not punctuation, in Go's unicode tables
    assert len(names.check_name("x" * 80)) == 50


def test_check_label_keeps_tail_digits_allowed() -> None:
    assert names.check_label("1abc") == "1abc"
    assert names.check_label("-abc") == "rabc"
    value = "c" * 70
    assert names.check_label(value) == "c" * 63


def test_pod_name_prefixes_keep_head_and_lowercase() -> None:
    assert names.head_pod_name_prefix("MyCluster") == "mycluster-head-"
    long = "x" * 45 + "Y" * 10
    assert names.head_pod_name_prefix(long) == ("x" * 45 + "y" * 5) + "-head-"
    assert names.worker_pod_name_prefix("c", "group") == "c-group-worker-"
    assert (
        names.worker_pod_name_prefix("a" * 40, "b" * 20) == ("a" * 40 + "-" + "b" * 9) + "-worker-"
    )
    assert names.deterministic_head_pod_name("Raycluster") == "raycluster-head"


def test_service_and_object_names() -> None:
    rc = samples.cluster("demo")
    assert names.head_service_name(rc) == "demo-head-svc"
    rc["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": "custom"}}
    assert names.head_service_name(rc) == "custom"
    assert names.headless_service_name("demo") == "demo-headless"
    assert names.serve_service_name("demo") == "demo-serve-svc"
    assert names.ingress_name("demo") == "demo-head-ingress"
    assert names.ingress_name("9" * 50) == "r" + "9" * 36 + "-head-ingress"
    assert names.redis_cleanup_job_name("x" * 53) == "x" * 49 + "-redis-cleanup"
    assert names.route_name("demo", "ns") == "demo-head-route"
    assert names.route_name("a" * 45, "namespace") == "a" * 42
    assert names.gcs_pvc_name(rc) == "demo-gcs-pvc"


def test_autoscaler_service_account_name() -> None:
    rc = samples.cluster("demo")
    assert names.autoscaler_service_account_name(rc) == "demo"
    rc["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "9" + "s" * 60
    assert names.autoscaler_service_account_name(rc) == "s" * 50


def test_head_fqdn_uses_cluster_domain() -> None:
    rc = samples.cluster("demo")
    assert names.head_fqdn(rc, BuildOptions()) == "demo-head-svc.default.svc.cluster.local"
    opts = BuildOptions(cluster_domain="corp.example")
    assert names.head_fqdn(rc, opts) == "demo-head-svc.default.svc.corp.example"


def test_options_hashable_with_payloads() -> None:
    opts = BuildOptions(default_container_envs=({"name": "A", "value": "1"},))
    assert hash(opts) == hash(BuildOptions())
    assert opts != BuildOptions()
