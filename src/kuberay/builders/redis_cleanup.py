"""The Job that deletes a cluster's GCS data from Redis when a GCS-FT RayCluster is deleted.

It is derived from a freshly built head pod so it sees exactly the head's Redis address,
credentials (env and mounted secrets) and storage namespace; everything that would start Ray
(other containers, probes, the generated command) is replaced by a one-shot Python call.
The Job is best effort: no retries and at most five minutes, after which the finalizer flow
gives up on its own timeout.
"""

from __future__ import annotations

from typing import Final

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    as_list,
    cluster_name,
    cluster_namespace,
    env_exists,
    owner_reference,
    shell_command,
)
from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod

_HINT: Final = (
    'echo "Cleaning up the GCS storage namespace of this RayCluster in Redis. If this Job '
    "keeps failing, delete the namespace by hand and remove the RayCluster's finalizer; see "
    'https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html" && '
)


def _cleanup_script(with_username: bool) -> str:
    username = "username=os.getenv('REDIS_USERNAME', parsed.username), " if with_username else ""
    code = (
        "import os, sys; "
        "from urllib.parse import urlparse; "
        "from ray._private.gcs_utils import cleanup_redis_storage; "
        "addr = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]; "
        "addr = addr if '://' in addr else 'redis://' + addr; "
        "parsed = urlparse(addr); "
        "ok = cleanup_redis_storage(host=parsed.hostname, port=parsed.port, "
        f"{username}"
        "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), "
        "use_ssl=parsed.scheme == 'rediss', "
        "storage_namespace=os.getenv('RAY_external_storage_namespace')); "
        "sys.exit(0 if ok else 1)"
    )
    return f'{_HINT}python -c "{code}"'


def build_redis_cleanup_job(cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """The Job that deletes a removed cluster's GCS keys from Redis.
    upstream: buildRedisCleanupJob."""
    pod = build_head_pod(cluster, options)
    labels = dict(pod["metadata"]["labels"])
    labels[c.LABEL_NODE_TYPE] = c.NODE_TYPE_REDIS_CLEANUP
    annotations = dict(pod["metadata"].get("annotations") or {})
    spec = pod["spec"]
    ray = spec["containers"][0]
    spec["containers"] = [ray]
    inits = [
        i
        for i in as_list(spec.get("initContainers"))
        if i.get("name") != c.WAIT_FOR_TLS_IP_SAN_INIT_CONTAINER
    ]
    if inits:
        spec["initContainers"] = inits
    else:
        spec.pop("initContainers", None)
    env = ray.setdefault("env", [])
    ray["command"] = shell_command(options)
    ray["args"] = [_cleanup_script(env_exists(c.ENV_REDIS_USERNAME, env))]
    ray.pop("livenessProbe", None)
    ray.pop("readinessProbe", None)
    env.append({"name": c.ENV_RAY_REDIS_DB_CONNECT_RETRIES, "value": "120"})
    env.append({"name": c.ENV_RAY_REDIS_DB_CONNECT_WAIT_MILLISECONDS, "value": "500"})
    ray["resources"] = {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }
    spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.redis_cleanup_job_name(cluster_name(cluster)),
            "namespace": cluster_namespace(cluster),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 300,
            "template": {
                "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                "spec": spec,
            },
        },
    }
