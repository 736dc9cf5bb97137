"""Seeded, hypothesis-generated RayCluster, RayJob and RayService inputs for the differential
suite, covering the field families: worker groups, autoscaling, GCS fault tolerance, auth,
ingress and service types, multi-host groups, suspend, submission modes, deletion and retry
settings, serve configs.

Generation is derandomized (the same inputs every run) and only valid specs are kept: the
generated object must pass the API validation both operators share, since an invalid spec only
tests the error path (which the samples and the fuzz suite cover).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kuberay.api import validation

Obj = dict[str, Any]

VERSIONS = ("2.46.0", "2.52.0")
QUANTITIES_CPU = ("100m", "500m", "1", "2")
QUANTITIES_MEM = ("256Mi", "1Gi", "2Gi")


@st.composite
def _container(draw: st.DrawFn, name: str, version: str, head: bool) -> Obj:
    cpu = draw(st.sampled_from(QUANTITIES_CPU))
    mem = draw(st.sampled_from(QUANTITIES_MEM))
    c: Obj = {"name": name, "image": f"rayproject/ray:{version}"}
    resources: Obj = {"limits": {"cpu": cpu, "memory": mem}}
    if draw(st.booleans()):
        resources["requests"] = {"cpu": cpu, "memory": mem}
    c["resources"] = resources
    if head and draw(st.booleans()):
        c["ports"] = [
            {"name": "gcs-server", "containerPort": 6379},
            {"name": "dashboard", "containerPort": 8265},
            {"name": "client", "containerPort": 10001},
            {"name": "serve", "containerPort": 8000},
        ]
    if draw(st.booleans()):
        c["env"] = [{"name": "EXAMPLE", "value": draw(st.sampled_from(["a", "b"]))}]
    return c


@st.composite
def _start_params(draw: st.DrawFn, head: bool) -> dict[str, str]:
    params: dict[str, str] = {}
    if head and draw(st.booleans()):
        params["dashboard-host"] = "0.0.0.0"
    if draw(st.booleans()):
        params["num-cpus"] = draw(st.sampled_from(["0", "1", "2"]))
    if draw(st.booleans()):
        params["metrics-export-port"] = "8080"
    return params


@st.composite
def cluster_specs(draw: st.DrawFn, *, for_job: bool = False) -> Obj:
    version = draw(st.sampled_from(VERSIONS))
    head: Obj = {
        "rayStartParams": draw(_start_params(True)),
        "template": {"spec": {"containers": [draw(_container("ray-head", version, True))]}},
    }
    if draw(st.booleans()):
        head["serviceType"] = draw(st.sampled_from(["ClusterIP", "NodePort"]))
    if not for_job and draw(st.integers(0, 4)) == 0:
        head["enableIngress"] = True
    groups = []
    for i in range(draw(st.integers(0, 3))):
        hosts = draw(st.sampled_from([1, 1, 1, 2]))
        low = draw(st.integers(0, 2))
        replicas = draw(st.integers(low, low + 2))
        group: Obj = {
            "groupName": f"g{i}",
            "replicas": replicas,
            "minReplicas": low,
            "maxReplicas": replicas + draw(st.integers(0, 3)),
            "rayStartParams": draw(_start_params(False)),
            "template": {"spec": {"containers": [draw(_container("ray-worker", version, False))]}},
        }
        if hosts > 1:
            group["numOfHosts"] = hosts
        groups.append(group)
    spec: Obj = {"rayVersion": version, "headGroupSpec": head}
    if groups:
        spec["workerGroupSpecs"] = groups
    if draw(st.integers(0, 3)) == 0:
        spec["enableInTreeAutoscaling"] = True
        if draw(st.booleans()):
            spec["autoscalerOptions"] = {
                "upscalingMode": draw(st.sampled_from(["Default", "Conservative", "Aggressive"])),
                "idleTimeoutSeconds": draw(st.sampled_from([30, 60])),
            }
    if not for_job and draw(st.integers(0, 4)) == 0:
        spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    if version == "2.52.0" and draw(st.integers(0, 4)) == 0:
        spec["authOptions"] = {"mode": "token"}
    if not for_job and draw(st.integers(0, 5)) == 0:
        spec["suspend"] = True
    if draw(st.integers(0, 4)) == 0:
        spec["headServiceAnnotations"] = {"example.com/team": "a"}
    return spec


@st.composite
def rayjob_bodies(draw: st.DrawFn) -> Obj:
    mode = draw(st.sampled_from(["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"]))
    spec: Obj = {
        "entrypoint": "python -c 'print(1)'",
        "submissionMode": mode,
        "rayClusterSpec": draw(cluster_specs(for_job=True)),
    }
    if draw(st.booleans()):
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = draw(st.sampled_from([0, 60]))
    elif draw(st.booleans()):
        policies = ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"]
        spec["deletionStrategy"] = {
            "onSuccess": {"policy": draw(st.sampled_from(policies))},
            "onFailure": {"policy": draw(st.sampled_from(policies))},
        }
    if draw(st.booleans()):
        spec["runtimeEnvYAML"] = "env_vars:\n  A: b\n"
    if draw(st.booleans()):
        spec["metadata"] = {"owner": "conformance"}
    if draw(st.booleans()):
        spec["entrypointNumCpus"] = 1
    if draw(st.booleans()):
        spec["backoffLimit"] = draw(st.integers(0, 2))
    if draw(st.integers(0, 3)) == 0:
        spec["activeDeadlineSeconds"] = 600
    if mode == "K8sJobMode" and draw(st.booleans()):
        spec["submitterConfig"] = {"backoffLimit": draw(st.integers(0, 3))}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": spec}


SERVE_CONFIGS = (
    """applications:
  - name: app
    import_path: example.app:deployment
    route_prefix: /
