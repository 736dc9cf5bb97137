"""The real Kueue (``sigs.k8s.io/kueue`` manager) beside a local plane, for admission tests.

Kueue runs as a host process next to the plane's apiserver, as the plane's other components do:

- its CRDs are read at run time from the Go module (``config/components/crd/bases`` of the
  pinned version in the module cache), never copied into this repository;
- its webhooks are served on loopback with a certificate from the plane's CA, and registered
  with ``clientConfig.url`` (the apiserver is on the same host), built from the module's
  ``config/components/webhook/manifests.yaml``: only Kueue's own kinds and the enabled Ray
  integrations, limited to namespaces carrying ``NAMESPACE_LABEL`` so that a shared plane's
  other tests never meet a webhook;
- its configuration turns internal certificate management and leader election off, limits the
  managed namespaces to the same label, and enables the ``ray.io/rayjob`` and
  ``ray.io/raycluster`` integrations (more with ``frameworks``);
- it talks to the apiserver with the plane's admin kubeconfig, so no RBAC is installed.

Invariants and failure modes:
- Kueue refuses to start its Ray integrations when the ray.io CRDs are missing, so ``start()``
  installs ours first; it returns only when Kueue's ``/readyz`` answers (webhook server
  listening) and its webhook configurations are registered, or raises ``PlaneError`` with the
  log tail.
- With internal certificate management off, the manager insists on reading a metrics
  certificate from the fixed path ``/etc/kueue/metrics/certs``. Rather than writing to the
  host's ``/etc``, the process runs in a private mount namespace where ``/etc`` is an overlay of
  the host's with that one directory added (a user namespace as well when not root).
- ``stop()`` removes the webhook configurations before ending the process (a registered webhook
  whose server is gone would refuse every matching request), then SIGTERM, then SIGKILL. The
  process dies with its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries
from kuberay.devenv.manifests import apply, install_crds, install_crds_from, load_documents
from kuberay.devenv.plane import Plane, PlaneError, _terminate, free_port, spawn_logged
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.errors import NotFound

MODULE = "sigs.k8s.io/kueue"
_KUEUE = "kueue.x-k8s.io"
RESOURCE_FLAVORS = Resource(_KUEUE, "v1beta2", "resourceflavors", False, "ResourceFlavor")
CLUSTER_QUEUES = Resource(_KUEUE, "v1beta2", "clusterqueues", False, "ClusterQueue")
LOCAL_QUEUES = Resource(_KUEUE, "v1beta2", "localqueues", kind="LocalQueue")
WORKLOADS = Resource(_KUEUE, "v1beta2", "workloads", kind="Workload")
WORKLOAD_PRIORITY_CLASSES = Resource(
    _KUEUE, "v1beta2", "workloadpriorityclasses", False, "WorkloadPriorityClass"
)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Namespaces where Kueue manages jobs and its webhooks apply.
NAMESPACE_LABEL = ("kuberay.io/kueue", "enabled")
DEFAULT_FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")
# Webhook rules' resources per Kueue integration (framework) name.
_FRAMEWORK_RESOURCES = {
    "ray.io/rayjob": "rayjobs",
    "ray.io/raycluster": "rayclusters",
    "ray.io/rayservice": "rayservices",
}
WEBHOOK_CONFIG_NAMES = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
_ADMISSION = "admissionregistration.k8s.io"
# The overlay that gives the child an /etc holding kueue/metrics/certs: "$1" is a private
# scratch directory (a tmpfs is mounted there so the overlay's upper layer never lies on an
# unsupported filesystem), "$2"/"$3" the certificate and key, then the command.
_PRIVATE_ETC = """set -e
scratch=$1; cert=$2; key=$3; shift 3
mount -t tmpfs kueue-etc "$scratch"
mkdir -p "$scratch/upper/kueue/metrics/certs" "$scratch/work"
cp "$cert" "$scratch/upper/kueue/metrics/certs/tls.crt"
cp "$key" "$scratch/upper/kueue/metrics/certs/tls.key"
mount -t overlay kueue-etc -o "lowerdir=/etc,upperdir=$scratch/upper,workdir=$scratch/work" /etc
exec "$@"
"""


def module_dir() -> Path:
    """Where the pinned Kueue module's files are (downloaded into the module cache if needed)."""
    go = shutil.which("go")
    if go is None:
        raise binaries.BuildError(
            "`go` is not on PATH: Kueue's CRDs and webhooks are read from its Go module"
        )
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{MODULE}@{binaries.KUEUE_VERSION}"],
        cwd=binaries.source_root() / "kueue",
        capture_output=True,
        text=True,
    )
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or not info.get("Dir"):
        raise binaries.BuildError(
            f"cannot locate {MODULE}@{binaries.KUEUE_VERSION}: {info.get('Error') or proc.stderr}"
        )
    return Path(info["Dir"])


