"""The operator image, run from its own root file system: entry point, user, read-only root.

Not part of the default run: build the image first (``scripts/build-image.sh``, which needs the
Debian mirror and PyPI), then, as root, ``pytest --run-image tests/image``. ``KUBERAY_IMAGE``
names another image (default ``localhost/kuberay-py:<version>``). Nothing here uses the network.

The image is exported with ``buildah push`` to an OCI layout and unpacked with ``umoci``; each
run is ``chroot`` into that root file system, as the image's user, with the image's environment,
inside a private mount namespace where the root is bind-mounted read-only (what
``readOnlyRootFilesystem: true`` gives a pod), ``/proc`` and ``/dev`` are mounted, and a
read-only directory with a kubeconfig sits on ``/mnt``. The host network is shared, so the
operator reaches the test plane's apiserver and the test reaches the operator's probes.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import kuberay
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.plane import Plane
from kuberay.runtime.client import KubeClient

IMAGE = os.environ.get("KUBERAY_IMAGE", f"localhost/kuberay-py:{kuberay.__version__}")
NONROOT = 65532
START_TIMEOUT = 90.0

# Runs "$@" in the mount namespace unshare made: the image root read-only, /proc and /dev
# mounted, the kubeconfig directory (when given) read-only on /mnt.
_ENTER = r"""
set -eu
root=$1 conf=$2
shift 2
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
if [ -n "$conf" ]; then
    mount --bind "$conf" "$root/mnt"
    mount -o remount,bind,ro "$root/mnt"
