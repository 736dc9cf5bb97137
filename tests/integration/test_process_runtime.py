"""The process node runtime: pods as Linux processes on this machine, with cluster DNS.

Network rule: traffic only to loopback and to the addresses of the pods these tests create (and
the plane's bridge address); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kuberay.devenv.nodeagent import supported
from kuberay.devenv.nodeagent.network import leftovers
from kuberay.devenv.plane import Plane, PlaneConfig
from kuberay.devenv.testing import (
    has_condition,
    skip_unless_strict,
    wait_for,
    wait_gone,
    wait_until,
)
from kuberay.runtime.client import (
    CONFIGMAPS,
    JOBS,
    PODS,
    PVCS,
    PVS,
    SECRETS,
    SERVICES,
    KubeClient,
)


@pytest.fixture(autouse=True)
def _process_runtime_supported() -> None:
    why = supported()
    if why is not None:
        skip_unless_strict(why)


PY = "python"


def pod_manifest(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {"app": name})
    for c in containers:
        c.setdefault("image", "python:3.11")
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 5, **spec},
    }
    return body


def http_server(port: int = 8080, **extra: Any) -> dict[str, Any]:
    return {
        "name": "web",
        "command": [PY, "-m", "http.server", str(port), "--bind", "0.0.0.0"],
        "ports": [{"containerPort": port, "name": "http"}],
        **extra,
    }


def is_ready(pod: dict[str, Any]) -> bool:
    return has_condition(pod, "Ready")


def phase_is(*phases: str) -> Any:
    return lambda pod: pod.get("status", {}).get("phase") in phases


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


async def serve_behind_service(
    kube: KubeClient, ns: str, pod: str, service: str, probe: dict[str, Any], port: dict[str, Any]
) -> dict[str, Any]:
    """An http.server pod (port 8080) selected by a Service; returns the pod once Ready."""
    body = pod_manifest(pod, [http_server(readinessProbe=probe)], labels={"app": pod})
    await kube.create(PODS, body, ns)
    svc = {"metadata": {"name": service}, "spec": {"selector": {"app": pod}, "ports": [port]}}
    await kube.create(SERVICES, svc, ns)
    return await wait_for(kube, PODS, pod, ns, is_ready, timeout=60, what="Ready")


async def run_to_completion(
    kube: KubeClient,
    plane: Plane,
    ns: str,
    name: str,
    script: str,
    timeout: float = 60,
    **spec: Any,
) -> str:
    """Runs ``python -c script`` in a pod (restartPolicy Never) and returns its output."""
    container = {"name": "main", "command": [PY, "-c", script], **spec.pop("container", {})}
    await kube.create(PODS, pod_manifest(name, [container], restartPolicy="Never", **spec), ns)
    pod = await wait_for(
        kube, PODS, name, ns, phase_is("Succeeded", "Failed"), timeout=timeout, what="completion"
    )
    out = plane.container_log(ns, name, "main")
    assert pod["status"]["phase"] == "Succeeded", out
    return out


async def test_init_container_then_ready_http_server(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    body = pod_manifest(
        "web",
        [
            http_server(
                workingDir="/srv",
                volumeMounts=[{"name": "site", "mountPath": "/srv"}],
                readinessProbe={
                    "httpGet": {"path": "/index.txt", "port": "http"},
                    "periodSeconds": 1,
                },
            )
        ],
        initContainers=[
            {
                "name": "prepare",
                "image": "python:3.11",
                "command": ["sh", "-c", "echo from-init > /srv/index.txt; echo init-done"],
                "volumeMounts": [{"name": "site", "mountPath": "/srv"}],
            }
        ],
        volumes=[{"name": "site", "emptyDir": {}}],
    )
    await process_kube.create(PODS, body, ns)
    pod = await wait_for(process_kube, PODS, "web", ns, is_ready, timeout=60, what="Ready")
    status = pod["status"]
    assert status["phase"] == "Running"
    assert status["hostIP"]
    assert status["podIP"] != status["hostIP"]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    web = status["containerStatuses"][0]
    assert web["ready"]
    assert web["started"]
    assert "running" in web["state"]
    assert has_condition(pod, "Initialized")
    assert has_condition(pod, "ContainersReady")
    body_text = await asyncio.to_thread(http_get, f"http://{status['podIP']}:8080/index.txt")
    assert body_text == "from-init\n"
    assert "init-done" in process_plane.container_log(ns, "web", "prepare")


async def test_env_from_field_resource_secret_and_configmap_refs(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    await process_kube.create(
        SECRETS,
        {"metadata": {"name": "creds"}, "data": {"password": base64.b64encode(b"s3cret").decode()}},
        ns,
    )
    await process_kube.create(
        CONFIGMAPS, {"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}, ns
    )

    def ref(kind: str, **kw: Any) -> dict[str, Any]:
        return {"valueFrom": {kind: kw}}

    env = [
        {"name": "POD_NAME", **ref("fieldRef", fieldPath="metadata.name")},
        {"name": "POD_NS", **ref("fieldRef", fieldPath="metadata.namespace")},
        {"name": "POD_UID", **ref("fieldRef", fieldPath="metadata.uid")},
        {"name": "POD_IP", **ref("fieldRef", fieldPath="status.podIP")},
        {"name": "HOST_IP", **ref("fieldRef", fieldPath="status.hostIP")},
        {"name": "NODE", **ref("fieldRef", fieldPath="spec.nodeName")},
        {"name": "SA", **ref("fieldRef", fieldPath="spec.serviceAccountName")},
        {"name": "GROUP", **ref("fieldRef", fieldPath="metadata.labels['ray.io/group']")},
        {"name": "CPU_M", **ref("resourceFieldRef", resource="requests.cpu", divisor="1m")},
        {"name": "CPU", **ref("resourceFieldRef", resource="limits.cpu")},
        {"name": "MEM_MI", **ref("resourceFieldRef", resource="limits.memory", divisor="1Mi")},
        {"name": "PASSWORD", **ref("secretKeyRef", name="creds", key="password")},
        {"name": "MODE", **ref("configMapKeyRef", name="settings", key="mode")},
        {"name": "MISSING", **ref("configMapKeyRef", name="nope", key="x", optional=True)},
        {"name": "COMBINED", "value": "$(POD_NAME)-$(MODE)-$$(literal)"},
    ]
    container = {
        "env": env,
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CM_"}],
        "resources": {
            "requests": {"cpu": "250m", "memory": "64Mi"},
            "limits": {"cpu": "1500m", "memory": "128Mi"},
        },
    }
    out = await run_to_completion(
        process_kube,
        process_plane,
        ns,
        "envpod",
        "import json, os; print(json.dumps(dict(os.environ)))",
        container=container,
        labels={"ray.io/group": "workers"},
    )
    seen = json.loads(out.strip().splitlines()[-1])
    pod = await process_kube.get(PODS, "envpod", ns)
    assert seen["POD_NAME"] == "envpod"
    assert seen["POD_NS"] == ns
    assert seen["POD_UID"] == pod["metadata"]["uid"]
    assert seen["POD_IP"] == pod["status"]["podIP"]
    assert seen["HOST_IP"] == pod["status"]["hostIP"]
    assert seen["NODE"] == pod["spec"]["nodeName"]
    assert seen["SA"] == "default"
    assert seen["GROUP"] == "workers"
    assert (seen["CPU_M"], seen["CPU"], seen["MEM_MI"]) == ("250", "2", "128")
    assert seen["PASSWORD"] == "s3cret"
    assert seen["MODE"] == "fast"
    assert "MISSING" not in seen
    assert seen["COMBINED"] == "envpod-fast-$(literal)"
    assert (seen["CM_mode"], seen["CM_level"]) == ("fast", "3")
    assert seen["KUBERNETES_SERVICE_HOST"] == pod["status"]["hostIP"]
    assert seen["KUBERNETES_SERVICE_PORT"] == seen["KUBERNETES_SERVICE_PORT_HTTPS"]
    assert seen["HOSTNAME"] == "envpod"


async def test_volumes_are_private_to_their_pod(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    await process_kube.create(
        SECRETS, {"metadata": {"name": "vol-secret"}, "stringData": {"token.txt": "abc"}}, ns
    )
    await process_kube.create(
        CONFIGMAPS, {"metadata": {"name": "vol-cm"}, "data": {"app.conf": "x=1"}}, ns
    )
    script_a = """
