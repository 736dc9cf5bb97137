# ruff: noqa: E501  (the case table holds upstream messages verbatim)
"""One case per controller-side validation message (upstream: utils/validation.go, v1.7)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kuberay.api import validation as v
from kuberay.api.features import FeatureGates

ALL_GATES = FeatureGates.with_all(True)
Obj = dict[str, Any]


def head(**extra: Any) -> Obj:
    return {
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}},
        **extra,
    }


def worker(name: str = "small", **extra: Any) -> Obj:
    return {
        "groupName": name,
        "replicas": 1,
        "minReplicas": 0,
        "maxReplicas": 3,
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}},
        **extra,
    }


def cluster_spec(**extra: Any) -> Obj:
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": head(),
        "workerGroupSpecs": [worker()],
        **extra,
    }


def cluster(spec: Obj | None = None, name: str = "demo", **meta: Any) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, **meta},
        "spec": spec if spec is not None else cluster_spec(),
    }


def job(name: str = "job", meta: Obj | None = None, status: Obj | None = None, **spec: Any) -> Obj:
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, **(meta or {})},
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": cluster_spec(), **spec},
    }
    if status:
        obj["status"] = status
    return obj


def service(name: str = "svc", meta: Obj | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, **(meta or {})},
        "spec": {"rayClusterConfig": cluster_spec(), **spec},
    }


def cron(name: str = "cron", **spec: Any) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": job()["spec"], **spec},
    }


def env(*pairs: tuple[str, str]) -> list[Obj]:
    return [{"name": k, "value": val} for k, val in pairs]


def with_head(mutate: Callable[[Obj], None], spec: Obj | None = None) -> Obj:
    spec = copy.deepcopy(spec or cluster_spec())
    mutate(spec["headGroupSpec"])
    return spec


def head_env(*pairs: tuple[str, str], **extra: Any) -> Obj:
    spec = cluster_spec(**extra)
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = env(*pairs)
    return spec


def autoscaled(**extra: Any) -> Obj:
    return cluster_spec(enableInTreeAutoscaling=True, **extra)


def v2(**extra: Any) -> Obj:
    return autoscaled(autoscalerOptions={"version": "v2"}, **extra)


def head_container(**fields: Any) -> Obj:
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0].update(fields)
    return spec


def head_pod(**fields: Any) -> Obj:
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"].update(fields)
    return spec


ROCKS = {"backend": "rocksdb"}
HISTORY = {"collectorOptions": {"image": "collector:1"}}


def hist(*pairs: tuple[str, str]) -> Obj:
    return {"collectorOptions": {"image": "collector:1", "env": env(*pairs)}}


DNS1035_HINT = (
    "[a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]"
)

GATES_OFF = FeatureGates.with_all(False)

CASES: list[tuple[str, Obj, FeatureGates | None, str]] = [
    # ---------------------------------------------------------------- RayCluster metadata
    (
        "name-too-long",
        cluster(name="a" * 54),
        None,
        "RayCluster name should be no more than 53 characters",
    ),
    (
        "name-dns1035",
        cluster(name="1abc"),
        None,
        f"RayCluster name should be a valid DNS1035 label: {DNS1035_HINT}",
    ),
    # ---------------------------------------------------------------- status / upgrade options
    (
        "status-both-suspend",
        {
            **cluster(),
            "status": {
                "conditions": [
                    {"type": "RayClusterSuspending", "status": "True"},
                    {"type": "RayClusterSuspended", "status": "True"},
                ]
            },
        },
        None,
        "invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended conditions should not be both true",
    ),
    (
        "upgrade-type",
        cluster(cluster_spec(upgradeStrategy={"type": "Rolling"})),
        None,
        "The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value Rolling is invalid, valid options are Recreate or None",
    ),
    (
        "upgrade-from-rayjob",
        cluster(
            cluster_spec(upgradeStrategy={"type": "Recreate"}),
            labels={"ray.io/originated-from-crd": "RayJob"},
        ),
        None,
        "upgradeStrategy cannot be set when RayCluster is created by RayJob",
    ),
    # ---------------------------------------------------------------- 1-3 head group
    (
        "head-no-container",
        cluster(with_head(lambda h: h["template"]["spec"].update(containers=[]))),
        None,
        "headGroupSpec should have at least one container",
    ),
    (
        "head-resources-both",
        cluster(
            with_head(lambda h: h.update(rayStartParams={"num-cpus": "1"}, resources={"CPU": "1"}))
        ),
        None,
        "resource fields should not be set in both rayStartParams and Resources for Head group; please use only one",
    ),
    (
        "head-labels-param",
        cluster(with_head(lambda h: h.update(rayStartParams={"labels": "a=b"}))),
        None,
        "rayStartParams['labels'] is not supported for Head group; please use the top-level Labels field instead",
    ),
    (
        "head-label-key",
        cluster(with_head(lambda h: h.update(labels={"-bad": "x"}))),
        None,
        "invalid label key for Head group: '-bad', error: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ),
    (
        "head-label-value",
        cluster(with_head(lambda h: h.update(labels={"zone": "a b"}))),
        None,
        "invalid label value for key 'zone' in Head group: 'a b', error: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ),
    # ---------------------------------------------------------------- 4 worker groups
    (
        "worker-no-container",
        cluster(
            cluster_spec(workerGroupSpecs=[{**worker(), "template": {"spec": {"containers": []}}}])
        ),
        None,
        "workerGroupSpec should have at least one container",
    ),
    (
        "worker-min-max-missing",
        cluster(cluster_spec(workerGroupSpecs=[{**worker(), "minReplicas": None}])),
        None,
        "worker group small must set both minReplicas and maxReplicas when autoscaling is disabled",
    ),
    (
        "worker-negative-min",
        cluster(cluster_spec(workerGroupSpecs=[worker(minReplicas=-1)])),
        None,
        "worker group small has negative minReplicas -1",
    ),
    (
        "worker-negative-max",
        cluster(cluster_spec(workerGroupSpecs=[worker(maxReplicas=-2)])),
        None,
        "worker group small has negative maxReplicas -2",
    ),
    (
        "worker-min-gt-max",
        cluster(cluster_spec(workerGroupSpecs=[worker(minReplicas=5, maxReplicas=2)])),
        None,
        "worker group small has minReplicas 5 greater than maxReplicas 2",
    ),
    (
        "worker-resources-both",
        cluster(
            cluster_spec(
                workerGroupSpecs=[
                    worker(rayStartParams={"memory": "1"}, resources={"memory": "1Gi"})
                ]
            )
        ),
        None,
        "resource fields should not be set in both rayStartParams and Resources for small group; please use only one",
    ),
    (
        "worker-labels-param",
        cluster(cluster_spec(workerGroupSpecs=[worker(rayStartParams={"labels": "x=y"})])),
        None,
        "rayStartParams['labels'] is not supported for small group; please use the top-level Labels field instead",
    ),
    (
        "worker-idle-negative",
        cluster(v2(workerGroupSpecs=[worker(idleTimeoutSeconds=-1)])),
        None,
        "worker group small: idleTimeoutSeconds must be non-negative, got -1",
    ),
    (
        "worker-idle-needs-v2",
        cluster(cluster_spec(workerGroupSpecs=[worker(idleTimeoutSeconds=30)])),
        None,
        "worker group small: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set RAY_enable_autoscaler_v2 environment variable to 'true' in the head pod if using KubeRay < 1.4.0)",
    ),
    (
        "priority-no-version",
        cluster(v2(rayVersion="", workerGroupSpecs=[worker(priority=1)])),
        None,
        "worker group small: priority is set, but RayVersion was not specified. Ray version 2.56.0 or later is required",
    ),
    (
        "priority-bad-version",
        cluster(v2(rayVersion="latest", workerGroupSpecs=[worker(priority=1)])),
        None,
        'worker group small: priority is set, but RayVersion format is invalid: latest, could not parse "latest" as version',
    ),
    (
        "priority-old-version",
        cluster(v2(rayVersion="2.55.0", workerGroupSpecs=[worker(priority=1)])),
        None,
        "worker group small: priority is set, but minimum Ray version is 2.56.0, got 2.55.0",
    ),
    (
        "priority-needs-v2",
        cluster(cluster_spec(rayVersion="2.56.0", workerGroupSpecs=[worker(priority=3)])),
        None,
        "worker group small: priority is set to 3, but autoscaler v2 is not enabled. Priority is only supported with autoscaler v2 enabled",
    ),
    # ---------------------------------------------------------------- 5-9 GCS FT
    (
        "ft-annotation-and-options",
        cluster(
            cluster_spec(gcsFaultToleranceOptions={"redisAddress": "r:6379"}),
            annotations={"ray.io/ft-enabled": "true"},
        ),
        None,
        "ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set. Please use only GcsFaultToleranceOptions to configure GCS fault tolerance",
    ),
    (
        "redis-address-without-ft",
        cluster(head_env(("RAY_REDIS_ADDRESS", "r:6379"))),
        None,
        "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance",
    ),
    (
        "ft-redis-password-param",
        cluster(
            with_head(
                lambda h: h.update(rayStartParams={"redis-password": "x"}),
                cluster_spec(gcsFaultToleranceOptions={}),
            )
        ),
        None,
        "cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead",
    ),
    (
        "ft-redis-password-env",
        cluster(head_env(("REDIS_PASSWORD", "x"), gcsFaultToleranceOptions={})),
        None,
        "cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead",
    ),
    (
        "ft-redis-address-env",
        cluster(head_env(("RAY_REDIS_ADDRESS", "x"), gcsFaultToleranceOptions={})),
        None,
        "cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisAddress instead",
    ),
    (
        "ft-external-ns-annotation",
        cluster(
            cluster_spec(gcsFaultToleranceOptions={}),
            annotations={"ray.io/external-storage-namespace": "ns"},
        ),
        None,
        "cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead",
    ),
    (
        "rocksdb-gate",
        cluster(cluster_spec(gcsFaultToleranceOptions=ROCKS)),
        None,
        "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled",
    ),
    *[
        (
            f"rocksdb-{field}",
            cluster(cluster_spec(gcsFaultToleranceOptions={**ROCKS, key: value})),
            ALL_GATES,
            f"cannot set GcsFaultToleranceOptions.{field} when backend is 'rocksdb'",
        )
        for field, key, value in (
            ("RedisAddress", "redisAddress", "r:6379"),
            ("RedisUsername", "redisUsername", {"value": "u"}),
            ("RedisPassword", "redisPassword", {"value": "p"}),
            ("ExternalStorageNamespace", "externalStorageNamespace", "ns"),
        )
    ],
    (
        "rocksdb-claim-exclusive",
        cluster(
            cluster_spec(
                gcsFaultToleranceOptions={**ROCKS, "storage": {"claimName": "c", "size": "1Gi"}}
            )
        ),
        ALL_GATES,
        "GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, storageClassName, and accessModes",
    ),
    (
        "rocksdb-env",
        cluster(head_env(("RAY_gcs_storage", "rocksdb"), gcsFaultToleranceOptions=ROCKS)),
        ALL_GATES,
        "cannot set `RAY_gcs_storage` or `RAY_gcs_storage_path` env var in head Pod when the embedded GCS FT backend is used - these are managed by KubeRay",
    ),
    (
        "rocksdb-mount",
        cluster(
            {
                **head_container(volumeMounts=[{"name": "data", "mountPath": "/data/gcs"}]),
                "gcsFaultToleranceOptions": ROCKS,
            }
        ),
        ALL_GATES,
        'cannot set a volume mount named "gcs-storage" or mounted at /data/gcs in the head container when the embedded GCS FT backend is used - it is managed by KubeRay',
    ),
    (
        "rocksdb-volume",
        cluster(
            {
                **head_pod(volumes=[{"name": "gcs-storage", "emptyDir": {}}]),
                "gcsFaultToleranceOptions": ROCKS,
            }
        ),
        ALL_GATES,
        'cannot set a volume named "gcs-storage" in the head Pod when the embedded GCS FT backend is used - it is managed by KubeRay',
    ),
    (
        "redis-storage",
        cluster(cluster_spec(gcsFaultToleranceOptions={"storage": {"size": "1Gi"}})),
        None,
        "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to the 'rocksdb' backend",
    ),
    (
        "redis-username",
        cluster(head_env(("REDIS_USERNAME", "u"))),
        None,
        "cannot set redis username in rayStartParams or environment variables - use GcsFaultToleranceOptions.RedisUsername instead",
    ),
    # ---------------------------------------------------------------- 10-13 suspend / autoscaler
    (
        "suspend-needs-gate",
        cluster(cluster_spec(workerGroupSpecs=[worker(suspend=True)])),
        GATES_OFF,
        "worker group small can be suspended only when the RayJobDeletionPolicy feature gate is enabled",
    ),
    (
        "v2-env-without-autoscaling",
        cluster(head_env(("RAY_enable_autoscaler_v2", "true"))),
        None,
        "environment variable RAY_enable_autoscaler_v2 cannot be set to 'true' when enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2",
    ),
    (
        "suspend-with-autoscaler",
        cluster(autoscaled(workerGroupSpecs=[worker(suspend=True)])),
        None,
        "worker group small cannot be suspended with Autoscaler enabled",
    ),
    (
        "version-and-env",
        cluster(
            head_env(
                ("RAY_enable_autoscaler_v2", "1"),
                enableInTreeAutoscaling=True,
                autoscalerOptions={"version": "v1"},
            )
        ),
        None,
        "both .spec.autoscalerOptions.version and head Pod env var RAY_enable_autoscaler_v2 are set, please only use the former",
    ),
    (
        "v2-head-restart",
        cluster({**v2(), "headGroupSpec": head_pod(restartPolicy="Always")["headGroupSpec"]}),
        None,
        "restartPolicy for head Pod should be Never or unset when using autoscaler V2",
    ),
    (
        "v2-worker-restart",
        cluster(
            v2(
                workerGroupSpecs=[
                    {
                        **worker(),
                        "template": {
                            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "w"}]}
                        },
                    }
                ]
            )
        ),
        None,
        "restartPolicy for worker group small should be Never or unset when using autoscaler V2",
    ),
    (
        "autoscaler-idle",
        cluster(autoscaled(autoscalerOptions={"idleTimeoutSeconds": -5})),
        None,
        "autoscalerOptions.idleTimeoutSeconds must be non-negative, got -5",
    ),
    (
        "autoscaler-managed-env",
        cluster(
            autoscaled(autoscalerOptions={"env": env(("KUBERAY_GEN_AUTOSCALER_START_CMD", "x"))})
        ),
        None,
        "autoscalerOptions.env must not contain KUBERAY_GEN_AUTOSCALER_START_CMD: it is managed by KubeRay and injected automatically into the autoscaler container",
    ),
    # ---------------------------------------------------------------- 14 history server
    (
        "history-gate",
        cluster(cluster_spec(historyServerOptions=HISTORY)),
        None,
        "RayClusterHistoryServer feature gate is not enabled",
    ),
    (
        "history-collector",
        cluster(cluster_spec(historyServerOptions={})),
        ALL_GATES,
        "historyServerOptions.collectorOptions must be set",
    ),
    (
        "history-image",
        cluster(cluster_spec(historyServerOptions={"collectorOptions": {}})),
        ALL_GATES,
        "historyServerOptions.collectorOptions.image must be set",
    ),
    (
        "history-managed-env",
        cluster(cluster_spec(historyServerOptions=hist(("RAY_ROLE", "x")))),
        ALL_GATES,
        "historyServerOptions.collectorOptions.env must not contain RAY_ROLE: it is managed by KubeRay and injected automatically into the collector container",
    ),
    (
        "history-backend",
        cluster(cluster_spec(historyServerOptions=HISTORY)),
        ALL_GATES,
        "STORAGE_BACKEND environment variable must be set with a literal string value in historyServerOptions.collectorOptions.env",
    ),
    (
        "history-gcs",
        cluster(cluster_spec(historyServerOptions=hist(("STORAGE_BACKEND", "GCS")))),
        ALL_GATES,
        "GCS_BUCKET environment variable must be set when STORAGE_BACKEND is GCS",
    ),
    (
        "history-s3",
        cluster(cluster_spec(historyServerOptions=hist(("STORAGE_BACKEND", "S3")))),
        ALL_GATES,
        "S3_REGION environment variable must be set when STORAGE_BACKEND is S3",
    ),
    (
        "history-azure",
        cluster(cluster_spec(historyServerOptions=hist(("STORAGE_BACKEND", "AZUREBLOB")))),
        ALL_GATES,
        "either AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB",
    ),
    (
        "history-azure-conn",
        cluster(
            cluster_spec(
                historyServerOptions=hist(
                    ("STORAGE_BACKEND", "AZUREBLOB"),
                    ("AZURE_STORAGE_AUTH_MODE", "connection_string"),
                )
            )
        ),
        ALL_GATES,
        "AZURE_STORAGE_CONNECTION_STRING environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is connection_string",
    ),
    (
        "history-azure-identity",
        cluster(
            cluster_spec(
                historyServerOptions=hist(
                    ("STORAGE_BACKEND", "AZUREBLOB"),
                    ("AZURE_STORAGE_AUTH_MODE", "workload_identity"),
                )
            )
        ),
        ALL_GATES,
        "AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is workload_identity",
    ),
    (
        "history-oss",
        cluster(
            cluster_spec(
                historyServerOptions=hist(("STORAGE_BACKEND", "ALIYUNOSS"), ("OSS_BUCKET", "b"))
            )
        ),
        ALL_GATES,
        "OSS_ENDPOINT environment variable must be set when STORAGE_BACKEND is ALIYUNOSS",
    ),
    (
        "history-head-container",
        cluster(
            {
                **head_pod(containers=[{"name": "ray"}, {"name": "ray-history-collector"}]),
                "historyServerOptions": hist(("STORAGE_BACKEND", "S3"), ("S3_REGION", "x")),
            }
        ),
        ALL_GATES,
        "head pod template must not define a container with name 'ray-history-collector' when history server collector options are enabled",
    ),
    (
        "history-worker-container",
        cluster(
            cluster_spec(
                workerGroupSpecs=[
                    {
                        **worker(),
                        "template": {
                            "spec": {
                                "containers": [{"name": "ray"}, {"name": "ray-history-collector"}]
                            }
                        },
                    }
                ],
                historyServerOptions=hist(("STORAGE_BACKEND", "S3"), ("S3_REGION", "x")),
            )
        ),
        ALL_GATES,
        "worker group small pod template must not define a container with name 'ray-history-collector' when history server collector options are enabled",
    ),
    # ---------------------------------------------------------------- 15 auth
    (
        "auth-no-version",
        cluster(cluster_spec(rayVersion="", authOptions={"mode": "token"})),
        None,
        "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required",
    ),
    (
        "auth-bad-version",
        cluster(cluster_spec(rayVersion="2", authOptions={"mode": "token"})),
        None,
        "authOptions.mode is 'token' but RayVersion format is invalid: 2, illegal version string \"2\"",
    ),
    (
        "auth-old-version",
        cluster(cluster_spec(rayVersion="2.51.0", authOptions={"mode": "token"})),
        None,
        "authOptions.mode is 'token' but minimum Ray version is 2.52.0, got 2.51.0",
    ),
    (
        "k8s-auth-version",
        cluster(
            cluster_spec(
                rayVersion="2.54.0", authOptions={"mode": "token", "enableK8sTokenAuth": True}
            )
        ),
        None,
        "authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got 2.54.0",
    ),
    (
        "k8s-auth-secret",
        cluster(
            cluster_spec(
                rayVersion="2.55.0",
                authOptions={"mode": "token", "enableK8sTokenAuth": True, "secretName": "s"},
            )
        ),
        None,
        "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set",
    ),
    (
        "k8s-auth-mode",
        cluster(cluster_spec(authOptions={"mode": "disabled", "enableK8sTokenAuth": True})),
        None,
        "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'",
    ),
    # ---------------------------------------------------------------- 16 network policy
    (
        "np-gate",
        cluster(cluster_spec(networkPolicy={})),
        None,
        "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
    ),
    (
        "np-head-ingress",
        cluster(
            cluster_spec(networkPolicy={"mode": "DenyAllEgress", "head": {"ingressRules": [{}]}})
        ),
        ALL_GATES,
        'networkPolicy.head.ingressRules cannot be set when mode is "DenyAllEgress" (ingress is not restricted)',
    ),
    (
        "np-worker-egress",
        cluster(
            cluster_spec(networkPolicy={"mode": "DenyAllIngress", "worker": {"egressRules": [{}]}})
        ),
        ALL_GATES,
        'networkPolicy.worker.egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)',
    ),
    (
        "np-group-egress",
        cluster(
            cluster_spec(
                networkPolicy={
                    "mode": "DenyAllIngress",
                    "workerGroups": [{"groupName": "small", "egressRules": [{}]}],
                }
            )
        ),
        ALL_GATES,
        'networkPolicy.workerGroups["small"].egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)',
    ),
    (
        "np-group-dns",
        cluster(cluster_spec(networkPolicy={}, workerGroupSpecs=[worker("Big_Group")])),
        ALL_GATES,
        "worker group name \"Big_Group\" must be a valid DNS1123 label when networkPolicy is enabled (it is embedded in the NetworkPolicy name): [a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')]",
    ),
    (
        "np-group-unknown",
        cluster(cluster_spec(networkPolicy={"workerGroups": [{"groupName": "other"}]})),
        ALL_GATES,
        'networkPolicy.workerGroups["other"] does not match any group name in workerGroupSpecs',
    ),
    # ---------------------------------------------------------------- 17 TLS
    (
        "tls-gate",
        cluster(cluster_spec(tlsOptions={"enabled": True})),
        None,
        "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
    ),
    (
        "tls-head-env",
        cluster(head_env(("RAY_USE_TLS", "1"), tlsOptions={"enabled": True})),
        ALL_GATES,
        "cannot set RAY_USE_TLS environment variable in head Pod when tlsOptions is set - the operator manages TLS configuration automatically",
    ),
    (
        "tls-worker-mount-name",
        cluster(
            cluster_spec(
                tlsOptions={"enabled": True},
                workerGroupSpecs=[
                    {
                        **worker(),
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "w",
                                        "volumeMounts": [{"name": "ray-tls", "mountPath": "/x"}],
                                    }
                                ]
                            }
                        },
                    }
                ],
            )
        ),
        ALL_GATES,
        'cannot use volume mount named "ray-tls" in worker group "small" when tlsOptions is set - the operator manages TLS configuration automatically',
    ),
    (
        "tls-head-mount-path",
        cluster(
            {
                **head_container(volumeMounts=[{"name": "certs", "mountPath": "/etc/ray/tls"}]),
                "tlsOptions": {"enabled": True},
            }
        ),
        ALL_GATES,
        'cannot use volume mount at path "/etc/ray/tls" in head Pod when tlsOptions is set - the operator manages TLS configuration automatically',
    ),
    (
        "tls-autoscaler-env",
        cluster(
            cluster_spec(
                tlsOptions={"enabled": True},
                autoscalerOptions={"env": env(("RAY_TLS_CA_CERT", "x"))},
            )
        ),
        ALL_GATES,
        "cannot set RAY_TLS_CA_CERT environment variable in autoscalerOptions.env when tlsOptions is set - the operator manages TLS configuration for the autoscaler automatically",
    ),
    # ---------------------------------------------------------------- RayJob
    (
        "job-name-long",
        job(name="j" * 48),
        None,
        "The RayJob metadata is invalid: RayJob name should be no more than 47 characters",
    ),
    (
        "job-name-dns",
        job(name="Job"),
        None,
        f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: {DNS1035_HINT}",
    ),
    (
        "job-status-waiting",
        job(status={"jobDeploymentStatus": "Waiting"}),
        None,
        "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode",
    ),
    (
        "job-suspend",
        job(suspend=True),
        None,
        "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended",
    ),
    (
        "job-ttl-negative",
        job(ttlSecondsAfterFinished=-1, shutdownAfterJobFinishes=True),
        None,
        "The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer",
    ),
    (
        "job-ttl-without-shutdown",
        job(ttlSecondsAfterFinished=10),
        None,
        "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished",
    ),
    (
        "deletion-gate",
        job(deletionStrategy={"deletionRules": []}),
        GATES_OFF,
        "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy",
    ),
    (
        "deletion-rules-shutdown",
        job(
            shutdownAfterJobFinishes=True,
            deletionStrategy={
                "deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}]
            },
        ),
        None,
        "The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive",
    ),
    (
        "deletion-both",
        job(
            deletionStrategy={
                "onSuccess": {"policy": "DeleteSelf"},
                "deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}],
            }
        ),
        None,
        "The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously",
    ),
    (
        "deletion-empty",
        job(deletionStrategy={}),
        None,
        "The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)",
    ),
    (
        "rule-both-conditions",
        job(
            deletionStrategy={
                "deletionRules": [
                    {
                        "policy": "DeleteSelf",
                        "condition": {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"},
                    }
                ]
            }
        ),
        None,
        "deletionRules[0]: cannot set both JobStatus and JobDeploymentStatus at the same time",
    ),
    (
        "rule-no-condition",
        job(deletionStrategy={"deletionRules": [{"policy": "DeleteSelf", "condition": {}}]}),
        None,
        "deletionRules[0]: exactly one of JobStatus and JobDeploymentStatus must be set",
    ),
    (
        "rule-ttl",
        job(
            deletionStrategy={
                "deletionRules": [
                    {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": -1}}
                ]
            }
        ),
        None,
        "deletionRules[0]: TTLSeconds must be non-negative",
    ),
    (
        "rule-selector",
        job(
            rayClusterSpec=None,
            clusterSelector={"ray.io/cluster": "c"},
            deletionStrategy={
                "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}}]
            },
        ),
        None,
        "deletionRules[0]: DeletionPolicyType 'DeleteCluster' not supported when ClusterSelector is set",
    ),
    (
        "rule-autoscaling",
        job(
            rayClusterSpec=autoscaled(),
            deletionStrategy={
                "deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}}]
            },
        ),
        None,
        "deletionRules[0]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled",
    ),
    (
        "rule-duplicate",
        job(
            deletionStrategy={
                "deletionRules": [
                    {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}},
                    {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": 5}},
                ]
            }
        ),
        None,
        "deletionRules[1]: duplicate rule for DeletionPolicyType 'DeleteSelf' and JobStatus 'FAILED'",
    ),
    (
        "rule-ttl-order",
        job(
            deletionStrategy={
                "deletionRules": [
                    {
                        "policy": "DeleteCluster",
                        "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 60},
                    },
                    {
                        "policy": "DeleteSelf",
                        "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10},
                    },
                ]
            }
        ),
        None,
        "for JobStatus 'SUCCEEDED': DeleteSelf TTL (10) must be >= DeleteCluster TTL (60)",
    ),
    (
        "rules-joined",
        job(
            deletionStrategy={
                "deletionRules": [
                    {"policy": "DeleteSelf", "condition": {}},
                    {
                        "policy": "DeleteSelf",
                        "condition": {"jobStatus": "FAILED", "ttlSeconds": -1},
                    },
                ]
            }
        ),
        None,
        "deletionRules[0]: exactly one of JobStatus and JobDeploymentStatus must be set\ndeletionRules[1]: TTLSeconds must be non-negative",
    ),
    (
        "legacy-both-needed",
        job(deletionStrategy={"onSuccess": {"policy": "DeleteSelf"}}),
        None,
        "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy",
    ),
    (
        "legacy-success-unset",
        job(deletionStrategy={"onSuccess": {}, "onFailure": {"policy": "DeleteSelf"}}),
        None,
        "the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled",
    ),
    (
        "legacy-failure-unset",
        job(deletionStrategy={"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {}}),
        None,
        "the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy is enabled",
    ),
    (
        "legacy-selector-success",
        job(
            rayClusterSpec=None,
            clusterSelector={"ray.io/cluster": "c"},
            deletionStrategy={
                "onSuccess": {"policy": "DeleteCluster"},
                "onFailure": {"policy": "DeleteSelf"},
            },
        ),
        None,
        "the ClusterSelector mode doesn't support DeletionStrategy=DeleteCluster on success",
    ),
    (
        "legacy-selector-failure",
        job(
            rayClusterSpec=None,
            clusterSelector={"ray.io/cluster": "c"},
            deletionStrategy={
                "onSuccess": {"policy": "DeleteSelf"},
                "onFailure": {"policy": "DeleteWorkers"},
            },
        ),
        None,
        "the ClusterSelector mode doesn't support DeletionStrategy=DeleteWorkers on failure",
    ),
    (
        "legacy-workers-autoscaling",
        job(
            rayClusterSpec=autoscaled(),
            deletionStrategy={
                "onSuccess": {"policy": "DeleteWorkers"},
                "onFailure": {"policy": "DeleteSelf"},
            },
        ),
        None,
        "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled",
    ),
    (
        "legacy-delete-none",
        job(
            shutdownAfterJobFinishes=True,
            deletionStrategy={
                "onSuccess": {"policy": "DeleteNone"},
                "onFailure": {"policy": "DeleteSelf"},
            },
        ),
        None,
        "The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'",
    ),
    (
        "selector-suspend",
        job(
            rayClusterSpec=None,
            clusterSelector={"ray.io/cluster": "c"},
            suspend=True,
            shutdownAfterJobFinishes=True,
        ),
        None,
        "The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation",
    ),
    (
        "no-cluster",
        job(rayClusterSpec=None),
        None,
        "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set",
    ),
    (
        "selector-empty-name",
        job(rayClusterSpec=None, clusterSelector={"ray.io/cluster": ""}),
        None,
        "cluster name in ClusterSelector should not be empty",
    ),
    (
        "selector-sidecar",
        job(
            rayClusterSpec=None,
            clusterSelector={"ray.io/cluster": "c"},
            submissionMode="SidecarMode",
        ),
        None,
        "ClusterSelector is not supported in SidecarMode",
    ),
    (
        "selector-backoff",
        job(rayClusterSpec=None, clusterSelector={"ray.io/cluster": "c"}, backoffLimit=2),
        None,
        "The RayJob spec is invalid: BackoffLimit is incompatible with ClusterSelector mode",
    ),
    (
        "interactive-backoff",
        job(submissionMode="InteractiveMode", backoffLimit=1),
        None,
        "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode",
    ),
    (
        "sidecar-template",
        job(
            submissionMode="SidecarMode",
            submitterPodTemplate={"spec": {"containers": [{"name": "s"}]}},
        ),
        None,
        "Currently, SidecarMode doesn't support SubmitterPodTemplate",
    ),
    (
        "sidecar-config",
        job(submissionMode="SidecarMode", submitterConfig={"backoffLimit": 1}),
        None,
        "Currently, SidecarMode doesn't support SubmitterConfig",
    ),
    (
        "sidecar-restart",
        job(submissionMode="SidecarMode", rayClusterSpec=head_pod(restartPolicy="Always")),
        None,
        "restartPolicy for head Pod should be Never or unset when using SidecarMode",
    ),
    (
        "job-k8s-auth",
        job(
            rayClusterSpec=cluster_spec(
                rayVersion="2.55.0", authOptions={"mode": "token", "enableK8sTokenAuth": True}
            )
        ),
        None,
        "The RayJob spec is invalid: K8s token auth mode is currently not supported for RayJob",
    ),
    (
        "job-nested",
        job(rayClusterSpec=with_head(lambda h: h["template"]["spec"].update(containers=[]))),
        None,
        "The RayJob spec is invalid: headGroupSpec should have at least one container",
    ),
    (
        "runtime-env",
        job(runtimeEnvYAML="- a\n- b"),
        None,
        "failed to unmarshal RuntimeEnvYAML: yaml: unmarshal errors: cannot unmarshal !!seq into map[string]interface {}",
    ),
    (
        "active-deadline",
        job(activeDeadlineSeconds=0),
        None,
        "The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer",
    ),
    (
        "prerunning-deadline",
        job(preRunningDeadlineSeconds=0),
        None,
        "The RayJob spec is invalid: preRunningDeadlineSeconds must be a positive integer",
    ),
    (
        "backoff-negative",
        job(backoffLimit=-1),
        None,
        "The RayJob spec is invalid: backoffLimit must be a positive integer",
    ),
    # ---------------------------------------------------------------- RayService
    (
        "svc-name-long",
        service(name="s" * 48),
        None,
        "The RayService metadata is invalid: RayService name should be no more than 47 characters",
    ),
    (
        "svc-name-dns",
        service(name="svc_1"),
        None,
        f"The RayService metadata is invalid: RayService name should be a valid DNS1035 label: {DNS1035_HINT}",
    ),
    (
        "svc-timeout-duration",
        service(meta={"annotations": {"ray.io/initializing-timeout": "-5m"}}),
        None,
        "The RayService metadata is invalid: RayService annotations is invalid: annotation ray.io/initializing-timeout must be a positive duration, got: -5m",
    ),
    (
        "svc-timeout-seconds",
        service(meta={"annotations": {"ray.io/initializing-timeout": "-30"}}),
        None,
        "The RayService metadata is invalid: RayService annotations is invalid: annotation ray.io/initializing-timeout must be a positive integer (seconds), got: -30",
    ),
    (
        "svc-timeout-format",
        service(meta={"annotations": {"ray.io/initializing-timeout": "soon"}}),
        None,
        "The RayService metadata is invalid: RayService annotations is invalid: annotation ray.io/initializing-timeout has invalid format: soon. Expected Go duration format (e.g., '5m', '1h') or positive integer seconds",
    ),
    (
        "svc-k8s-auth",
        service(
            rayClusterConfig=cluster_spec(
                rayVersion="2.55.0", authOptions={"mode": "token", "enableK8sTokenAuth": True}
            )
        ),
        None,
        "The RayService spec is invalid: K8s token auth mode is currently not supported for RayService",
    ),
    (
        "svc-nested",
        service(rayClusterConfig=cluster_spec(workerGroupSpecs=[worker(minReplicas=-1)])),
        None,
        "The RayService spec is invalid: worker group small has negative minReplicas -1",
    ),
    (
        "svc-head-service-name",
        service(
            rayClusterConfig=with_head(lambda h: h.update(headService={"metadata": {"name": "x"}}))
        ),
        None,
        "The RayService spec is invalid: spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set",
    ),
    (
        "svc-upgrade-type",
        service(upgradeStrategy={"type": "BlueGreen"}),
        None,
        "The RayService spec is invalid: Spec.UpgradeStrategy.Type value BlueGreen is invalid, valid options are NewClusterWithIncrementalUpgrade, NewCluster, or None",
    ),
    (
        "svc-deletion-delay",
        service(rayClusterDeletionDelaySeconds=-1),
        None,
        "The RayService spec is invalid: Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got -1",
    ),
    (
        "incr-autoscaler",
        service(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"}),
        None,
        "The RayService spec is invalid: Ray Autoscaler is required for NewClusterWithIncrementalUpgrade",
    ),
    (
        "incr-options",
        service(
            rayClusterConfig=autoscaled(),
            upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"},
        ),
        None,
        "The RayService spec is invalid: ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade",
    ),
    *[
        (
            f"incr-{label}",
            service(
                rayClusterConfig=autoscaled(),
                upgradeStrategy={
                    "type": "NewClusterWithIncrementalUpgrade",
                    "clusterUpgradeOptions": {
                        "maxSurgePercent": 50,
                        "stepSizePercent": 10,
                        "intervalSeconds": 5,
                        "gatewayClassName": "istio",
                        **override,
                    },
                },
            ),
            None,
            message,
        )
        for label, override, message in (
            (
                "surge",
                {"maxSurgePercent": 101},
                "The RayService spec is invalid: maxSurgePercent must be between 0 and 100",
            ),
            (
                "step",
                {"stepSizePercent": -1},
                "The RayService spec is invalid: stepSizePercent must be between 0 and 100",
            ),
            (
                "step-gt-surge",
                {"stepSizePercent": 60},
                "The RayService spec is invalid: stepSizePercent must be less than or equal to maxSurgePercent",
            ),
            (
                "interval",
                {"intervalSeconds": 0},
                "The RayService spec is invalid: intervalSeconds must be greater than 0",
            ),
            (
                "gateway",
                {"gatewayClassName": ""},
                "The RayService spec is invalid: gatewayClassName is required for NewClusterWithIncrementalUpgrade",
            ),
        )
    ],
    # ---------------------------------------------------------------- RayCronJob
    (
        "cron-name",
        cron(name="c" * 37),
        None,
        "RayCronJob name should be no more than 36 characters",
    ),
    (
        "cron-tz",
        cron(schedule="TZ=UTC */5 * * * *"),
        None,
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
    ),
    (
        "cron-schedule",
        cron(schedule="* * *"),
        None,
        "invalid cron schedule: expected exactly 5 fields, found 3: [* * *]",
    ),
    (
        "cron-empty-tz",
        cron(timeZone=""),
        None,
        "timeZone must not be empty string, omit the field to use the local time zone of the KubeRay operator",
    ),
    (
        "cron-bad-tz",
        cron(timeZone="Mars/Olympus"),
        None,
        "invalid time zone: unknown time zone Mars/Olympus",
    ),
    (
        "cron-template",
        cron(jobTemplate={"entrypoint": "x"}),
        None,
        "invalid RayJob template: The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set",
    ),
]


@pytest.mark.parametrize(
    ("obj", "gates", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_message(obj: Obj, gates: FeatureGates | None, message: str) -> None:
    assert v.validate(obj, gates or FeatureGates()) == message


def test_case_ids_are_unique() -> None:
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "obj",
    [cluster(), job(), service(), cron()],
    ids=["RayCluster", "RayJob", "RayService", "RayCronJob"],
)
def test_baselines_are_valid(obj: Obj) -> None:
    assert v.validate(obj, ALL_GATES) is None
    assert v.validate(obj) is None


def test_metadata_version_rule_applies_at_submit_time() -> None:
    from kuberay.api.rayjob import RayJobSpec

    spec = RayJobSpec.model_validate(
        {"metadata": {"a": "b"}, "rayClusterSpec": cluster_spec(rayVersion="2.5.1")}
    )
    assert (
        v.metadata_version_error(spec)
        == "the Ray version must be at least 2.6.0 to use the metadata field"
    )
    spec = RayJobSpec.model_validate({"metadata": {"a": "b"}, "rayClusterSpec": cluster_spec()})
    assert v.metadata_version_error(spec) is None


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        ("@hourly", None),
        ("@every 1h30m", None),
        ("0 9 * * MON-FRI", None),
        ("*/15 0-6 1,15 jan-jun *", None),
        ("@sometimes", "unrecognized descriptor: @sometimes"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("* * * * 1-9/0", "step of range should be a positive number: 1-9/0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ],
)
def test_cron_parser(schedule: str, error: str | None) -> None:
    assert v.cron_error(schedule) == error


def test_malformed_objects_give_messages_not_exceptions() -> None:
    assert str(
        v.validate({"kind": "RayCluster", "spec": {"headGroupSpec": 3}}, ALL_GATES)
    ).startswith("invalid RayCluster: spec.headGroupSpec")
    assert str(v.validate({"kind": "RayJob", "spec": []})).startswith("invalid RayJob: spec")
    assert v.validate({"kind": "Pod"}) is None


def test_operator_startup_options() -> None:
    was = FeatureGates.parse("KubernetesWAS=true")
    assert v.validate_operator_options(was, "volcano") == (
        "the KubernetesWAS feature gate cannot be combined with --batch-scheduler or --enable-batch-scheduler"
    )
    assert v.validate_operator_options(FeatureGates(), "volcano", True) == (
        "both feature flags enable-batch-scheduler (deprecated) and batch-scheduler are set. Please use batch-scheduler only"
    )
    assert (
        v.validate_operator_options(FeatureGates(), "slurm")
        == "scheduler is not supported, name=slurm"
    )
    assert v.validate_operator_options(FeatureGates(), "yunikorn") is None


def test_runtime_messages() -> None:
    assert (
        v.too_many_head_pods(["a", "b"]) == "2 head pods found [a b]. Please delete extra head pods"
    )
    assert v.not_multiple_of_hosts(3, 2, "tpu") == (
        "desired worker pods (3) is not a multiple of NumOfHosts (2) for group tpu"
    )
    assert v.SERVE_PORT_MISSING.startswith("Please specify a port named 'serve'")


def test_rule_details_that_follow_upstream_exactly() -> None:
    # TLS: only the Ray container (index 0) is checked; sidecars may carry TLS env.
    spec = head_pod(
        containers=[{"name": "ray"}, {"name": "side", "env": env(("RAY_USE_TLS", "1"))}]
    )
    assert v.validate(cluster({**spec, "tlsOptions": {"enabled": True}}), ALL_GATES) is None
    # A set-but-empty Redis credential still counts as set for the rocksdb backend.
    rocks = cluster(cluster_spec(gcsFaultToleranceOptions={**ROCKS, "redisUsername": {}}))
    assert v.validate(rocks, ALL_GATES) == (
        "cannot set GcsFaultToleranceOptions.RedisUsername when backend is 'rocksdb'"
    )
    # "TZ" anywhere in the schedule is refused.
    assert v.validate(cron(schedule="0 * * * * # TZ"), ALL_GATES) == (
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    )
    # History backends accept valueFrom as a value; backend names are case-insensitive.
    secret = {"name": "GCS_BUCKET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    history = {
        "collectorOptions": {"image": "c", "env": [*env(("STORAGE_BACKEND", "gcs")), secret]}
    }
    assert v.validate(cluster(cluster_spec(historyServerOptions=history)), ALL_GATES) is None
    # TTL ordering errors: JobStatus groups first, then JobDeploymentStatus groups.
    rules = [
        {
            "policy": "DeleteCluster",
            "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 9},
        },
        {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 1}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 9}},
        {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": 1}},
    ]
    assert v.validate(job(deletionStrategy={"deletionRules": rules}), ALL_GATES) == (
        "for JobStatus 'FAILED': DeleteSelf TTL (1) must be >= DeleteCluster TTL (9)\n"
        "for JobDeploymentStatus 'Failed': DeleteSelf TTL (1) must be >= DeleteCluster TTL (9)"
    )
    # Group-level v2 fields accept the legacy env var; the restartPolicy rule does not.
    legacy = head_env(("RAY_enable_autoscaler_v2", "true"), enableInTreeAutoscaling=True)
    legacy["workerGroupSpecs"] = [worker(idleTimeoutSeconds=10)]
    legacy["headGroupSpec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert v.validate(cluster(legacy), ALL_GATES) is None
