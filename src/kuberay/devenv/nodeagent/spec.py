"""Pure pieces of turning a pod spec into a process: images, quantities, environment.

Images. There are no container images here: an image names a local Python environment whose
``bin`` directory leads the container's ``PATH`` (the command then finds ``ray``, ``python``,
``bash`` from the host). The mapping is a JSON or YAML file (``PlaneConfig.image_map`` or the
``KUBERAY_DEVENV_IMAGES`` environment variable), image-name prefix -> entry; the longest matching
prefix wins and ``""`` matches every image::

    {"rayproject/ray": {"python_env": "/opt/ray-2.59", "env": {"RAY_FOO": "1"}},
     "busybox": {"entrypoint": ["sleep", "infinity"]},
     "": {"python_env": "/work/main/.venv"}}

Entry fields: ``python_env`` (default: the agent's own environment, ``sys.prefix``), ``env``
(variables the "image" defines; the pod's own env wins), ``entrypoint`` (used when the container
has no ``command``; without one such a container fails with CreateContainerConfigError, because
the image's real entrypoint is unknown), ``working_dir`` (default ``/``), ``home`` (default
``/root``). Every image sets ``RAY_USAGE_STATS_ENABLED=0`` unless its entry overrides it: pods
have no route out, so the usage reporter could only time out.

Built in, under whatever the file says: ``kuberay-py`` (the chart's default ``image.repository``)
is this checkout's operator: the agent's environment with the directory that holds the running
``kuberay`` package first on ``PYTHONPATH``, so the chart's unchanged ``kuberay operator ...``
command runs the code under test even from a worktree whose package is not the one installed.

Environment: Kubernetes order and semantics: image env, then the ``KUBERNETES_SERVICE_*`` /
``KUBERNETES_PORT*`` variables, then ``envFrom`` (with prefix), then ``env``, each value expanded
with ``$(VAR)`` references to variables defined before it (``$$`` escapes). Missing referenced
objects or keys raise ``ConfigError`` unless ``optional`` (kubelet's CreateContainerConfigError).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from kuberay.api import quantity

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGES_ENV = "KUBERAY_DEVENV_IMAGES"
OPERATOR_IMAGE = "kuberay-py"


class ConfigError(RuntimeError):
    """The container cannot be configured yet (a missing Secret/ConfigMap key, no command)."""


# ---------------------------------------------------------------------- images
@dataclass(frozen=True)
class ImageEntry:
    python_env: str = sys.prefix
    env: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    working_dir: str = "/"
    home: str = "/root"

    @property
    def path(self) -> str:
        return f"{self.python_env.rstrip('/')}/bin:{DEFAULT_PATH}"


@dataclass(frozen=True)
class ImageMap:
    entries: Mapping[str, ImageEntry] = field(default_factory=dict)

    def resolve(self, image: str) -> ImageEntry:
        best = None
        for prefix in self.entries:
            if image.startswith(prefix) and (best is None or len(prefix) > len(best)):
                best = prefix
        return self.entries[best] if best is not None else ImageEntry()

    def to_json(self) -> dict[str, Any]:
        return {
            prefix: {
                "python_env": e.python_env,
                "env": dict(e.env),
                "entrypoint": list(e.entrypoint),
                "working_dir": e.working_dir,
                "home": e.home,
            }
            for prefix, e in self.entries.items()
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ImageMap:
        entries = {}
        for prefix, raw in data.items():
            raw = raw or {}
            entries[str(prefix)] = ImageEntry(
                python_env=str(raw.get("python_env") or sys.prefix),
                env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
                entrypoint=tuple(str(a) for a in raw.get("entrypoint") or ()),
                working_dir=str(raw.get("working_dir") or "/"),
                home=str(raw.get("home") or "/root"),
            )
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path | None = None) -> ImageMap:
        """From ``path``, else ``$KUBERAY_DEVENV_IMAGES``, else every image -> this Python; the
        operator's image is added unless the map names it."""
        source = path or os.environ.get(IMAGES_ENV)
        builtin = {OPERATOR_IMAGE: operator_image()}
        if not source:
            return cls({"": ImageEntry(), **builtin})
        text = Path(source).read_text()
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ValueError(f"{source}: the image map must be a mapping of prefix -> entry")
        return cls({**builtin, **cls.from_data(data).entries})


def operator_image() -> ImageEntry:
    """The operator image as this checkout: its ``src`` directory wins over whatever ``kuberay``
    the environment has installed (an editable install of another worktree, say)."""
    src = Path(__file__).resolve().parents[3]
    return ImageEntry(env={"PYTHONPATH": str(src)})


# ---------------------------------------------------------------------- quantities
def parse_quantity(text: str | int | float) -> Fraction:
    """Exact value of a Kubernetes quantity (the builders' parser, one grammar for both)."""
    try:
        return quantity.parse_quantity(str(text)).value
    except quantity.QuantityError as exc:
        raise ValueError(f"not a quantity: {text!r}") from exc


# ---------------------------------------------------------------------- expansion
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: unknown references stay as written, ``$$`` -> ``$``."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR.sub(sub, value)