def webhook_configurations(
    manifests: Iterable[dict[str, Any]],
    base_url: str,
    ca_bundle: bytes,
    frameworks: Iterable[str] = DEFAULT_FRAMEWORKS,
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations pointed at ``base_url`` (by URL, with ``ca_bundle``),
    keeping the webhooks of Kueue's own kinds and of the enabled Ray integrations, each limited
    to namespaces labelled ``NAMESPACE_LABEL``."""
    ray_resources = {_FRAMEWORK_RESOURCES[f] for f in frameworks if f in _FRAMEWORK_RESOURCES}
    key, value = NAMESPACE_LABEL
    out = []
    for doc in manifests:
        kind = doc.get("kind")
        if kind not in WEBHOOK_CONFIG_NAMES:
            continue
        hooks = []
        for hook in doc.get("webhooks") or []:
            rules = hook.get("rules") or []
            groups = {g for r in rules for g in r.get("apiGroups") or []}
            resources = {res for r in rules for res in r.get("resources") or []}
            if groups != {"kueue.x-k8s.io"} and not (
                groups == {"ray.io"} and resources <= ray_resources
            ):
                continue
            hook = copy.deepcopy(hook)
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": base_url + path,
                "caBundle": base64.b64encode(ca_bundle).decode(),
            }
            hook["namespaceSelector"] = {"matchLabels": {key: value}}
            hooks.append(hook)
        out.append(
            {
                "apiVersion": f"{_ADMISSION}/v1",
                "kind": kind,
                "metadata": {"name": WEBHOOK_CONFIG_NAMES[kind]},
                "webhooks": hooks,
            }
        )
    return out


def configuration(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    frameworks: Iterable[str] = DEFAULT_FRAMEWORKS,
    feature_gates: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2) for a loopback process."""
    key, value = NAMESPACE_LABEL
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # "0": no metrics server (the certificate watcher still wants its files, see above).
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": {key: value}},
        # No client-side rate limit: the tests wait on Kueue's decisions.
        "clientConnection": {"qps": -1, "burst": 100},
        "integrations": {"frameworks": list(frameworks)},
        # Workloads then carry a PodsReady condition, which Kueue derives from the Ray objects'
        # status (a RayJob's status.rayClusterStatus.state, a RayCluster's state); the timeout is
        # long enough never to evict on a slow machine.
        "waitForPodsReady": {"timeout": "10m", "blockAdmission": False},
        # The on-demand visibility API server would bind a fixed port (8082) and is not needed.
        "featureGates": {"VisibilityOnDemand": False, **(feature_gates or {})},
    }


class Kueue:
    """One Kueue manager for one plane; ``await kueue.start(kube)`` ... ``await kueue.stop()``."""

    def __init__(
        self,
        plane: Plane,
        *,
        frameworks: Iterable[str] = DEFAULT_FRAMEWORKS,
        feature_gates: Mapping[str, bool] | None = None,
    ) -> None:
        self.plane = plane
        self.dir = plane.dir / "kueue"
        self.frameworks = tuple(frameworks)
        self.feature_gates = dict(feature_gates or {})
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.kube: KubeClient | None = None

    @property
    def log_path(self) -> Path:
        return self.plane.logs / "kueue.log"

    async def start(self, kube: KubeClient, timeout: float = 120.0) -> None:
        binary = binaries.ensure(["kueue"])["kueue"]
        module = module_dir()
        await install_crds(kube)  # Kueue checks that the ray.io CRDs are served
        await install_crds_from(
            kube, sorted((module / "config/components/crd/bases").glob("*.yaml"))
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        cert, key = self.plane.pki.ensure_server("kueue-webhook", ("127.0.0.1", "localhost"))
        cert_dir = self.dir / "certs"
        cert_dir.mkdir(exist_ok=True)
        shutil.copyfile(cert, cert_dir / "tls.crt")
        shutil.copyfile(key, cert_dir / "tls.key")
        config_file = self.dir / "config.yaml"
        settings = configuration(
            webhook_port=self.webhook_port,
            health_port=self.health_port,
            cert_dir=cert_dir,
            frameworks=self.frameworks,
            feature_gates=self.feature_gates,
        )
        config_file.write_text(json.dumps(settings, indent=2))
        scratch = self.dir / "etc"
        scratch.mkdir(exist_ok=True)
        namespaces = ["--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            namespaces = ["--user", "--map-root-user", *namespaces]
        argv = [
            "unshare",
            *namespaces,
            "--",
            "sh",
            "-c",
            _PRIVATE_ETC,
            "kueue-etc",
            str(scratch),
            str(cert_dir / "tls.crt"),
            str(cert_dir / "tls.key"),
            str(binary),
            f"--config={config_file}",
            f"--kubeconfig={self.plane.kubeconfig}",
            "--zap-log-level=2",
        ]
        self.kube = kube
        self.proc = spawn_logged(argv, self.log_path, self.dir)
        self._wait_ready(timeout)
        docs = load_documents([module / "config/components/webhook/manifests.yaml"])
        base = f"https://127.0.0.1:{self.webhook_port}"
        for config in webhook_configurations(
            docs, base, self.plane.pki.ca_cert.read_bytes(), self.frameworks
        ):
            await apply(kube, config)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise PlaneError(
                    f"kueue exited with code {self.proc.returncode}; log {self.log_path}:\n"
                    + self.log_tail()
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise PlaneError(f"kueue was not ready within {timeout:.0f}s:\n{self.log_tail()}")

    async def stop(self) -> None:
        if self.kube is not None:
            for kind, name in WEBHOOK_CONFIG_NAMES.items():
                res = Resource(_ADMISSION, "v1", kind.lower() + "s", False, kind)
                with contextlib.suppress(NotFound):
                    await self.kube.delete(res, name)
            self.kube = None
        if self.proc is not None:
            _terminate(self.proc, 10.0)
            self.proc = None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
