"""Pure builders for a RayJob's children: its RayCluster, the submitter Job (K8sJobMode), the
submitter sidecar (SidecarMode), the ``ray job`` command line and the dashboard address.

Invariants and failure modes:
- No I/O, no clock, no randomness: the cluster name and submission id come from the RayJob's
  *status* (persisted before anything is built), so a rebuilt object after a crash is identical.
- The submitter command is idempotent: it first asks the dashboard whether the submission id
  exists and only submits when it does not, then follows the logs. Re-running the pod (Job
  backoff, a deleted pod, an operator restart) therefore never starts a second Ray job.
- Inputs are the RayJob as stored (plain dict); absent or ``null`` optional fields read as unset.
  A runtimeEnvYAML that is not a mapping raises ``ValueError`` (validation reports it earlier).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from kuberay.api import constants as c
from kuberay.api.resources import owner_reference
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    append_env_if_absent,
    as_dict,
    as_list,
    env_exists,
    is_auth_enabled,
    is_k8s_auth_enabled,
    spec_of,
)
from kuberay.builders.options import BuildOptions
from kuberay.builders.service import build_head_service_for_cr

SUBMITTER_DEFAULT_BACKOFF_LIMIT = 2
SUBMITTER_SHELL = ["/bin/bash", "-ce", "--"]


def job_spec(job: JsonDict) -> JsonDict:
    return spec_of(job)


def job_status(job: JsonDict) -> JsonDict:
    return as_dict(job.get("status"))


def submission_mode(job: JsonDict) -> str:
    return str(job_spec(job).get("submissionMode") or c.K8S_JOB_MODE)


def job_owner_reference(job: JsonDict) -> JsonDict:
    return owner_reference(job, c.KIND_RAYJOB)


def generated_name(job_name: str, suffix: str) -> str:
    """``<rayjob>-<suffix>``: used for both the RayCluster name and a generated submission id.
    upstream: GenerateRayClusterName / GenerateRayJobId."""
    return f"{job_name}-{suffix}"


def originated_labels(job_name: str) -> dict[str, str]:
    return {
        c.LABEL_ORIGINATED_FROM_CR_NAME: job_name,
        c.LABEL_ORIGINATED_FROM_CRD: c.KIND_RAYJOB,
    }


def submitter_labels(job_name: str) -> dict[str, str]:
    return {**originated_labels(job_name), c.LABEL_CREATED_BY: c.CREATED_BY}


# --------------------------------------------------------------------------- addresses


def _head_container(cluster_spec: JsonDict) -> JsonDict:
    template = as_dict(as_dict(cluster_spec.get("headGroupSpec")).get("template"))
    containers = as_list(as_dict(template.get("spec")).get("containers"))
    return as_dict(containers[0]) if containers else {}


def dashboard_port(cluster_spec: JsonDict) -> int:
    """The head container's port named ``dashboard``, else 8265."""
    for port in as_list(_head_container(cluster_spec).get("ports")):
        port = as_dict(port)
        if port.get("name") == c.DASHBOARD_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return c.DASHBOARD_PORT


def dashboard_url(cluster: JsonDict, options: BuildOptions) -> str:
    """``<head service>.<ns>.svc.<domain>:<dashboard port>`` (no scheme), as status.dashboardURL.
    upstream: FetchHeadServiceURL (port from the spec, not the live Service)."""
    return f"{names.head_fqdn(cluster, options)}:{dashboard_port(spec_of(cluster))}"


def with_scheme(address: str) -> str:
    return address if address.startswith(("http://", "https://")) else f"http://{address}"


# --------------------------------------------------------------------------- submit command