import json, os, socket
open('/tmp/marker-a', 'w').write('a')
open('/mnt/kr-data/file', 'w').write('data')
sa = '/var/run/secrets/kubernetes.io/serviceaccount'
print(json.dumps({
  'secret': open('/mnt/kr-sec/token.txt').read(),
  'cm': open('/mnt/kr-cm/app.conf').read(),
  'sa': sorted(os.listdir(sa)),
  'ns': open(sa + '/namespace').read(),
  'token': len(open(sa + '/token').read()),
  'shm': os.statvfs('/dev/shm').f_blocks > 0,
  'hostname': socket.gethostname(),
}))
"""
    mounts = [
        {"name": "data", "mountPath": "/mnt/kr-data"},
        {"name": "sec", "mountPath": "/mnt/kr-sec", "readOnly": True},
        {"name": "cm", "mountPath": "/mnt/kr-cm"},
    ]
    volumes = [
        {"name": "data", "emptyDir": {}},
        {"name": "sec", "secret": {"secretName": "vol-secret"}},
        {"name": "cm", "configMap": {"name": "vol-cm"}},
    ]
    out = await run_to_completion(
        process_kube,
        process_plane,
        ns,
        "pod-a",
        script_a,
        container={"volumeMounts": mounts},
        volumes=volumes,
    )
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["secret"] == "abc"
    assert seen["cm"] == "x=1"
    assert seen["sa"] == ["ca.crt", "namespace", "token"]
    assert seen["ns"] == ns
    assert seen["token"] > 100
    assert seen["shm"]
    assert seen["hostname"] == "pod-a"
    script_b = """
