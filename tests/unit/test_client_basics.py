"""Pure parts of the REST client: paths, error mapping, kubeconfig parsing, the token bucket."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.runtime import errors
from kuberay.runtime.client import (
    CRDS,
    DEPLOYMENTS,
    PODS,
    KubeconfigError,
    Resource,
    TokenBucket,
    impersonation_headers,
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
    # The CA stays in memory: nothing is written for it.
    assert cfg.ca_file is None
    assert cfg.ca_data == "CA PEM"
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


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def _doc(ctx: str, server: str, **user: Any) -> dict[str, Any]:
    return {
        "current-context": ctx,
        "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": ctx}}],
        "clusters": [{"name": ctx, "cluster": {"server": server}}],
        "users": [{"name": ctx, "user": user}],
    }


def test_client_keys_live_in_a_private_directory(tmp_path: Path) -> None:
    key = base64.b64encode(b"KEY PEM").decode()
    cfg = load_kubeconfig(
        _write(tmp_path / "c", _doc("a", "https://a", **{"client-key-data": key}))
    )
    assert cfg.key_file is not None
    key_path = Path(cfg.key_file)
    assert key_path.read_bytes() == b"KEY PEM"
    assert key_path.stat().st_mode & 0o777 == 0o600
    assert key_path.parent.stat().st_mode & 0o777 == 0o700
    assert key_path.parent.name.startswith("kuberay-credentials-")


def test_client_keys_stay_in_memory_without_a_writable_temp_dir(tmp_path: Path) -> None:
    import subprocess
    import sys

    # A read-only root file system without a /tmp volume: no temporary directory can be made.
    key = base64.b64encode(b"KEY PEM").decode()
    path = _write(tmp_path / "c", _doc("a", "https://a", **{"client-key-data": key}))
    script = (
        "import tempfile\n"
        "def refuse(*args, **kwargs):\n"
        "    raise FileNotFoundError('No usable temporary directory found')\n"
        "tempfile.mkdtemp = refuse\n"
        "from kuberay.runtime.client import load_kubeconfig\n"
        f"key_file = load_kubeconfig({str(path)!r}).key_file\n"
        "print(key_file)\n"
        "print(open(key_file, 'rb').read().decode())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    where, content = out.stdout.splitlines()
    assert where.startswith("/proc/self/fd/")
    assert content == "KEY PEM"


def test_private_directory_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    import subprocess
    import sys

    key = base64.b64encode(b"KEY").decode()
    path = _write(tmp_path / "c", _doc("a", "https://a", **{"client-key-data": key}))
    script = (
        "from kuberay.runtime.client import load_kubeconfig\n"
        f"print(load_kubeconfig({str(path)!r}).key_file)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    written = Path(out.stdout.strip())
    assert written.name.startswith("key-")
    assert not written.exists()
    assert not written.parent.exists()


def test_kubeconfig_list_merges_as_client_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _write(tmp_path / "one", _doc("a", "https://first", token="t1"))
    second_doc = _doc("b", "https://second", token="t2")
    # a second definition of "a" loses to the first file's
    second_doc["clusters"].append({"name": "a", "cluster": {"server": "https://shadowed"}})
    second = _write(tmp_path / "two", second_doc)
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(str(p) for p in (missing, first, second)))
    cfg = load_kubeconfig()
    assert (cfg.server, cfg.bearer()) == ("https://first", "t1")
    other = load_kubeconfig(context="b")
    assert (other.server, other.bearer()) == ("https://second", "t2")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "no contexts"),
        ("- a\n- b\n", "expected a mapping"),
        ("a: [", "not a readable YAML kubeconfig"),
        (
            yaml.safe_dump({**_doc("a", "https://a"), "current-context": "zzz"}),
            "'zzz' does not exist",
        ),
        (
            yaml.safe_dump({**_doc("a", "https://a"), "current-context": ""}),
            "current-context is not set",
        ),
        (yaml.safe_dump({**_doc("a", "https://a"), "clusters": []}), "names cluster 'a'"),
    ],
)
def test_bad_kubeconfigs_are_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(KubeconfigError, match=message):
        load_kubeconfig(path)
    with pytest.raises(KubeconfigError, match="no such kubeconfig file"):
        load_kubeconfig(tmp_path / "absent")


def test_server_name_proxy_and_impersonation(tmp_path: Path) -> None:
    doc = _doc(
        "a",
        "https://10.0.0.1:6443",
        token="t",
        **{
            "as": "jane",
            "as-uid": "42",
            "as-groups": ["dev", "ops"],
            "as-user-extra": {"reason": ["audit", "x"]},
        },
    )
    doc["clusters"][0]["cluster"]["tls-server-name"] = "kubernetes.default"
    doc["clusters"][0]["cluster"]["proxy-url"] = "http://127.0.0.1:3128"
    cfg = load_kubeconfig(_write(tmp_path / "c", doc))
    assert cfg.tls_server_name == "kubernetes.default"
    assert cfg.proxy_url == "http://127.0.0.1:3128"
    assert impersonation_headers(cfg.impersonate) == [
        ("Impersonate-User", "jane"),
        ("Impersonate-Uid", "42"),
        ("Impersonate-Group", "dev"),
        ("Impersonate-Group", "ops"),
        ("Impersonate-Extra-reason", "audit"),
        ("Impersonate-Extra-reason", "x"),
    ]
    doc["clusters"][0]["cluster"]["proxy-url"] = "socks5://127.0.0.1:1080"
    with pytest.raises(KubeconfigError, match="only http"):
        load_kubeconfig(_write(tmp_path / "c", doc))
