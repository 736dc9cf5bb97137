"""Head and worker pods for a RayCluster, built the way KubeRay v1.7 builds them.

The Ray container is always ``containers[0]``. Steps run in upstream's order because later
steps look at what earlier ones produced: group ``resources``/``labels`` override
``rayStartParams``; defaults are filled in; the autoscaler, GCS fault tolerance and auth add
env vars, volumes and start flags; then the ``ray start`` command is generated from the final
parameters and the Ray container's resources; only then are the operator env vars appended (in
upstream's exact order, because users reference them by position-sensitive ``$(VAR)``
expansion) and probes injected.

The alpha features switch on only with their gate in ``BuildOptions`` (``mtls``,
``history_server``) plus the matching spec field, as upstream checks both.

Invariants: the input RayCluster is never mutated; the same inputs always give the same pod
(name suffixes are parameters, maps are emitted in a fixed order); user-set env vars, probes,
``/dev/shm`` mounts and commands containing ``ray start`` are left alone.

Failure modes: a group template without containers raises ``BuildError``. Unparseable resource
quantities in group ``resources`` are skipped (upstream logs and skips them); in container
resources they raise ``BuildError`` since the apiserver would not have admitted them.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

from kuberay.api import constants as c
from kuberay.api.quantity import (
    Quantity,
    QuantityError,
    canonical,
    go_json_float,
    parse_quantity,
)
from kuberay.api.resources import is_gpu_resource_key
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    append_env_if_absent,
    as_dict,
    as_list,
    autoscaler_version,
    cluster_annotations,
    cluster_labels,
    cluster_name,
    cluster_namespace,
    collector_options,
    creator_crd,
    env_exists,
    field_env,
    gcs_ft_options,
    head_port,
    head_spec,
    is_auth_enabled,
    is_autoscaler_v2,
    is_autoscaling_enabled,
    is_gcs_ft_embedded,
    is_gcs_ft_enabled,
    is_k8s_auth_enabled,
    is_tls_enabled,
    owner_reference,
    shell_command,
    spec_of,
    start_params,
    version_at_least,
)
from kuberay.builders.errors import BuildError
from kuberay.builders.hashing import spec_hash
from kuberay.builders.options import BuildOptions

HEAD: Final = c.NODE_TYPE_HEAD
WORKER: Final = c.NODE_TYPE_WORKER

# Flags passed as --flag=true/false instead of being treated as on/off switches.
_EXPLICIT_BOOL_FLAGS: Final = frozenset({"log-color", "include-dashboard", "include-log-monitor"})
_ACCELERATORS: Final = {"aws.amazon.com/neuroncore": "neuron_cores", "google.com/tpu": "TPU"}
_ULIMIT: Final = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"
_AUTOSCALER_CMD: Final = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
    "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)
_EXPOSABLE_EVENT_TYPES: Final = (
    "TASK_DEFINITION_EVENT,TASK_LIFECYCLE_EVENT,ACTOR_TASK_DEFINITION_EVENT,TASK_PROFILE_EVENT,"
    "DRIVER_JOB_DEFINITION_EVENT,DRIVER_JOB_LIFECYCLE_EVENT,ACTOR_DEFINITION_EVENT,"
    "ACTOR_LIFECYCLE_EVENT,NODE_DEFINITION_EVENT,NODE_LIFECYCLE_EVENT"
)
SHM_PATH: Final = "/dev/shm"
PLASMA_DIRECTORY: Final = "plasma-directory"
UNIFIED_HEALTH_CHECK_VERSION: Final = (2, 53, 0)

# Probe numbers (seconds / counts).
LIVENESS_INITIAL_DELAY: Final = 30
LIVENESS_FAILURE_THRESHOLD: Final = 120
READINESS_INITIAL_DELAY: Final = 10
READINESS_FAILURE_THRESHOLD: Final = 10
PROBE_PERIOD: Final = 5
PROBE_SUCCESS_THRESHOLD: Final = 1
HEAD_PROBE_TIMEOUT: Final = 5
WORKER_PROBE_TIMEOUT: Final = 2
SERVE_READINESS_FAILURE_THRESHOLD: Final = 1
_WGET: Final = "wget --tries 1 -T {timeout} -q -O- http://localhost:{port}/{path} | grep success"


# ----------------------------------------------------------------------------- ray start


def _ray_container(template: JsonDict, what: str) -> JsonDict:
    containers = as_list(as_dict(template.get("spec")).get("containers"))
    if not containers or not isinstance(containers[0], dict):
        raise BuildError(
            f"the {what} pod template has no containers; the Ray container is required"
        )
    return containers[0]


def _apply_group_resources(params: dict[str, str], resources: Any) -> None:
    """Group ``resources`` override the matching start params (``cpu`` rounds up to an int).
    upstream: updateRayStartParamsResources."""
    custom: dict[str, float] = {}
    for name, text in as_dict(resources).items():
        try:
            quantity = parse_quantity(str(text))
        except QuantityError:
            continue
        lowered = str(name).lower()
        if lowered == "cpu":
            params["num-cpus"] = str(quantity.ceil())
        elif lowered == "memory":
            params["memory"] = str(quantity.ceil())
        elif is_gpu_resource_key(lowered):
            params["num-gpus"] = str(quantity.ceil())
        else:
            custom[str(name)] = float(quantity.value)
    if custom:
        params["resources"] = f"'{_resources_json(custom)}'"


def _resources_json(resources: dict[str, float]) -> str:
    body = ",".join(
        f"{json.dumps(key)}:{go_json_float(resources[key])}" for key in sorted(resources)
    )
    return "{" + body + "}"


def _apply_group_labels(params: dict[str, str], labels: Any) -> None:
    """Group ``labels`` become the ``--labels`` start param.
    upstream: updateRayStartParamsLabels."""
    labels = as_dict(labels)
    if labels:
        params["labels"] = ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _fill_missing(params: dict[str, str], node_type: str, head_port_value: str, fqdn: str) -> None:
    """Start params every node needs when the user left them out.
    upstream: setMissingRayStartParams."""
    if node_type == WORKER:
        params.setdefault("address", f"{fqdn}:{head_port_value}")
    else:
        params.setdefault("dashboard-host", "0.0.0.0")
    params.setdefault("metrics-export-port", str(c.METRICS_PORT))
    params["block"] = "true"
    params.setdefault("dashboard-agent-listen-port", str(c.DASHBOARD_AGENT_LISTEN_PORT))


def _quantity_or_none(resources: JsonDict, kind: str, key: str) -> Quantity | None:
    value = as_dict(resources.get(kind)).get(key)
    if value is None:
        return None
    try:
        return parse_quantity(str(value))
    except QuantityError as exc:
        raise BuildError(f"invalid {kind}.{key} quantity {value!r} on the Ray container") from exc


def _existing_resources_map(params: dict[str, str]) -> dict[str, float] | None:
    text = params.get("resources")
    if text is None:
        return {}
    try:
        loaded = json.loads(text.strip("'\"` "))
    except ValueError:
        return None
    if not isinstance(loaded, dict):
        return None
    try:
        return {str(k): float(v) for k, v in loaded.items()}
    except (TypeError, ValueError):
        return None


def _apply_container_resources(params: dict[str, str], resources: JsonDict) -> None:
    """Fill num-cpus / memory / num-gpus / accelerator resources from the Ray container.
    upstream: generateRayStartCommand (with addWellKnownAcceleratorResources)."""
    if "num-cpus" not in params:
        cpu = _quantity_or_none(resources, "limits", "cpu")
        if cpu is None or cpu.is_zero():
            cpu = _quantity_or_none(resources, "requests", "cpu")
        if cpu is not None and not cpu.is_zero():
            params["num-cpus"] = str(cpu.ceil())
    if "memory" not in params:
        memory = _quantity_or_none(resources, "limits", "memory")
        if memory is not None and not memory.is_zero():
            params["memory"] = str(memory.ceil())
    limits = as_dict(resources.get("limits"))
    if not limits:
        return
    existing = _existing_resources_map(params)
    if existing is None:
        return  # upstream logs the unparseable resources flag and adds nothing
    accelerator_done = any(name in existing for name in _ACCELERATORS.values())
    for key in sorted(limits):
        quantity = _quantity_or_none(resources, "limits", key)
        if quantity is None or quantity.is_zero():
            continue
        if "num-gpus" not in params and is_gpu_resource_key(key):
            params["num-gpus"] = str(quantity.ceil())
        ray_name = _ACCELERATORS.get(key)
        if not accelerator_done and ray_name is not None:
            if ray_name not in existing:
                existing[ray_name] = float(quantity.value)
                params["resources"] = f"'{_resources_json(existing)}'"
            accelerator_done = True


def _flags(params: dict[str, str]) -> str:
    """The start params as `` --key=value `` flags, sorted by key. upstream: convertParamMap."""
    out = []
    for key in sorted(params):
        value = params[key]
        if value.lower() in ("true", "false") and key not in _EXPLICIT_BOOL_FLAGS:
            if value.lower() == "true":
                out.append(f" --{key} ")
        else:
            out.append(f" --{key}={value} ")
    return "".join(out)


def _format_start(node_type: str, params: dict[str, str]) -> str:
    """``ray start`` (``--head`` for the head) plus the flags. upstream: generateRayStartCommand."""
    if node_type == HEAD:
        return f"ray start --head {_flags(params)}"
    return f"ray start {_flags(params)}"


def _redis_start_params(cluster: JsonDict, params: dict[str, str]) -> None:
    options = gcs_ft_options(cluster)
    if options is None or not is_gcs_ft_enabled(cluster) or is_gcs_ft_embedded(cluster):
        return
    if options.get("redisUsername") is not None:
        params["redis-username"] = "$REDIS_USERNAME"
    if options.get("redisPassword") is not None:
        params["redis-password"] = "$REDIS_PASSWORD"


def _final_params(
    cluster: JsonDict, group: JsonDict | None, options: BuildOptions, ray_container: JsonDict
) -> dict[str, str]:
    node_type = HEAD if group is None else WORKER
    source = head_spec(cluster) if group is None else group
    params = start_params(source)
    _apply_group_resources(params, source.get("resources"))
    _apply_group_labels(params, source.get("labels"))
    _fill_missing(params, node_type, head_port(cluster), names.head_fqdn(cluster, options))
    if node_type == HEAD:
        if is_autoscaling_enabled(cluster):
            params["no-monitor"] = "true"
        _redis_start_params(cluster, params)
    _apply_container_resources(params, as_dict(ray_container.get("resources")))
    return params


def ray_start_command(cluster: JsonDict, group: JsonDict | None, options: BuildOptions) -> str:
    """The generated ``ray start`` line (also exported as ``KUBERAY_GEN_RAY_START_CMD``).
    upstream: generateRayStartCommand."""
    source = head_spec(cluster) if group is None else group
    container = _ray_container(
        as_dict(source.get("template")), "head" if group is None else "worker"
    )
    params = _final_params(cluster, group, options, container)
    return _format_start(HEAD if group is None else WORKER, params)


# ----------------------------------------------------------------------------- labels


def _pod_labels(
    node_type: str, name: str, group_name: str, template_labels: Any, group_labels: Any
) -> dict[str, str]:
    """The operator's labels, then the user's (which cannot move the pod to another group).
    upstream: labelPod."""
    labels = {
        c.LABEL_IS_RAY_NODE: "yes",
        c.LABEL_CLUSTER: name,
        c.LABEL_NODE_TYPE: node_type,
        c.LABEL_GROUP: group_name,
        c.LABEL_IDENTIFIER: names.identifier(name, node_type),
        c.LABEL_APP_NAME: c.APP_NAME,
        c.LABEL_CREATED_BY: c.CREATED_BY,
    }
    protected = {c.LABEL_NODE_TYPE, c.LABEL_GROUP, c.LABEL_CLUSTER}
    merged = {**as_dict(template_labels), **as_dict(group_labels)}
    for key, value in merged.items():
        if key not in protected:
            labels[str(key)] = str(value)
    return labels


# ----------------------------------------------------------------------------- containers


def _autoscaler_container(cluster: JsonDict, image: Any, options: BuildOptions) -> JsonDict:
    """The autoscaler sidecar for the head pod, with the user's overrides.
    upstream: BuildAutoscalerContainer (with mergeAutoscalerOverrides)."""
    container: JsonDict = {
        "name": c.AUTOSCALER_CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            field_env(c.ENV_RAY_CLUSTER_NAME, f"metadata.labels['{c.LABEL_CLUSTER}']"),
            field_env(c.ENV_RAY_CLUSTER_NAMESPACE, "metadata.namespace"),
            field_env(c.ENV_RAY_HEAD_POD_NAME, "metadata.name"),
            {"name": c.ENV_KUBERAY_CRD_VER, "value": c.VERSION},
            {"name": c.ENV_KUBERAY_GEN_AUTOSCALER_START_CMD, "value": _AUTOSCALER_CMD},
        ],
        "command": shell_command(options),
        "args": [_AUTOSCALER_CMD],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
    }
    if is_auth_enabled(cluster):
        _set_auth_env(cluster, container)
    if is_tls_enabled(cluster, options):
        _set_tls(container)
    overrides = as_dict(spec_of(cluster).get("autoscalerOptions"))
    if overrides.get("resources") is not None:
        container["resources"] = copy.deepcopy(overrides["resources"])
    if overrides.get("image") is not None:
        container["image"] = overrides["image"]
    if overrides.get("imagePullPolicy") is not None:
        container["imagePullPolicy"] = overrides["imagePullPolicy"]
    for key in ("env", "envFrom", "volumeMounts"):
        extra = as_list(overrides.get(key))
        if extra:
            container[key] = as_list(container.get(key)) + copy.deepcopy(extra)
    if overrides.get("securityContext") is not None:
        container["securityContext"] = copy.deepcopy(overrides["securityContext"])
    for key in ("command", "args"):
        if as_list(overrides.get(key)):
            container[key] = list(overrides[key])
    return container


def _set_auth_env(cluster: JsonDict, container: JsonDict) -> None:
    """Token-auth env vars of a container. upstream: SetContainerTokenAuthEnvVars."""
    env = container.setdefault("env", [])
    append_env_if_absent(env, c.ENV_RAY_AUTH_MODE, c.AUTH_MODE_TOKEN)
    if is_k8s_auth_enabled(cluster):
        append_env_if_absent(env, c.ENV_RAY_ENABLE_K8S_TOKEN_AUTH, "true")
        mounts = container.setdefault("volumeMounts", [])
        if not any(as_dict(m).get("name") == c.RAY_TOKEN_VOLUME for m in mounts):
            mounts.append(
                {"name": c.RAY_TOKEN_VOLUME, "mountPath": c.RAY_TOKEN_PATH, "readOnly": True}
            )
        return
    options = as_dict(spec_of(cluster).get("authOptions"))
    secret = options.get("secretName") or names.auth_secret_name(cluster_name(cluster))
    if not env_exists(c.ENV_RAY_AUTH_TOKEN, env):
        env.append(
            {
                "name": c.ENV_RAY_AUTH_TOKEN,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": c.AUTH_TOKEN_SECRET_KEY}},
            }
        )


def _configure_auth(cluster: JsonDict, pod_spec: JsonDict) -> None:
    """Token auth for every container of the pod. upstream: configureTokenAuth."""
    _set_auth_env(cluster, pod_spec["containers"][0])
    if is_k8s_auth_enabled(cluster):
        volumes = pod_spec.setdefault("volumes", [])
        if not any(as_dict(v).get("name") == c.RAY_TOKEN_VOLUME for v in volumes):
            volumes.append(
                {
                    "name": c.RAY_TOKEN_VOLUME,
                    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
                }
            )
    for init in as_list(pod_spec.get("initContainers")):
        if as_dict(init).get("name") == c.WAIT_GCS_READY_INIT_CONTAINER:
            _set_auth_env(cluster, init)


def _configure_gcs_ft(
    cluster: JsonDict, template: JsonDict, node_type: str, annotations: dict[str, str]
) -> None:
    """GCS fault tolerance wiring of a pod: the FT annotation, env vars, the RocksDB mount.
    upstream: configureGCSFaultTolerance."""
    enabled = is_gcs_ft_enabled(cluster)
    if node_type == HEAD:
        annotations[c.ANNOTATION_FT_ENABLED] = "true" if enabled else "false"
    if not enabled:
        return
    pod_spec = template["spec"]
    container = pod_spec["containers"][0]
    env = container.setdefault("env", [])
    if node_type == WORKER:
        append_env_if_absent(env, c.ENV_RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S, "600")
        return
    options = gcs_ft_options(cluster)
    if options is not None and is_gcs_ft_embedded(cluster):
        append_env_if_absent(env, c.ENV_RAY_GCS_STORAGE, c.GCS_BACKEND_ROCKSDB)
        append_env_if_absent(env, c.ENV_RAY_GCS_STORAGE_PATH, c.GCS_STORAGE_PATH)
        mount: JsonDict = {"name": c.GCS_STORAGE_VOLUME, "mountPath": c.GCS_STORAGE_PATH}
        sub_path = as_dict(options.get("storage")).get("subPath")
        if sub_path:
            mount["subPath"] = sub_path
        container.setdefault("volumeMounts", []).append(mount)
        pod_spec.setdefault("volumes", []).append(
            {
                "name": c.GCS_STORAGE_VOLUME,
                "persistentVolumeClaim": {"claimName": names.gcs_pvc_name(cluster)},
            }
        )
        return
    namespace = str(as_dict(cluster.get("metadata")).get("uid") or "")
    legacy = cluster_annotations(cluster).get(c.ANNOTATION_EXTERNAL_STORAGE_NAMESPACE)
    if legacy is not None:
        namespace = legacy
    if options is not None and options.get("externalStorageNamespace"):
        namespace = str(options["externalStorageNamespace"])
    annotations[c.ANNOTATION_EXTERNAL_STORAGE_NAMESPACE] = namespace
    append_env_if_absent(env, c.ENV_RAY_EXTERNAL_STORAGE_NAMESPACE, namespace)
    if options is not None:
        env.append(
            {"name": c.ENV_RAY_REDIS_ADDRESS, "value": str(options.get("redisAddress") or "")}
        )
        for key, env_name in (
            ("redisUsername", c.ENV_REDIS_USERNAME),
            ("redisPassword", c.ENV_REDIS_PASSWORD),
        ):
            credential = options.get(key)
            if credential is None:
                continue
            entry: JsonDict = {"name": env_name}
            credential = as_dict(credential)
            if credential.get("value"):
                entry["value"] = credential["value"]
            if credential.get("valueFrom") is not None:
                entry["valueFrom"] = copy.deepcopy(credential["valueFrom"])
            env.append(entry)
    else:
        password = start_params(head_spec(cluster)).get("redis-password")
        if password is not None and not env_exists(c.ENV_REDIS_PASSWORD, env):
            env.append({"name": c.ENV_REDIS_PASSWORD, "value": password})


_TLS_FILES: Final = (
    (c.ENV_RAY_USE_TLS, "1"),
    (c.ENV_RAY_TLS_SERVER_CERT, f"{c.RAY_TLS_PATH}/tls.crt"),
    (c.ENV_RAY_TLS_SERVER_KEY, f"{c.RAY_TLS_PATH}/tls.key"),
    (c.ENV_RAY_TLS_CA_CERT, f"{c.RAY_TLS_PATH}/ca.crt"),
)


def tls_secret_name(cluster_name_value: str, node_type: str) -> str:
    """The cert-manager Secret a pod mounts: one for the head, one shared by all workers."""
    return f"ray-{node_type}-secret-{cluster_name_value}"


def _set_tls(container: JsonDict) -> None:
    env = container.setdefault("env", [])
    for name, value in _TLS_FILES:
        append_env_if_absent(env, name, value)
    mounts = container.setdefault("volumeMounts", [])
    if not any(
        as_dict(m).get("name") == c.RAY_TLS_VOLUME or as_dict(m).get("mountPath") == c.RAY_TLS_PATH
        for m in mounts
    ):
        mounts.append({"name": c.RAY_TLS_VOLUME, "mountPath": c.RAY_TLS_PATH, "readOnly": True})


def _wait_for_ip_san(ray: JsonDict) -> JsonDict:
    # Ray dials peers by pod IP; until cert-manager reissues the certificate with this pod's IP
    # as a SAN, TLS handshakes would fail, so nothing may start before the SAN is present.
    script = (
        f'CERT="{c.RAY_TLS_PATH}/tls.crt"\n'
        "[ -n \"${POD_IP}\" ] || POD_IP=$(hostname -i 2>/dev/null | awk '{print $1}')\n"
        "if ! command -v openssl >/dev/null 2>&1; then\n"
        '  echo "openssl is needed to read the certificate IP SANs" >&2; exit 1\n'
        "fi\n"
        'echo "Waiting until ${CERT} lists IP Address:${POD_IP}"\n'
        'until openssl x509 -in "${CERT}" -noout -text 2>/dev/null'
        ' | grep -qE "IP Address:${POD_IP}([^0-9.]|$)"; do\n'
        '  echo "IP SAN ${POD_IP} not in the certificate yet; checking again in 5s"\n'
        "  sleep 5\n"
        "done\n"
        'echo "The certificate lists IP SAN ${POD_IP}"'
    )
    init: JsonDict = {"name": c.WAIT_FOR_TLS_IP_SAN_INIT_CONTAINER, "image": ray.get("image")}
    if ray.get("imagePullPolicy"):
        init["imagePullPolicy"] = ray["imagePullPolicy"]
    init["command"] = ["sh", "-c"]
    init["args"] = [script]
    if ray.get("securityContext") is not None:
        init["securityContext"] = copy.deepcopy(ray["securityContext"])
    init["env"] = [field_env(c.ENV_POD_IP, "status.podIP")]
    init["volumeMounts"] = [
        {"name": c.RAY_TLS_VOLUME, "mountPath": c.RAY_TLS_PATH, "readOnly": True}
    ]
    init["resources"] = {
        "limits": {"cpu": "50m", "memory": "64Mi"},
        "requests": {"cpu": "50m", "memory": "64Mi"},
    }
    return init


def _configure_tls(cluster: JsonDict, pod_spec: JsonDict, node_type: str) -> None:
    volumes = pod_spec.setdefault("volumes", [])
    if not any(as_dict(v).get("name") == c.RAY_TLS_VOLUME for v in volumes):
        secret = tls_secret_name(cluster_name(cluster), node_type)
        volumes.append({"name": c.RAY_TLS_VOLUME, "secret": {"secretName": secret}})
    ray = pod_spec["containers"][0]
    _set_tls(ray)
    inits = pod_spec.setdefault("initContainers", [])
    for init in inits:
        if as_dict(init).get("name") == c.WAIT_GCS_READY_INIT_CONTAINER:
            _set_tls(init)
    if not any(as_dict(i).get("name") == c.WAIT_FOR_TLS_IP_SAN_INIT_CONTAINER for i in inits):
        inits.insert(0, _wait_for_ip_san(ray))


def _collector_container(
    cluster: JsonDict, collector: JsonDict, node_type: str, fqdn: str
) -> JsonDict:
    """The history-server collector sidecar. upstream: history_server.go buildCollectorContainer."""
    user_env = as_list(collector.get("env"))
    resources = collector.get("resources")
    container: JsonDict = {
        "name": c.HISTORY_COLLECTOR_CONTAINER_NAME,
        "image": str(collector.get("image") or ""),
        "imagePullPolicy": collector.get("imagePullPolicy") or "IfNotPresent",
        "resources": copy.deepcopy(resources)
        if resources is not None
        else {
            "limits": {"cpu": "200m", "memory": "256Mi"},
            "requests": {"cpu": "50m", "memory": "64Mi"},
        },
        "env": [
            field_env(c.ENV_POD_IP, "status.podIP"),
            {"name": c.ENV_RAY_CLUSTER_NAME, "value": cluster_name(cluster)},
            {"name": c.ENV_RAY_CLUSTER_NAMESPACE, "value": cluster_namespace(cluster)},
            {"name": c.ENV_RAY_ROLE, "value": "Head" if node_type == HEAD else "Worker"},
            {"name": c.ENV_EVENTS_PORT, "value": str(c.HISTORY_EVENTS_PORT)},
        ],
    }
    env = container["env"]
    if fqdn:
        env.append({"name": c.ENV_FQ_RAY_IP, "value": fqdn})
    labels = cluster_labels(cluster)
    if labels.get(c.LABEL_ORIGINATED_FROM_CRD):
        env.append({"name": c.ENV_OWNER_KIND, "value": labels[c.LABEL_ORIGINATED_FROM_CRD]})
    if labels.get(c.LABEL_ORIGINATED_FROM_CR_NAME):
        env.append({"name": c.ENV_OWNER_NAME, "value": labels[c.LABEL_ORIGINATED_FROM_CR_NAME]})
    if node_type == HEAD and not env_exists(c.ENV_RAY_DASHBOARD_ADDRESS, user_env):
        env.append(
            {"name": c.ENV_RAY_DASHBOARD_ADDRESS, "value": f"http://localhost:{c.DASHBOARD_PORT}"}
        )
    env.extend(copy.deepcopy(user_env))
    if is_auth_enabled(cluster):
        _set_auth_env(cluster, container)
    return container


def _ensure_metrics_port(container: JsonDict) -> None:
    ports = container.setdefault("ports", [])
    if not any(as_dict(p).get("name") == c.METRICS_PORT_NAME for p in ports):
        ports.append({"name": c.METRICS_PORT_NAME, "containerPort": c.METRICS_PORT})


def _wait_gcs_ready(ray: JsonDict, fqdn: str, port: str, options: BuildOptions) -> JsonDict:
    """An init container that holds a worker until the head's GCS answers.
    upstream: the wait-gcs-ready init container of DefaultWorkerPodTemplate."""
    address = f"{fqdn}:{port}"
    script = (
        f'addr="{address}"\n'
        "while :; do\n"
        '  if [ "$SECONDS" -le 120 ]; then\n'
        '    if ray health-check --address "$addr" >/dev/null 2>&1; then\n'
        '      echo "GCS at $addr is ready."; exit 0\n'
        "    fi\n"
        '    echo "${SECONDS}s elapsed: GCS at $addr is not ready yet."\n'
        "  else\n"
        '    if ray health-check --address "$addr"; then\n'
        '      echo "GCS at $addr is ready; errors printed above can be ignored."; exit 0\n'
        "    fi\n"
        '    echo "${SECONDS}s elapsed: still waiting for GCS at $addr. See the KubeRay '
        'troubleshooting guide if this persists."\n'
        "  fi\n"
        "  sleep 5\n"
        "done\n"
    )
    init: JsonDict = {"name": c.WAIT_GCS_READY_INIT_CONTAINER, "image": ray.get("image")}
    if ray.get("imagePullPolicy"):
        init["imagePullPolicy"] = ray["imagePullPolicy"]
    init["command"] = shell_command(options)
    init["args"] = [script]
    if ray.get("securityContext") is not None:
        init["securityContext"] = copy.deepcopy(ray["securityContext"])
    if as_list(ray.get("env")):
        init["env"] = copy.deepcopy(ray["env"])
    if as_list(ray.get("volumeMounts")):
        init["volumeMounts"] = copy.deepcopy(ray["volumeMounts"])
    init["resources"] = {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }
    return init


def _add_empty_dir(
    pod_spec: JsonDict, container: JsonDict, name: str, path: str, memory: bool
) -> None:
    """Mount an emptyDir at ``path`` unless something is mounted there.
    upstream: addEmptyDir (with makeEmptyDirVolume)."""
    mounts = container.setdefault("volumeMounts", [])
    if any(as_dict(m).get("mountPath") == path for m in mounts):
        return
    volumes = pod_spec.setdefault("volumes", [])
    if not any(as_dict(v).get("name") == name for v in volumes):
        empty_dir: JsonDict = {}
        if memory:
            empty_dir["medium"] = "Memory"
            resources = as_dict(container.get("resources"))
            size = as_dict(resources.get("limits")).get("memory")
            if size is None:
                size = as_dict(resources.get("requests")).get("memory")
            if size is not None:
                try:
                    empty_dir["sizeLimit"] = canonical(str(size))
                except QuantityError:
                    empty_dir["sizeLimit"] = size
        volumes.append({"name": name, "emptyDir": empty_dir})
    mounts.append({"mountPath": path, "name": name})


def _command_text(parts: Any) -> str:
    """A container command list as one string, each part padded. upstream: convertCmdToString."""
    return "".join(f" {p} " for p in as_list(parts))


def _set_container_env(
    container: JsonDict,
    node_type: str,
    fqdn: str,
    port: str,
    start_cmd: str,
    crd: str,
    options: BuildOptions,
) -> None:
    """The operator's env vars on the Ray container (most only where the user set none).
    upstream: setContainerEnvVars."""
    env = container.setdefault("env", [])
    for default in options.default_container_envs:
        if not env_exists(str(default.get("name")), env):
            env.append(copy.deepcopy(default))
    ip = "127.0.0.1"
    if node_type == WORKER:
        ip = fqdn
        env.append({"name": c.ENV_FQ_RAY_IP, "value": fqdn})
        env.append({"name": c.ENV_RAY_IP, "value": fqdn.split(".")[0]})
    env.append(field_env(c.ENV_RAY_CLUSTER_NAME, f"metadata.labels['{c.LABEL_CLUSTER}']"))
    env.append(field_env(c.ENV_RAY_CLUSTER_NAMESPACE, "metadata.namespace"))
    env.append(field_env(c.ENV_RAY_CLOUD_INSTANCE_ID, "metadata.name"))
    env.append(field_env(c.ENV_RAY_NODE_TYPE_NAME, f"metadata.labels['{c.LABEL_GROUP}']"))
    env.append({"name": c.ENV_KUBERAY_GEN_RAY_START_CMD, "value": start_cmd})
    append_env_if_absent(env, c.ENV_RAY_PORT, port)
    if crd == c.KIND_RAYSERVICE:
        append_env_if_absent(env, c.ENV_RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO, "0")
        append_env_if_absent(env, c.ENV_RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS, "5")
        append_env_if_absent(env, c.ENV_RAY_SERVE_KV_TIMEOUT_S, "5")
    append_env_if_absent(env, c.ENV_RAY_ADDRESS, f"{ip}:{port}")
    append_env_if_absent(env, c.ENV_RAY_USAGE_STATS_KUBERAY_IN_USE, "1")
    if node_type == HEAD:
        env.append(
            {
                "name": c.ENV_RAY_USAGE_STATS_EXTRA_TAGS,
                "value": f"kuberay_version={options.kuberay_version};kuberay_crd={crd}",
            }
        )
    append_env_if_absent(env, c.ENV_RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, "1")


def _probe_port(params: dict[str, str], key: str, default: int) -> int:
    try:
        value = int(params[key])
    except (KeyError, ValueError):
        return default
    return value if -(2**31) <= value < 2**31 else default


def _container_port(container: JsonDict, name: str, default: int) -> int:
    for port in as_list(container.get("ports")):
        if as_dict(port).get("name") == name:
            return int(port.get("containerPort", default))
    return default


def _inject_probes(
    container: JsonDict, node_type: str, crd: str, params: dict[str, str], ray_version: str | None
) -> None:
    """Default liveness and readiness probes where the user set none.
    upstream: initLivenessAndReadinessProbe."""
    agent_port = _probe_port(params, "dashboard-agent-listen-port", c.DASHBOARD_AGENT_LISTEN_PORT)
    http = version_at_least(ray_version, UNIFIED_HEALTH_CHECK_VERSION)
    commands = [
        _WGET.format(timeout=WORKER_PROBE_TIMEOUT, port=agent_port, path="api/local_raylet_healthz")
    ]
    if node_type == HEAD:
        dashboard_port = _probe_port(params, "dashboard-port", c.DASHBOARD_PORT)
        # QUIRK: the GCS check's wget timeout is the readiness failure threshold (10).
        commands.append(
            _WGET.format(
                timeout=READINESS_FAILURE_THRESHOLD, port=dashboard_port, path="api/gcs_healthz"
            )
        )
    timeout = HEAD_PROBE_TIMEOUT if node_type == HEAD else WORKER_PROBE_TIMEOUT

    def action() -> JsonDict:
        if http:
            return {"httpGet": {"path": "/api/healthz", "port": agent_port}}
        return {"exec": {"command": ["bash", "-c", " && ".join(commands)]}}

    if container.get("livenessProbe") is None:
        container["livenessProbe"] = {
            **action(),
            "initialDelaySeconds": LIVENESS_INITIAL_DELAY,
            "timeoutSeconds": timeout,
            "periodSeconds": PROBE_PERIOD,
            "successThreshold": PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
        }
    if container.get("readinessProbe") is None:
        readiness: JsonDict = {
            **action(),
            "initialDelaySeconds": READINESS_INITIAL_DELAY,
            "timeoutSeconds": timeout,
            "periodSeconds": PROBE_PERIOD,
            "successThreshold": PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": READINESS_FAILURE_THRESHOLD,
        }
        if crd == c.KIND_RAYSERVICE and node_type == WORKER:
            serve_port = _container_port(container, c.SERVE_PORT_NAME, c.SERVE_PORT)
            serve_cmd = _WGET.format(
                timeout=READINESS_INITIAL_DELAY, port=serve_port, path="-/healthz"
            )
            readiness.pop("httpGet", None)
            readiness["exec"] = {"command": ["bash", "-c", " && ".join([*commands, serve_cmd])]}
            readiness["failureThreshold"] = SERVE_READINESS_FAILURE_THRESHOLD
        container["readinessProbe"] = readiness


# ----------------------------------------------------------------------------- assembly


def _finish_pod(
    cluster: JsonDict,
    template: JsonDict,
    node_type: str,
    params: dict[str, str],
    labels: dict[str, str],
    annotations: dict[str, str],
    options: BuildOptions,
) -> JsonDict:
    """Serve label, volumes, command, env and probes.
    upstream: BuildPod."""
    crd = creator_crd(cluster, options)
    if crd == c.KIND_RAYSERVICE:
        labels[c.LABEL_SERVE] = "false" if node_type == HEAD else "true"
    pod_spec = template["spec"]
    ray = pod_spec["containers"][0]
    if PLASMA_DIRECTORY not in params:
        _add_empty_dir(pod_spec, ray, c.SHARED_MEMORY_VOLUME, SHM_PATH, memory=True)
    if node_type == HEAD and is_autoscaling_enabled(cluster):
        autoscaler = next(
            x
            for x in pod_spec["containers"]
            if as_dict(x).get("name") == c.AUTOSCALER_CONTAINER_NAME
        )
        _add_empty_dir(pod_spec, ray, c.RAY_LOGS_VOLUME, c.RAY_LOGS_PATH, memory=False)
        _add_empty_dir(pod_spec, autoscaler, c.RAY_LOGS_VOLUME, c.RAY_LOGS_PATH, memory=False)
    collector = next(
        (
            x
            for x in pod_spec["containers"]
            if as_dict(x).get("name") == c.HISTORY_COLLECTOR_CONTAINER_NAME
        ),
        None,
    )
    has_collector = False
    if options.history_server and collector is not None:
        has_collector = True
        _add_empty_dir(pod_spec, ray, c.RAY_LOGS_VOLUME, c.RAY_LOGS_PATH, memory=False)
        _add_empty_dir(pod_spec, collector, c.RAY_LOGS_VOLUME, c.RAY_LOGS_PATH, memory=False)

    user_cmd = _command_text(ray.get("command")) + _command_text(ray.get("args"))
    start_cmd = _format_start(node_type, params)
    overwrite = annotations.get(c.ANNOTATION_OVERWRITE_CONTAINER_CMD, "").lower() == "true"
    if not overwrite and "ray start" not in user_cmd:
        generated = f"{_ULIMIT}; {start_cmd}"
        ray["command"] = shell_command(options)
        ray["args"] = [f"{user_cmd} && {generated}" if user_cmd else generated]

    fqdn = names.head_fqdn(cluster, options)
    for init in as_list(pod_spec.get("initContainers")):
        init_env = init.setdefault("env", [])
        init_env.append({"name": c.ENV_FQ_RAY_IP, "value": fqdn})
        init_env.append({"name": c.ENV_RAY_IP, "value": fqdn.split(".")[0]})
    port = head_port(cluster)
    _set_container_env(ray, node_type, fqdn, port, start_cmd, crd, options)
    if has_collector:
        env = ray["env"]
        append_env_if_absent(env, c.ENV_RAY_ENABLE_RAY_EVENT, "true")
        append_env_if_absent(env, c.ENV_RAY_ENABLE_CORE_WORKER_EVENT_TO_AGGREGATOR, "true")
        append_env_if_absent(
            env,
            c.ENV_RAY_AGGREGATOR_EVENTS_EXPORT_ADDR,
            f"http://localhost:{c.HISTORY_EVENTS_PORT}/v1/events",
        )
        append_env_if_absent(
            env, c.ENV_RAY_AGGREGATOR_EXPOSABLE_EVENT_TYPES, _EXPOSABLE_EVENT_TYPES
        )
        append_env_if_absent(
            env, c.ENV_RAY_AGGREGATOR_PUBLISHER_EXPOSABLE_EVENT_TYPES, _EXPOSABLE_EVENT_TYPES
        )
    if options.enable_probes_injection:
        version = spec_of(cluster).get("rayVersion")
        _inject_probes(ray, node_type, crd, params, str(version) if version else None)

    for key, value in options.default_pod_labels.items():
        labels.setdefault(key, value)
    for key, value in options.default_pod_annotations.items():
        annotations.setdefault(key, value)
    metadata = {
        k: v for k, v in as_dict(template.get("metadata")).items() if k != "creationTimestamp"
    }
    metadata.pop("name", None)
    metadata.pop("generateName", None)
    metadata["namespace"] = cluster_namespace(cluster)
    metadata["labels"] = labels
    metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(cluster)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _start_template(source: JsonDict, what: str) -> JsonDict:
    template = copy.deepcopy(as_dict(source.get("template")))
    template["spec"] = as_dict(template.get("spec"))
    template["metadata"] = as_dict(template.get("metadata"))
    _ray_container(template, what)
    return template


def _template_annotations(cluster: JsonDict, template: JsonDict) -> dict[str, str]:
    """The template's annotations plus the cluster's overwrite-command opt-in.
    upstream: initTemplateAnnotations."""
    annotations = {
        str(k): str(v) for k, v in as_dict(template["metadata"].get("annotations")).items()
    }
    if cluster_annotations(cluster).get(c.ANNOTATION_OVERWRITE_CONTAINER_CMD, "").lower() == "true":
        annotations[c.ANNOTATION_OVERWRITE_CONTAINER_CMD] = "true"
    return annotations


def build_head_pod(
    cluster: JsonDict, options: BuildOptions, *, name_suffix: str | None = None
) -> JsonDict:
    """The head pod; ``name_suffix`` None leaves naming to the apiserver (``generateName``).

    With ``deterministic_head_pod_name`` the name is always ``<cluster>-head`` and the suffix is
    ignored, so a second head can never be created next to the first.

    upstream: DefaultHeadPodTemplate + BuildPod (buildHeadPod)."""
    name = cluster_name(cluster)
    head = head_spec(cluster)
    template = _start_template(head, "head")
    pod_spec = template["spec"]
    ray = pod_spec["containers"][0]
    params = _final_params(cluster, None, options, ray)
    labels = _pod_labels(
        HEAD, name, c.HEAD_GROUP_NAME, template["metadata"].get("labels"), head.get("labels")
    )
    annotations = _template_annotations(cluster, template)

    if is_autoscaling_enabled(cluster):
        pod_spec["serviceAccountName"] = names.autoscaler_service_account_name(cluster)
        pod_spec["containers"].append(_autoscaler_container(cluster, ray.get("image"), options))
        version = autoscaler_version(cluster)
        if version == c.AUTOSCALER_V2:
            ray.setdefault("env", []).append(
                {"name": c.ENV_RAY_ENABLE_AUTOSCALER_V2, "value": "true"}
            )
            pod_spec["restartPolicy"] = "Never"
        elif version == c.AUTOSCALER_V1:
            ray.setdefault("env", []).append(
                {"name": c.ENV_RAY_ENABLE_AUTOSCALER_V2, "value": "false"}
            )
    _configure_gcs_ft(cluster, template, HEAD, annotations)
    _ensure_metrics_port(ray)
    if is_auth_enabled(cluster):
        _configure_auth(cluster, pod_spec)
    if is_tls_enabled(cluster, options):
        _configure_tls(cluster, pod_spec, HEAD)
    collector = collector_options(cluster, options)
    if collector is not None:
        fqdn = names.head_fqdn(cluster, options)
        pod_spec["containers"].append(_collector_container(cluster, collector, HEAD, fqdn))
    pod_spec["containers"].extend(copy.deepcopy(list(options.head_sidecar_containers)))

    annotations[c.ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH] = spec_hash(spec_of(cluster))
    annotations[c.ANNOTATION_KUBERAY_VERSION] = options.kuberay_version
    pod = _finish_pod(cluster, template, HEAD, params, labels, annotations, options)
    if options.deterministic_head_pod_name:
        pod["metadata"]["name"] = names.deterministic_head_pod_name(name)
    elif name_suffix is None:
        pod["metadata"]["generateName"] = names.head_pod_name_prefix(name)
    else:
        pod["metadata"]["name"] = names.head_pod_name_prefix(name) + name_suffix
    return _ordered_metadata(pod)


def build_worker_pod(
    cluster: JsonDict,
    group: JsonDict,
    options: BuildOptions,
    *,
    name_suffix: str | None = None,
    replica_index: int | None = None,
    replica_name: str | None = None,
    host_index: int | None = None,
) -> JsonDict:
    """A worker pod of ``group``; the multi-host labels follow the ``RayMultiHostIndexing`` gate.

    With the gate on, ``ray.io/worker-group-replica-index`` is always set (``0`` when not
    given, as Go's zero value); the replica name and host index labels only for groups with
    ``numOfHosts > 1``.

    upstream: DefaultWorkerPodTemplate + BuildPod (buildWorkerPod)."""
    name = cluster_name(cluster)
    group_name = str(group.get("groupName") or "")
    template = _start_template(group, f"worker group {group_name!r}")
    pod_spec = template["spec"]
    ray = pod_spec["containers"][0]
    fqdn = names.head_fqdn(cluster, options)
    port = head_port(cluster)
    if options.enable_init_container_injection:
        pod_spec.setdefault("initContainers", []).append(_wait_gcs_ready(ray, fqdn, port, options))
    params = _final_params(cluster, group, options, ray)
    labels = _pod_labels(
        WORKER, name, group_name, template["metadata"].get("labels"), group.get("labels")
    )
    if options.multi_host_indexing:
        labels[c.LABEL_WORKER_GROUP_REPLICA_INDEX] = str(replica_index or 0)
        if int(group.get("numOfHosts") or 1) > 1:
            labels[c.LABEL_WORKER_GROUP_REPLICA_NAME] = replica_name or ""
            labels[c.LABEL_REPLICA_HOST_INDEX] = str(host_index or 0)
    annotations = _template_annotations(cluster, template)
    _configure_gcs_ft(cluster, template, WORKER, annotations)
    _ensure_metrics_port(ray)
    if is_autoscaler_v2(cluster):
        pod_spec["restartPolicy"] = "Never"
    if is_auth_enabled(cluster):
        _configure_auth(cluster, pod_spec)
    if is_tls_enabled(cluster, options):
        _configure_tls(cluster, pod_spec, WORKER)
    collector = collector_options(cluster, options)
    if collector is not None:
        pod_spec["containers"].append(_collector_container(cluster, collector, WORKER, fqdn))
    pod_spec["containers"].extend(copy.deepcopy(list(options.worker_sidecar_containers)))

    pod = _finish_pod(cluster, template, WORKER, params, labels, annotations, options)
    prefix = names.worker_pod_name_prefix(name, group_name)
    if name_suffix is None:
        pod["metadata"]["generateName"] = prefix
    else:
        pod["metadata"]["name"] = prefix + name_suffix
    return _ordered_metadata(pod)


def _ordered_metadata(pod: JsonDict) -> JsonDict:
    """Put identifying metadata first so dumped pods read naturally (dict order is cosmetic)."""
    meta = pod["metadata"]
    first = {k: meta[k] for k in ("name", "generateName", "namespace") if k in meta}
    pod["metadata"] = {**first, **{k: v for k, v in meta.items() if k not in first}}
    return pod


# ----------------------------------------------------------------------------- health


def pod_is_unhealthy(pod: JsonDict, ray_container_name: str | None = None) -> bool:
    """Whether the operator must delete this pod.

    A pod in a terminal phase (``Failed``/``Succeeded``) never restarts. A ``Running`` pod whose
    Ray container has terminated is replaced only if ``restartPolicy`` is ``Never``; otherwise
    the kubelet restarts the container. The Ray container's status is looked up by name
    (status order is not guaranteed); if it is absent the container counts as not terminated.

    upstream: shouldDeletePod."""
    status = as_dict(pod.get("status"))
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        return True
    if phase != "Running":
        return False
    spec = as_dict(pod.get("spec"))
    if ray_container_name is None:
        containers = as_list(spec.get("containers"))
        if not containers:
            return False
        ray_container_name = as_dict(containers[0]).get("name")
    terminated = None
    for container_status in as_list(status.get("containerStatuses")):
        if as_dict(container_status).get("name") == ray_container_name:
            terminated = as_dict(container_status.get("state")).get("terminated")
            break
    return terminated is not None and spec.get("restartPolicy") == "Never"