import json, os
paths = ['/tmp/marker-a', '/mnt/kr-data/file', '/mnt/kr-sec/token.txt', '/mnt/kr-cm/app.conf']
print(json.dumps({p: os.path.exists(p) for p in paths}))
"""
    out = await run_to_completion(
        process_kube, process_plane, ns, "pod-b", script_b, automountServiceAccountToken=False
    )
    assert not any(json.loads(out.strip().splitlines()[-1]).values()), out
    assert not Path("/tmp/marker-a").exists()


async def test_a_running_pod_sees_its_secret_change(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    """Secret volumes are re-read while the pod runs, as kubelet's volume sync does (a
    re-issued certificate reaches running pods this way)."""
    ns = process_namespace
    await process_kube.create(
        SECRETS, {"metadata": {"name": "rotating"}, "stringData": {"v": "one"}}, ns
    )
    script = """
import time
while open('/mnt/kr-rot/v').read() != 'two':
    time.sleep(0.5)
print('saw two')
"""
    await process_kube.create(
        PODS,
        pod_manifest(
            "rotation",
            [
                {
                    "name": "main",
                    "command": [PY, "-c", script],
                    "volumeMounts": [{"name": "rot", "mountPath": "/mnt/kr-rot"}],
                }
            ],
            restartPolicy="Never",
            volumes=[{"name": "rot", "secret": {"secretName": "rotating"}}],
        ),
        ns,
    )
    await wait_for(process_kube, PODS, "rotation", ns, phase_is("Running"), timeout=60)
    await process_kube.patch(SECRETS, "rotating", {"stringData": {"v": "two"}}, ns)
    pod = await wait_for(
        process_kube, PODS, "rotation", ns, phase_is("Succeeded", "Failed"), timeout=60
    )
    out = process_plane.container_log(ns, "rotation", "main")
    assert pod["status"]["phase"] == "Succeeded", out
    assert "saw two" in out


async def test_ray_state_in_home_is_private_to_each_container(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    """A token Ray writes to ~/.ray in one pod reaches neither another pod nor the host."""
    host_token = Path.home() / ".ray" / "kr-test-token"
    write = (
        "import os; d = os.path.expanduser('~/.ray'); os.makedirs(d, exist_ok=True); "
        "open(os.path.join(d, 'kr-test-token'), 'w').write('secret'); print(sorted(os.listdir(d)))"
    )
    out = await run_to_completion(process_kube, process_plane, process_namespace, "writer", write)
    assert "kr-test-token" in out
    read = "import os; print(os.path.exists(os.path.expanduser('~/.ray/kr-test-token')))"
    out = await run_to_completion(process_kube, process_plane, process_namespace, "reader", read)
    assert out.strip() == "False"
    assert not host_token.exists()


async def test_service_account_token_reaches_the_apiserver(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    script = """
import json, os, ssl, urllib.request
sa = '/var/run/secrets/kubernetes.io/serviceaccount'
host, port = os.environ['KUBERNETES_SERVICE_HOST'], os.environ['KUBERNETES_SERVICE_PORT_HTTPS']
ctx = ssl.create_default_context(cafile=sa + '/ca.crt')
body = json.dumps({'apiVersion': 'authentication.k8s.io/v1', 'kind': 'SelfSubjectReview'}).encode()
req = urllib.request.Request(f'https://{host}:{port}/apis/authentication.k8s.io/v1/selfsubjectreviews',
    data=body, method='POST', headers={'Authorization': 'Bearer ' + open(sa + '/token').read(),
    'Content-Type': 'application/json'})