def _go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` for the JSON snippets we pass on the command line."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json(value: Any) -> str:
    """``encoding/json.Marshal`` of a decoded map: sorted keys, compact, HTML characters escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def runtime_env(job: JsonDict) -> dict[str, Any] | None:
    """``runtimeEnvYAML`` parsed to a mapping (None when unset or empty)."""
    text = job_spec(job).get("runtimeEnvYAML")
    if not text:
        return None
    value = yaml.safe_load(str(text))
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("runtimeEnvYAML must be a mapping")
    return value


def runtime_env_json(job: JsonDict) -> str:
    """``runtimeEnvYAML`` as the JSON ``ray job submit`` takes. upstream: getRuntimeEnvJson."""
    env = runtime_env(job)
    return _go_json(env) if env else ""


def _float_flag(value: Any) -> str:
    """Go's ``%f``: six decimals."""
    return f"{float(value):f}"


def _submit_options(job: JsonDict, job_id: str) -> list[str]:
    spec = job_spec(job)
    opts: list[str] = []
    env_json = runtime_env_json(job)
    if env_json:
        opts += ["--runtime-env-json", _go_quote(env_json)]
    metadata = as_dict(spec.get("metadata"))
    if metadata:
        opts += ["--metadata-json", _go_quote(_go_json(metadata))]
    if job_id:
        opts += ["--submission-id", job_id]
    if float(spec.get("entrypointNumCpus") or 0) > 0:
        opts += ["--entrypoint-num-cpus", _float_flag(spec["entrypointNumCpus"])]
    if float(spec.get("entrypointNumGpus") or 0) > 0:
        opts += ["--entrypoint-num-gpus", _float_flag(spec["entrypointNumGpus"])]
    resources = spec.get("entrypointResources")
    if resources:
        opts += ["--entrypoint-resources", _go_quote(str(resources))]
    return opts


def _wait_for_gcs(health_base: str, shown_address: str) -> list[str]:
    probe = (
        '"import urllib.request; '
        f"r=urllib.request.urlopen('{health_base}/api/gcs_healthz', timeout=10); "
        "exit(0 if b'success' in r.read() else 1)\""
    )
    return [
        "until", "python", "-c", probe, ">/dev/null", "2>&1", ";",
        "do", "echo", f'"Waiting for Ray Dashboard GCS to become healthy at {shown_address} ..."',
        ";", "sleep", "2", ";", "done", ";",
    ]  # fmt: skip


def submitter_command(
    job: JsonDict,
    *,
    address: str,
    job_id: str,
    health_base: str | None = None,
    idempotent: bool = True,
) -> list[str]:
    """The ``ray job`` command tokens (joined with spaces into the container's one argument).

    ``idempotent`` (K8sJobMode, and SidecarMode with the SidecarSubmitterRestart gate) wraps
    the submit in a status check, submits with ``--no-wait`` and then follows the logs, so a
    restarted submitter attaches to the existing job instead of starting another one.

    upstream: BuildJobSubmitCommand."""
    address = with_scheme(address)
    entrypoint = str(job_spec(job).get("entrypoint") or "").strip()
    # The probe may use another host name (SidecarMode: localhost), the message shows the
    # address the job is submitted to (upstream: BuildJobSubmitCommand).
    cmd = _wait_for_gcs(health_base or address, address)
    submit = ["ray", "job", "submit", "--address", address]
    if idempotent:
        cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id]
        cmd += [">/dev/null", "2>&1", ";", "then"]
        submit.append("--no-wait")
    cmd += submit + _submit_options(job, job_id) + ["--", entrypoint, ";"]
    if idempotent:
        cmd += ["fi", ";", "ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


# --------------------------------------------------------------------------- submitter pod


def default_submitter_container(cluster_spec: JsonDict) -> JsonDict:
    """The submitter container used when the user gives none.
    upstream: GetDefaultSubmitterContainer."""
    return {
        "name": c.SUBMITTER_CONTAINER_NAME,
        "image": _head_container(cluster_spec).get("image", ""),
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }


def _auth_env(cluster_spec: JsonDict, cluster_name: str, env: list[Any]) -> None:
    holder = {"spec": cluster_spec}
    if not is_auth_enabled(holder) or is_k8s_auth_enabled(holder):
        return
    append_env_if_absent(env, c.ENV_RAY_AUTH_MODE, c.AUTH_MODE_TOKEN)
    options = as_dict(cluster_spec.get("authOptions"))
    secret = options.get("secretName") or names.auth_secret_name(cluster_name)
    if not env_exists(c.ENV_RAY_AUTH_TOKEN, env):
        env.append(
            {
                "name": c.ENV_RAY_AUTH_TOKEN,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": c.AUTH_TOKEN_SECRET_KEY}},
            }
        )


def _prepare_submitter_container(
    container: JsonDict,
    command: list[str],
    *,
    dashboard_address: str,
    job_id: str,
    cluster_spec: JsonDict,
    cluster_name: str,
) -> None:
    if not container.get("command"):
        container["command"] = list(SUBMITTER_SHELL)
        container["args"] = [" ".join(command)]
    env = container.get("env")
    if not isinstance(env, list):
        env = []
        container["env"] = env
    env.append({"name": c.ENV_PYTHONUNBUFFERED, "value": "1"})
    # status.dashboardURL as it is when the container is built: a SidecarMode cluster is
    # built before the URL is known, so there it is empty (an env var without a value).
    address_env: JsonDict = {"name": c.ENV_RAY_DASHBOARD_ADDRESS}
    if dashboard_address:
        address_env["value"] = dashboard_address
    env.append(address_env)
    env.append({"name": c.ENV_RAY_JOB_SUBMISSION_ID, "value": job_id})
    _auth_env(cluster_spec, cluster_name, env)


def build_submitter_job(job: JsonDict, cluster_spec: JsonDict) -> JsonDict:
    """The K8sJobMode submitter ``batch/v1`` Job named after the RayJob.

    ``cluster_spec`` is the spec of the cluster the job runs on (the RayJob's own template, or
    the selected cluster's spec), for the default image and the auth settings.

    upstream: createNewK8sJob (with GetSubmitterTemplate)."""
    meta = as_dict(job.get("metadata"))
    name = str(meta.get("name") or "")
    spec = job_spec(job)
    status = job_status(job)
    address = str(status.get("dashboardURL") or "")
    job_id = str(status.get("jobId") or "")
    cluster_name = str(status.get("rayClusterName") or "")
    custom = spec.get("submitterPodTemplate")
    if isinstance(custom, dict):
        template = copy.deepcopy(custom)
    else:
        template = {
            "spec": {
                "containers": [default_submitter_container(cluster_spec)],
                "restartPolicy": "Never",
            }
        }
    tmeta = as_dict(template.get("metadata"))
    template["metadata"] = tmeta
    tmeta["labels"] = {**as_dict(tmeta.get("labels")), **submitter_labels(name)}
    pod_spec = as_dict(template.get("spec"))
    template["spec"] = pod_spec
    containers = as_list(pod_spec.get("containers"))
    if containers:
        _prepare_submitter_container(
            as_dict(containers[0]),
            submitter_command(job, address=address, job_id=job_id),
            dashboard_address=address,
            job_id=job_id,
            cluster_spec=cluster_spec,
            cluster_name=cluster_name,
        )
    backoff = as_dict(spec.get("submitterConfig")).get("backoffLimit")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": submitter_labels(name),
            "ownerReferences": [job_owner_reference(job)],
        },
        "spec": {
            "backoffLimit": SUBMITTER_DEFAULT_BACKOFF_LIMIT if backoff is None else int(backoff),
            "template": template,
        },
    }


def build_sidecar_container(
    job: JsonDict, cluster_spec: JsonDict, *, job_id: str, cluster_name: str, restart: bool
) -> JsonDict:
    """The SidecarMode submitter, talking to the dashboard on the head pod's loopback.

    upstream: getSubmitterContainer. ``RAY_DASHBOARD_ADDRESS`` is the RayJob's
    ``status.dashboardURL``, which upstream reads before it is known (the cluster, and so this
    container, is built first), hence empty; the command itself uses the loopback address.

    ``restart`` (gate SidecarSubmitterRestart) uses the idempotent command and lets the kubelet
    restart the container on failure.
    """
    port = dashboard_port(cluster_spec)
    address = f"http://127.0.0.1:{port}"
    container = default_submitter_container(cluster_spec)
    command = submitter_command(
        job,
        address=address,
        job_id=job_id,
        health_base=f"http://localhost:{port}",
        idempotent=restart,
    )
    _prepare_submitter_container(
        container,
        command,
        dashboard_address=str(job_status(job).get("dashboardURL") or ""),
        job_id=job_id,
        cluster_spec=cluster_spec,
        cluster_name=cluster_name,
    )
    if restart:
        container["restartPolicy"] = "OnFailure"
    return container


# --------------------------------------------------------------------------- cluster


def build_cluster_for_job(job: JsonDict, *, sidecar_restart: bool = False) -> JsonDict:
    """The RayCluster a RayJob owns, named by ``status.rayClusterName``.

    Labels and annotations start from the RayJob's; the spec is a copy of ``rayClusterSpec``.
    SidecarMode adds the submitter container to the head pod, sets the head ``restartPolicy``
    to Never and marks the cluster so its head is not recreated once provisioned.

    upstream: constructRayClusterForRayJob."""
    meta = as_dict(job.get("metadata"))
    name = str(meta.get("name") or "")
    status = job_status(job)
    cluster_name = str(status.get("rayClusterName") or "")
    mode = submission_mode(job)
    labels = {str(k): str(v) for k, v in as_dict(meta.get("labels")).items()}
    labels.update(originated_labels(name))
    labels[c.LABEL_JOB_SUBMISSION_MODE] = mode
    annotations = {str(k): str(v) for k, v in as_dict(meta.get("annotations")).items()}
    cluster_spec = copy.deepcopy(as_dict(job_spec(job).get("rayClusterSpec")))
    if mode == c.SIDECAR_MODE:
        annotations[c.ANNOTATION_DISABLE_PROVISIONED_HEAD_RESTART] = "true"
        head = as_dict(cluster_spec.get("headGroupSpec"))
        template = as_dict(head.get("template"))
        pod_spec = as_dict(template.get("spec"))
        sidecar = build_sidecar_container(
            job,
            cluster_spec,
            job_id=str(status.get("jobId") or ""),
            cluster_name=cluster_name,
            restart=sidecar_restart,
        )
        pod_spec["containers"] = [*as_list(pod_spec.get("containers")), sidecar]
        pod_spec["restartPolicy"] = "Never"
        template["spec"] = pod_spec
        head["template"] = template
        cluster_spec["headGroupSpec"] = head
    out_meta: JsonDict = {
        "name": cluster_name,
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [job_owner_reference(job)],
    }
    if annotations:
        out_meta["annotations"] = annotations
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_RAYCLUSTER,
        "metadata": out_meta,
        "spec": cluster_spec,
    }


def job_submit_payload(job: JsonDict, job_id: str) -> JsonDict:
    """What HTTPMode POSTs to ``/api/jobs/`` (unset optional fields left out)."""
    spec = job_spec(job)
    body: JsonDict = {"entrypoint": str(spec.get("entrypoint") or ""), "submission_id": job_id}
    env = runtime_env(job)
    if env:
        body["runtime_env"] = env
    metadata = as_dict(spec.get("metadata"))
    if metadata:
        body["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    if float(spec.get("entrypointNumCpus") or 0) > 0:
        body["entrypoint_num_cpus"] = float(spec["entrypointNumCpus"])
    if float(spec.get("entrypointNumGpus") or 0) > 0:
        body["entrypoint_num_gpus"] = float(spec["entrypointNumGpus"])
    resources = spec.get("entrypointResources")
    if resources:
        parsed = json.loads(str(resources))
        body["entrypoint_resources"] = {str(k): float(v) for k, v in parsed.items()}
    return body


def build_job_head_service(job: JsonDict, cluster: JsonDict, options: BuildOptions) -> JsonDict:
    """``<rayjob>-head-svc``: a stable name for the head of whichever cluster the job runs on,
    owned by the RayJob, so after a retry (new cluster) only its selector has to be re-pointed.
    upstream: BuildHeadServiceForRayJob."""
    job_name = str(as_dict(job.get("metadata")).get("name") or "")
    return build_head_service_for_cr(
        cluster, options, job_name, c.KIND_RAYJOB, job_owner_reference(job)
    )
