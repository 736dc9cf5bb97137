"""The optional validating webhook, served over HTTPS and registered with the real apiserver.

The webhook configuration only selects this test's namespace (by label) and is deleted at the
end, so other tests sharing the session's plane are unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kuberay.api import webhook
from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.crds import apply_crds
from kuberay.runtime.client import NAMESPACES, KubeClient, Resource
from kuberay.runtime.errors import Invalid, NotFound
from kuberay.runtime.webhook import WebhookServer, load_or_create

CONFIGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    namespaced=False,
    kind="ValidatingWebhookConfiguration",
)


def cluster(name: str, groups: tuple[str, ...]) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.52.0"}]}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"template": template},
            "workerGroupSpecs": [
                {"groupName": g, "minReplicas": 0, "maxReplicas": 1, "template": template}
                for g in groups
            ],
        },
    }


async def test_server_answers_admission_reviews(tmp_path: Path) -> None:
    server = WebhookServer(webhook.handlers(), cert_dir=tmp_path, host="127.0.0.1", port=0)
    port = await server.start()
    try:
        ctx = ssl.create_default_context(cadata=server.cert.ca_pem.decode())
        review = {
            "request": {
                "uid": "1",
                "operation": "CREATE",
                "kind": {"kind": "RayCluster"},
                "object": cluster("Bad", ("a",)),
            }
        }
        async with aiohttp.ClientSession() as http:
            url = f"https://localhost:{port}/validate-ray-io-v1-raycluster"
            async with http.post(url, json=review, ssl=ctx) as resp:
                answer = await resp.json()
            assert answer["response"]["allowed"] is False
            async with http.post(url, data=b"not json", ssl=ctx) as resp:
                assert resp.status == 400
            async with http.get(f"https://127.0.0.1:{port}/healthz", ssl=ctx) as resp:
                assert await resp.text() == "ok"
    finally:
        await server.stop()
    # Certificates are reused from the directory on the next start.
    assert load_or_create(tmp_path, ["localhost"]).ca_pem == server.cert.ca_pem
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
async def test_apiserver_calls_the_webhook(
    kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await apply_crds(kube, field_manager="kuberay-webhook-test")
    await kube.patch(
        NAMESPACES, namespace, {"metadata": {"labels": {"kuberay-webhook-test": namespace}}}
    )
    server = WebhookServer(webhook.handlers(), cert_dir=tmp_path, host="127.0.0.1", port=0)
    port = await server.start()
    name = f"kuberay-test-{namespace}"[:63]
    config = webhook.webhook_configuration(
        name,
        server.cert.ca_pem,
        url=f"https://127.0.0.1:{port}",
        namespace_selector={"matchLabels": {"kuberay-webhook-test": namespace}},
    )
    await kube.create(CONFIGS, config)
    try:
        # Webhook configuration changes reach the admission chain asynchronously.
        rejection = ""
        for attempt in range(50):
            try:
                await kube.create(RAYCLUSTERS, cluster(f"dup-{attempt}", ("a", "a")), namespace)
            except Invalid as err:
                rejection = str(err)
                break
            await asyncio.sleep(0.2)
        assert "worker group names must be unique" in rejection
        assert "spec.workerGroupSpecs[1]" in rejection
        created = await kube.create(RAYCLUSTERS, cluster("fine", ("a", "b")), namespace)
        assert created["metadata"]["name"] == "fine"
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(CONFIGS, name)
        await server.stop()