# ---------------------------------------------------------------------- env
@dataclass
class PodFacts:
    """What fieldRef and resourceFieldRef can point at, beyond the pod object itself."""

    pod_ip: str
    host_ip: str
    node_allocatable: Mapping[str, str]
    api_host: str
    api_port: int


Getter = Callable[[str, str], dict[str, Any] | None]  # (namespace, name) -> object or None


def field_ref(pod: dict[str, Any], path: str, facts: PodFacts) -> str:
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
    }
    if path in simple:
        return str(simple[path])
    match = re.match(r"^metadata\.(labels|annotations)\['(.*)'\]$", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ConfigError(f"unsupported fieldRef {path!r}")


def resource_ref(
    pod: dict[str, Any], container: dict[str, Any], ref: dict[str, Any], facts: PodFacts
) -> str:
    target = container
    if ref.get("containerName"):
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            if c["name"] == ref["containerName"]:
                target = c
    kind, _, resource = ref["resource"].partition(".")
    resources = target.get("resources") or {}
    raw = (resources.get(kind) or {}).get(resource)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(resource)
    if raw is None:
        raw = facts.node_allocatable.get(resource, "0")
    value = parse_quantity(raw)
    # The API defaults an unset divisor to "0", which means 1 (as in kubelet).
    divisor = parse_quantity(ref.get("divisor") or "1") or Fraction(1)
    return str(math.ceil(value / divisor))


def _decoded(obj: dict[str, Any], key: str, secret: bool) -> str | None:
    if secret:
        data = obj.get("data") or {}
        if key in data:
            return base64.b64decode(data[key]).decode(errors="replace")
        return (obj.get("stringData") or {}).get(key)
    if key in (obj.get("data") or {}):
        return str(obj["data"][key])
    binary = obj.get("binaryData") or {}
    return base64.b64decode(binary[key]).decode(errors="replace") if key in binary else None


def key_ref(
    ref: dict[str, Any], namespace: str, getter: Getter, secret: bool, var: str
) -> str | None:
    kind = "Secret" if secret else "ConfigMap"
    obj = getter(namespace, ref.get("name", ""))
    optional = bool(ref.get("optional"))
    if obj is None:
        if optional:
            return None
        raise ConfigError(f"{kind} {ref.get('name')!r} not found (env {var})")
    value = _decoded(obj, ref["key"], secret)
    if value is None and not optional:
        raise ConfigError(f"key {ref['key']!r} not found in {kind} {ref.get('name')!r} (env {var})")
    return value


def service_env(host: str, port: int) -> dict[str, str]:
    url = f"tcp://{host}:{port}"
    prefix = f"KUBERNETES_PORT_{port}_TCP"
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": url,
        prefix: url,
        f"{prefix}_PROTO": "tcp",
        f"{prefix}_PORT": str(port),
        f"{prefix}_ADDR": host,
    }


def container_env(
    pod: dict[str, Any],
    container: dict[str, Any],
    image: ImageEntry,
    facts: PodFacts,
    secrets: Getter,
    configmaps: Getter,
    hostname: str,
) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {
        "PATH": image.path,
        "HOME": image.home,
        "HOSTNAME": hostname,
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.update(image.env)
    env.update(service_env(facts.api_host, facts.api_port))
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        secret = "secretRef" in source
        ref = source.get("secretRef") or source.get("configMapRef") or {}
        obj = (secrets if secret else configmaps)(namespace, ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            kind = "Secret" if secret else "ConfigMap"
            raise ConfigError(f"{kind} {ref.get('name')!r} not found (envFrom)")
        keys = set(obj.get("data") or {}) | set(obj.get("binaryData") or {})
        for key in sorted(keys):
            decoded = _decoded(obj, key, secret)
            if decoded is not None:
                env[prefix + key] = decoded
    for var in container.get("env") or []:
        name = var["name"]
        if "value" in var or "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        source = var["valueFrom"]
        value: str | None
        if "fieldRef" in source:
            value = field_ref(pod, source["fieldRef"]["fieldPath"], facts)
        elif "resourceFieldRef" in source:
            value = resource_ref(pod, container, source["resourceFieldRef"], facts)
        elif "secretKeyRef" in source:
            value = key_ref(source["secretKeyRef"], namespace, secrets, True, name)
        elif "configMapKeyRef" in source:
            value = key_ref(source["configMapKeyRef"], namespace, configmaps, False, name)
        else:
            raise ConfigError(f"env {name}: unsupported valueFrom {sorted(source)}")
        if value is not None:
            env[name] = value
    return env


def container_argv(
    container: dict[str, Any], image: ImageEntry, env: Mapping[str, str]
) -> list[str]:
    """command + args with ``$(VAR)`` expanded; the image's entrypoint when there is no command."""
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    if not command:
        if not image.entrypoint:
            raise ConfigError(
                f"container {container['name']!r} has no command and the process runtime does "
                f"not know the entrypoint of image {container.get('image')!r}; set `command`, or "
                "an `entrypoint` for that image in the image map"
            )
        command = list(image.entrypoint)
    return [expand(str(a), env) for a in command + args]