review = json.loads(urllib.request.urlopen(req, context=ctx, timeout=10).read())
print(review['status']['userInfo']['username'])
"""
    out = await run_to_completion(process_kube, process_plane, ns, "whoami", script)
    assert out.strip().splitlines()[-1] == f"system:serviceaccount:{ns}:default"


async def test_dns_resolves_services_and_pods_talk_through_them(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    probe = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
    server = await serve_behind_service(process_kube, ns, "server", "web", probe, {"port": 8080})
    script = f"""
import json, socket, time, urllib.request
deadline = time.time() + 30
while True:
    try:
        addr = socket.gethostbyname('web')
        break
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.5)
full = socket.gethostbyname('web.{ns}.svc.cluster.local')
api = socket.gethostbyname('kubernetes.default')
body = urllib.request.urlopen('http://web:8080/', timeout=5).status
try:
    socket.gethostbyname('example.com'); outside = 'resolved'
except OSError:
    outside = 'nxdomain'
print(json.dumps({{'short': addr, 'full': full, 'api': api, 'status': body, 'outside': outside}}))
"""
    out = await run_to_completion(process_kube, process_plane, ns, "client", script)
    seen = json.loads(out.strip().splitlines()[-1])
    ip = server["status"]["podIP"]
    assert seen == {
        "short": ip,
        "full": ip,
        "api": server["status"]["hostIP"],
        "status": 200,
        "outside": "nxdomain",
    }


async def test_exec_liveness_failure_restarts_the_container(
    process_kube: KubeClient, process_namespace: str
) -> None:
    ns = process_namespace
    container = {
        "name": "main",
        "command": ["sh", "-c", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; sleep 600"],
        "livenessProbe": {
            "exec": {"command": ["cat", "/tmp/healthy"]},
            "periodSeconds": 1,
            "failureThreshold": 2,
        },
    }
    await process_kube.create(PODS, pod_manifest("flaky", [container]), ns)

    def restarted(pod: dict[str, Any]) -> bool:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return bool(statuses) and statuses[0]["restartCount"] >= 1

    pod = await wait_for(process_kube, PODS, "flaky", ns, restarted, timeout=60, what="restart")
    last = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["exitCode"] != 0


async def test_jobs_complete_and_fail(process_kube: KubeClient, process_namespace: str) -> None:
    ns = process_namespace
    for name, code, outcome in (("once", 0, "Complete"), ("fails", 3, "Failed")):
        container = {"name": "main", "image": "python:3.11", "command": [PY, "-c", f"exit({code})"]}
        template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
        job = {"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": template}}
        await process_kube.create(JOBS, job, ns)

        def ended(j: dict[str, Any], outcome: str = outcome) -> bool:
            return has_condition(j, outcome)

        await wait_for(
            process_kube,
            JOBS,
            name,
            ns,
            ended,
            timeout=60,
            what=f"Job {outcome}",
        )


async def test_delete_sends_sigterm_and_honours_the_grace_period(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    handles = (
        "import signal, sys, time\n"
        "def bye(*_):\n    print('got SIGTERM', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\nprint('up', flush=True)\ntime.sleep(600)\n"
    )
    ignores = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
    )
    for name, script, grace in (("polite", handles, 30), ("stubborn", ignores, 2)):
        body = pod_manifest(name, [{"name": "main", "command": [PY, "-c", script]}])
        body["spec"]["terminationGracePeriodSeconds"] = grace
        await process_kube.create(PODS, body, ns)
    for name in ("polite", "stubborn"):
        await wait_for(process_kube, PODS, name, ns, phase_is("Running"), timeout=60)
    for _ in range(50):
        if "up" in process_plane.container_log(ns, "polite", "main"):
            break
        await asyncio.sleep(0.1)
    started = time.monotonic()
    await process_kube.delete(PODS, "polite", ns)
    await wait_gone(process_kube, PODS, "polite", ns, timeout=20)
    assert time.monotonic() - started < 15
    assert "got SIGTERM" in process_plane.container_log(ns, "polite", "main")
    started = time.monotonic()
    await process_kube.delete(PODS, "stubborn", ns)
    await wait_gone(process_kube, PODS, "stubborn", ns, timeout=20)
    assert 1.5 <= time.monotonic() - started < 15


async def test_a_peer_sees_its_connection_end_when_the_pod_is_killed(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    """A pod killed after its grace period closes its connections while it still has its
    network, as on a kubelet: a client following a stream from it (``ray job logs --follow``
    towards a deleted head) gets the end of the connection instead of waiting forever. The
    server ignores SIGTERM and holds half a GiB, so its processes take a while to die after
    SIGKILL; removing the pod's network before they are gone would swallow the FIN."""
    ns = process_namespace
    server = (
        "import signal, socket\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "ballast = bytearray(b'x') * (512 << 20)\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('0.0.0.0', 9000)); s.listen(8)\n"
        "held = []\n"
        "while True:\n    held.append(s.accept()[0])\n"
    )
    body = pod_manifest(
        "holder",
        [
            {
                "name": "main",
                "command": [PY, "-c", server],
                "readinessProbe": {"tcpSocket": {"port": 9000}, "periodSeconds": 1},
            }
        ],
    )
    body["spec"]["terminationGracePeriodSeconds"] = 1
    await process_kube.create(PODS, body, ns)
    pod = await wait_for(process_kube, PODS, "holder", ns, is_ready, timeout=60, what="Ready")
    client = (
        "import os, socket, sys\n"
        "c = socket.create_connection((os.environ['SERVER'], 9000), timeout=10)\n"
        "c.settimeout(None)\n"
        "print('connected', flush=True)\n"
        "try:\n    print('ended', c.recv(16), flush=True)\n"
        "except OSError as exc:\n    print('ended', exc, flush=True)\n"
        "sys.exit(3)\n"
    )
    container = {
        "name": "main",
        "command": [PY, "-c", client],
        "env": [{"name": "SERVER", "value": pod["status"]["podIP"]}],
    }
    await process_kube.create(
        PODS, pod_manifest("follower", [container], restartPolicy="Never"), ns
    )

    async def connected() -> bool:
        return "connected" in process_plane.container_log(ns, "follower", "main")

    await wait_until(connected, what="follower connected", timeout=60)
    await process_kube.delete(PODS, "holder", ns)
    await wait_gone(process_kube, PODS, "holder", ns, timeout=30)
    done = await wait_for(
        process_kube, PODS, "follower", ns, phase_is("Failed"), timeout=30, what="the end seen"
    )
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert "ended" in process_plane.container_log(ns, "follower", "main")