""",
    """applications:
  - name: fruit
    import_path: fruit.deployment_graph
    route_prefix: /fruit
    runtime_env:
      working_dir: "https://example.com/test_dag.zip"
    deployments:
      - name: MangoStand
        num_replicas: 2
        user_config:
          price: 3
  - name: math
    import_path: conditional_dag.serve_dag
    route_prefix: /calc
""",
)


@st.composite
def rayservice_bodies(draw: st.DrawFn) -> Obj:
    cluster = draw(cluster_specs())
    cluster.pop("suspend", None)
    spec: Obj = {"serveConfigV2": draw(st.sampled_from(SERVE_CONFIGS)), "rayClusterConfig": cluster}
    if draw(st.booleans()):
        spec["upgradeStrategy"] = {"type": draw(st.sampled_from(["NewCluster", "None"]))}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "spec": spec}


@st.composite
def inputs(draw: st.DrawFn) -> Obj:
    kind = draw(st.sampled_from(["RayCluster", "RayCluster", "RayJob", "RayService"]))
    if kind == "RayJob":
        return draw(rayjob_bodies())
    if kind == "RayService":
        return draw(rayservice_bodies())
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": draw(cluster_specs())}


_VALIDATORS = {
    "RayCluster": validation.validate_raycluster,
    "RayJob": validation.validate_rayjob,
    "RayService": validation.validate_rayservice,
}


def generated_inputs(count: int) -> list[Any]:
    """``count`` valid inputs, the same on every run, named ``h<NNN>-<kind>``."""
    from conf_run import Input

    bodies: list[Obj] = []

    @settings(
        max_examples=count * 3,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(inputs())
    def collect(body: Obj) -> None:
        bodies.append(body)

    collect()
    out: list[Obj] = []
    for body in bodies:
        if len(out) == count:
            break
        kind = str(body["kind"])
        name = f"h{len(out):03d}-{kind[3:].lower()}"
        body["metadata"] = {"name": name}
        if _VALIDATORS[kind](body) is not None:
            continue
        out.append(Input(origin=name, body=body))
    return out
