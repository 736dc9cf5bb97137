"""Pure parts of the REST client: paths, error mapping, kubeconfig parsing, the token bucket."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path

import pytest
import yaml

from kuberay.runtime import errors
from kuberay.runtime.client import (
    CRDS,
    DEPLOYMENTS,
    PODS,
    Resource,
    TokenBucket,
    load_kubeconfig,
)


def test_resource_paths() -> None:
    assert PODS.path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert PODS.path() == "/api/v1/pods"
    assert DEPLOYMENTS.path("a") == "/apis/apps/v1/namespaces/a/deployments"
    assert CRDS.path("ignored", "x") == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x"
    assert Resource("ray.io", "v1", "rayclusters").api_version == "ray.io/v1"


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (403, "Forbidden", errors.Forbidden),
        (503, "ServiceUnavailable", errors.ServerError),
        (418, "Teapot", errors.ApiError),
    ],
)
def test_errors_are_typed_and_keep_the_message(
    status: int, reason: str, cls: type[errors.ApiError]
) -> None:
    body = {
        "kind": "Status",
        "reason": reason,
        "message": "it broke",
        "details": {"causes": [{"field": "spec.x", "message": "bad"}], "retryAfterSeconds": 2},
    }
    err = errors.error_for(status, body, "GET", "/x")
    assert type(err) is cls
    assert err.status == status
    assert err.message == "it broke"
    assert err.causes == [{"field": "spec.x", "message": "bad"}]
    assert "it broke" in str(err)


def test_already_exists_is_a_conflict() -> None:
    err = errors.error_for(409, {"reason": "AlreadyExists"}, "POST", "/x")
    assert isinstance(err, errors.Conflict)


def test_kubeconfig_with_inline_data_and_token(tmp_path: Path) -> None:
    ca = base64.b64encode(b"CA PEM").decode()
    doc = {
        "current-context": "b",
        "contexts": [
            {"name": "a", "context": {"cluster": "c1", "user": "u1"}},
            {"name": "b", "context": {"cluster": "c2", "user": "u2"}},
        ],
        "clusters": [
            {"name": "c1", "cluster": {"server": "https://one:6443"}},
            {
                "name": "c2",
                "cluster": {"server": "https://two:6443/", "certificate-authority-data": ca},
            },
        ],
        "users": [
            {"name": "u1", "user": {"client-certificate": "rel.crt", "client-key": "/abs.key"}},
            {"name": "u2", "user": {"token": "s3cret"}},
        ],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    cfg = load_kubeconfig(path)
    assert cfg.server == "https://two:6443"
    assert cfg.bearer() == "s3cret"
    assert cfg.ca_file is not None
    assert Path(cfg.ca_file).read_bytes() == b"CA PEM"
    first = load_kubeconfig(path, context="a")
    assert first.cert_file == str(tmp_path / "rel.crt")
    assert first.key_file == "/abs.key"


def _kubeconfig_with_user(tmp_path: Path, user: dict[str, object]) -> Path:
    doc = {
        "current-context": "a",
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://x"}}],
        "users": [{"name": "u", "user": user}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_legacy_auth_providers_are_refused_with_a_reason(tmp_path: Path) -> None:
    path = _kubeconfig_with_user(tmp_path, {"auth-provider": {"name": "gcp"}})
    with pytest.raises(ValueError, match="legacy auth-provider plugin"):
        load_kubeconfig(path)


def test_exec_credential_plugin_token_is_used_and_cached(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f"echo x >> {counter}\n"
        'echo "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",'
        '\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"$TOKEN_VALUE\\",'
        '\\"expirationTimestamp\\":\\"2999-01-01T00:00:00Z\\"}}"\n'
    )
    plugin.chmod(0o755)
    path = _kubeconfig_with_user(
        tmp_path,
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": str(plugin),
                "env": [{"name": "TOKEN_VALUE", "value": "from-plugin"}],
            }
        },
    )
    cfg = load_kubeconfig(path)
    assert cfg.bearer() == "from-plugin"
    assert cfg.bearer() == "from-plugin"
    assert counter.read_text().count("x") == 1


def test_failing_exec_plugin_reports_stderr(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.sh"
    plugin.write_text("#!/bin/sh\necho 'not logged in' >&2\nexit 3\n")
    plugin.chmod(0o755)
    path = _kubeconfig_with_user(tmp_path, {"exec": {"command": str(plugin)}})
    with pytest.raises(ValueError, match="not logged in"):
        load_kubeconfig(path).bearer()


async def test_token_bucket_paces_after_the_burst() -> None:
    bucket = TokenBucket(qps=50, burst=5)
    start = time.monotonic()
    await asyncio.gather(*(bucket.acquire() for _ in range(15)))
    elapsed = time.monotonic() - start
    # 5 free, then 10 at 50/s -> about 0.2 s
    assert 0.15 <= elapsed < 1.0