fi
exec "$@"
"""


@dataclass
class Bundle:
    """An unpacked image: its root file system and the process its configuration describes."""

    root: Path
    args: list[str]
    env: list[str]
    uid: int
    gid: int

    def argv(
        self, *args: str, command: list[str] | None = None, conf: Path | None = None
    ) -> list[str]:
        """The host command that runs ``command`` (default: the image's entry point) + ``args``
        inside the image as its user, with the root file system read-only."""
        return [
            "unshare",
            "--mount",
            "--propagation=private",
            "--",
            "sh",
            "-c",
            _ENTER,
            "enter",
            str(self.root),
            str(conf or ""),
            "env",
            "-i",
            *self.env,
            shutil.which("chroot") or "/usr/sbin/chroot",
            f"--userspec={self.uid}:{self.gid}",
            str(self.root),
            *(command or self.args),
            *args,
        ]

    def run(self, *args: str, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, command=command),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: apt-get install -y buildah umoci")
    return path


@pytest.fixture(scope="module")
def bundle(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bundle]:
    if not request.config.getoption("--run-image"):
        pytest.skip("the image tests run with --run-image (after scripts/build-image.sh)")
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (mount namespaces, chroot)")
    buildah, umoci = _tool("buildah"), _tool("umoci")
    found = subprocess.run(
        [buildah, "inspect", "--type", "image", IMAGE],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(f"no image {IMAGE}: build it with scripts/build-image.sh")
    work = tmp_path_factory.mktemp("image")
    layout = f"{work / 'oci'}:kuberay"
    subprocess.run([buildah, "push", "--quiet", IMAGE, f"oci:{layout}"], check=True, timeout=300)
    subprocess.run(
        [umoci, "unpack", "--image", layout, str(work / "bundle")], check=True, timeout=300
    )
    config = json.loads((work / "bundle" / "config.json").read_text())
    process = config["process"]
    yield Bundle(
        root=work / "bundle" / "rootfs",
        args=process["args"],
        env=process["env"],
        uid=process["user"]["uid"],
        gid=process["user"]["gid"],
    )
    shutil.rmtree(work, ignore_errors=True)


def test_entry_point_and_user(bundle: Bundle) -> None:
    assert bundle.args == ["/manager"]
    assert (bundle.uid, bundle.gid) == (NONROOT, NONROOT)
    passwd = (bundle.root / "etc" / "passwd").read_text().splitlines()
    assert any(line.split(":")[2] == str(NONROOT) for line in passwd)
    assert os.access(bundle.root / "manager", os.X_OK)


def test_version(bundle: Bundle) -> None:
    started = time.monotonic()
    proc = bundle.run("--version")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"kuberay-py {kuberay.__version__} (KubeRay v1.7.0)\n"
    print(f"\n/manager --version from the image: {took:.2f} s")
    # This project's chart passes the subcommand first; /manager takes it as well.
    assert bundle.run("operator", "--version").stdout == proc.stdout


def test_kuberay_command_is_on_path(bundle: Bundle) -> None:
    # This project's chart runs `kuberay operator ...` (operatorCommand); upstream's runs /manager.
    proc = bundle.run("operator", "--version", command=["kuberay"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kuberay-py ")


def test_carries_the_operator_only(bundle: Bundle) -> None:
    """No local plane, node agent or test helpers (kuberay-py-devenv) in the image; the dev
    commands say so in one line."""
    (site,) = (bundle.root / "opt" / "kuberay" / "lib").glob("python3*/site-packages")
    assert (site / "kuberay" / "cli" / "operator.py").is_file()
    assert not (site / "kuberay" / "devenv").exists()
    assert not list(site.glob("kuberay_py_devenv*"))
    proc = bundle.run("dev", "up", command=["kuberay"])
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kuberay dev: the local development plane is not installed"), line


def test_runs_as_nonroot_on_a_read_only_root(bundle: Bundle) -> None:
    probe = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "for d in ('/tmp', '/', '/opt/kuberay'):\n"
        "    try:\n"
        "        open(os.path.join(d, 'probe'), 'w').close()\n"
        "        print(d, 'writable')\n"
        "    except OSError as exc:\n"
        "        print(d, exc.strerror)\n"
    )
    proc = bundle.run("-c", probe, command=["/opt/kuberay/bin/python"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{NONROOT} {NONROOT}"
    # /tmp is world-writable in the image: only the read-only mount stops the write.
    assert lines[1:] == [f"{d} Read-only file system" for d in ("/tmp", "/", "/opt/kuberay")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            code: int = answer.status
            return code
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _kubeconfig_dir(plane: Plane, directory: Path) -> Path:
    """The plane's admin kubeconfig with the certificates and key inline (``-data`` fields),
    readable by the image's user; mounted on /mnt. Inline keys are what a read-only root makes
    hard: the operator must keep them without writing a file."""
    directory.mkdir()
    doc = yaml.safe_load(plane.kubeconfig.read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    for section, key in (
        (cluster, "certificate-authority"),
        (user, "client-certificate"),
        (user, "client-key"),
    ):
        section[f"{key}-data"] = base64.b64encode(Path(section.pop(key)).read_bytes()).decode()
    (directory / "kubeconfig").write_text(yaml.safe_dump(doc))
    for path in (directory, directory / "kubeconfig"):
        os.chown(path, NONROOT, NONROOT)
    directory.chmod(0o700)
    return directory


@pytest.fixture
async def crds(kube: KubeClient) -> None:
    await install_crds(kube)


@pytest.mark.usefixtures("crds")
def test_operator_starts_and_answers_probes(bundle: Bundle, plane: Plane, tmp_path: Path) -> None:
    conf = _kubeconfig_dir(plane, tmp_path / "kube")
    probe_port, metrics_port = _free_port(), _free_port()
    argv = bundle.argv(
        "--kubeconfig=/mnt/kubeconfig",
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{metrics_port}",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
        "--log-stdout-encoder=console",
        conf=conf,
    )
    log_path = tmp_path / "operator.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{probe_port}"
        deadline = started + START_TIMEOUT
        while _status(f"{base}/readyz") != 200:
            assert proc.poll() is None, f"the operator exited:\n{log_path.read_text()}"
            assert time.monotonic() < deadline, f"not ready in time:\n{log_path.read_text()}"
            time.sleep(0.2)
        ready = time.monotonic() - started
        assert _status(f"{base}/healthz") == 200
        assert _status(f"http://127.0.0.1:{metrics_port}/metrics") == 200
        # unshare and sh exec'd their way to the operator: the pid is the operator's Python.
        status = Path(f"/proc/{proc.pid}/status").read_text()
        uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
        assert uids.split()[1:] == [str(NONROOT)] * 4
        assert b"/manager" in Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        print(f"\noperator from the image ready (/readyz 200) after {ready:.2f} s")
    finally:
        proc.terminate()
        try:
            code = proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
    assert code == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


def test_podman_runs_it_read_only(bundle: Bundle) -> None:
    """The same image through a container runtime (podman, runc): its own user, entry point and
    a read-only root. runc because crun refuses a hybrid cgroup hierarchy, and low explicit
    ulimits because podman's defaults for root may be above what the host allows."""
    podman, runc = shutil.which("podman"), shutil.which("runc")
    if podman is None or runc is None:
        pytest.skip("podman and runc are not installed (apt-get install -y podman runc)")
    run = [
        podman,
        "--runtime",
        runc,
        "run",
        "--rm",
        "--read-only",
        # podman mounts tmpfs volumes on /tmp, /var/tmp and /run by default; a pod does not
        "--read-only-tmpfs=false",
        "--network=none",
        "--ulimit=nofile=1024:1024",
        "--ulimit=nproc=1024:1024",
    ]
    version = subprocess.run(
        [*run, IMAGE, "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout == f"kuberay-py {kuberay.__version__} (KubeRay v1.7.0)\n"
    proc = subprocess.run(
        [*run, "--entrypoint=/opt/kuberay/bin/python", IMAGE, "-c", _WRITE_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{NONROOT} Read-only file system"]


_WRITE_PROBE = (
    "import os\n"
    "try:\n"
    "    open('/tmp/probe', 'w')\n"
    "except OSError as exc:\n"
    "    print(os.getuid(), exc.strerror)\n"
)