async def test_a_plain_claim_is_bound_keeps_its_data_and_goes_with_its_claim(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    """A PersistentVolumeClaim without a class is bound at once (the plane's default
    StorageClass ``standard`` has a provisioner, as on KinD), so a pod mounting it is
    scheduled; what one pod writes the next one reads; deleting the claim deletes its volume."""
    ns = process_namespace
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await process_kube.create(PVCS, claim, ns)
    bound = await wait_for(
        process_kube, PVCS, "data", ns, lambda c: c.get("status", {}).get("phase") == "Bound"
    )
    assert bound["spec"]["storageClassName"] == "standard"
    volume_name = bound["spec"]["volumeName"]
    volume = await process_kube.get(PVS, volume_name)
    assert volume["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    mount = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    write = "open('/data/kept', 'w').write('hello')"
    await run_to_completion(
        process_kube, process_plane, ns, "writer", write, container=mount, volumes=volumes
    )
    read = "print(open('/data/kept').read())"
    out = await run_to_completion(
        process_kube, process_plane, ns, "reader", read, container=mount, volumes=volumes
    )
    assert out.strip().splitlines()[-1] == "hello"
    for pod in ("writer", "reader"):
        await process_kube.delete(PODS, pod, ns)
        await wait_gone(process_kube, PODS, pod, ns, timeout=30)
    await process_kube.delete(PVCS, "data", ns)
    await wait_gone(process_kube, PVS, volume_name, None, timeout=60)


async def test_apiserver_service_proxy_reaches_a_pod(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns = process_namespace
    probe = {"httpGet": {"port": 8080}, "periodSeconds": 1}
    port = {"name": "dashboard", "port": 8265, "targetPort": 8080}
    await serve_behind_service(process_kube, ns, "dash", "dash", probe, port)
    path = f"/api/v1/namespaces/{ns}/services/dash:dashboard/proxy/"
    deadline = time.monotonic() + 30
    while True:
        try:
            text = await asyncio.to_thread(process_plane.api, "GET", path)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    assert "Directory listing" in str(text)


async def _ip_output(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "ip", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    return out.decode()


def _marker_alive(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
async def test_teardown_and_agent_crash_leave_nothing_behind(tmp_path: Path) -> None:
    plane = Plane(PlaneConfig(directory=tmp_path / "plane", runtime="process", log=lambda _m: None))
    await asyncio.to_thread(plane.start)
    try:
        net = plane.network
        assert net is not None
        marker = f"marker-{os.getpid()}-{time.monotonic_ns()}"
        script = f"import time; time.sleep(600)  # {marker}"
        for name in ("one", "two"):
            body = pod_manifest(name, [{"name": "main", "command": [PY, "-c", script]}])
            body["metadata"]["namespace"] = "default"
            await asyncio.to_thread(plane.api, "POST", "/api/v1/namespaces/default/pods", body)
        deadline = time.monotonic() + 60
        while len(_marker_alive(marker)) < 2:
            assert time.monotonic() < deadline, plane.log_tail("node-agent")
            await asyncio.sleep(0.2)
        assert f"krv{net.id}" in await _ip_output("-o", "link")  # the pods' veths
        # An agent that dies takes every pod process with it.
        agent = plane.procs["node-agent"]
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        deadline = time.monotonic() + 10
        while _marker_alive(marker):
            assert time.monotonic() < deadline, "pod processes outlived the agent"
            await asyncio.sleep(0.1)
    finally:
        await asyncio.to_thread(plane.stop)
    assert leftovers(net) == []
    assert net.id not in await _ip_output("netns", "list")
    links = await _ip_output("-o", "link")
    assert net.bridge not in links
    assert f"krv{net.id}" not in links


@pytest.mark.slow
async def test_ray_head_dashboard_answers(
    process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    pytest.importorskip("ray")
    ns = process_namespace
    command = (
        "ulimit -n 65536; ray start --head --block --dashboard-host=0.0.0.0 --num-cpus=1 "
        "--memory=2000000000 --object-store-memory=100000000 --metrics-export-port=8080"
    )
    wget = " && ".join(
        f"wget --tries 1 -T 2 -q -O- http://localhost:{port}/{path} | grep success"
        for port, path in ((52365, "api/local_raylet_healthz"), (8265, "api/gcs_healthz"))
    )
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.59.0",
        "command": ["/bin/bash", "-lc", "--"],
        "args": [command],
        "ports": [{"containerPort": 8265, "name": "dashboard"}, {"containerPort": 6379}],
        # KubeRay's probes: exec + wget for older Ray, httpGet on the agent for newer.
        "readinessProbe": {
            "exec": {"command": ["bash", "-c", wget]},
            "periodSeconds": 2,
            "timeoutSeconds": 5,
            "failureThreshold": 60,
        },
        "livenessProbe": {
            "httpGet": {"path": "/api/healthz", "port": 52365},
            "initialDelaySeconds": 30,
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 120,
        },
        "volumeMounts": [
            {"name": "shared-mem", "mountPath": "/dev/shm"},
            {"name": "ray-logs", "mountPath": "/tmp/ray"},
        ],
    }
    body = pod_manifest(
        "ray-head",
        [container],
        volumes=[
            {"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
            {"name": "ray-logs", "emptyDir": {}},
        ],
    )
    await process_kube.create(PODS, body, ns)
    pod = await wait_for(process_kube, PODS, "ray-head", ns, phase_is("Running"), timeout=60)
    url = f"http://{pod['status']['podIP']}:8265/api/version"
    deadline = time.monotonic() + 120
    while True:
        try:
            version = json.loads(await asyncio.to_thread(http_get, url, 3.0))
            break
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                log = process_plane.container_log(ns, "ray-head", "ray-head")
                raise AssertionError(
                    f"dashboard did not answer at {url}; log:\n{log[-3000:]}"
                ) from None
            await asyncio.sleep(1)
    assert version["ray_version"] == "2.59.0"
    await wait_for(process_kube, PODS, "ray-head", ns, is_ready, timeout=60, what="Ready")
