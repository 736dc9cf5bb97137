"""Runs upstream KubeRay's own Go end-to-end suites (ray-operator v1.6.1 ``test/*``) against this
operator on a process-runtime plane, and writes a Markdown report of what passed, failed or was
not runnable here.

Why: the upstream suites are the behaviour contract the Go operator is held to; running them
unchanged against the Python operator finds divergences no hand-written test anticipates.

Flow (``run``): build or reuse the suites' test binaries (``binaries``' ``upstream-e2e``
component, ``go test -c``), start a ``runtime="process"`` plane, install our CRDs and the
Gateway API CRDs, start our operator with the feature gates upstream's CI enables
(``config/overlays/test-overrides``), then run each chosen suite's binary under
``go tool test2json`` with the environment ``test/support`` reads (``KUBECONFIG``,
``KUBERAY_TEST_OUTPUT_DIR``, ``KUBERAY_TEST_TIMEOUT_*``, ``KUBERAY_TEST_RAY_IMAGE``) and parse the
events into one result per top-level test.

Invariants and failure modes:
- Tests listed in ``NOT_RUNNABLE`` are never started; they are reported as "not runnable" with
  the reason, so the report always accounts for every top-level test.
- Each top-level test runs in its own test-binary process (``-test.run=^Name$``): a panic or a
  ``-test.timeout`` ends that test only, and is reported as its failure.
- Each binary runs in its package's directory in the Go module cache (``testdata/`` is read
  relative to it), but ``sampleyaml`` at the module cache root: built with ``-trimpath``, it finds
  upstream's ``config/samples`` through the module-relative path it records.
- The plane and operator are always stopped (also on SIGTERM), and the operator's log and the
  plane's logs stay in the output directory.
- Exit status (``main``): 0 only when no test failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries
from kuberay.devenv.gatewayapi import install_gateway_api
from kuberay.devenv.github_standin import GitHubStandIn
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, PlaneConfig, running_plane
from kuberay.runtime.client import KubeClient, load_kubeconfig

SUITES = binaries.UPSTREAM_E2E_SUITES
MODULE = "github.com/ray-project/kuberay/ray-operator"
# What upstream's CI turns on for its e2e runs (config/overlays/test-overrides, v1.6.1).
FEATURE_GATES = (
    "RayClusterStatusConditions=true,RayJobDeletionPolicy=true,RayMultiHostIndexing=true,"
    "RayCronJob=true,RayServiceIncrementalUpgrade=true"
)
# test/support's Gomega timeouts; upstream's (1m/2m/5m) assume a cluster with more than two
# shared cores, where a Ray head starts in seconds rather than tens of seconds.
DEFAULT_TIMEOUTS = {
    "KUBERAY_TEST_TIMEOUT_SHORT": "3m",
    "KUBERAY_TEST_TIMEOUT_MEDIUM": "5m",
    "KUBERAY_TEST_TIMEOUT_LONG": "10m",
}
RAY_IMAGE = "rayproject/ray:2.52.0"  # test/support's default image, mapped to the local Ray

# "suite/TestName" -> why it cannot run on this machine (never started, reported as such);
# "suite/TestName/subtest": that subtest is skipped (-test.skip), the rest of the test runs.
_ISTIO = (
    "needs a Gateway API implementation (the test creates a Gateway of class `istio` and waits "
    "for it to be Programmed with an address); none runs on this plane"
)
NOT_RUNNABLE: dict[str, str] = {
    "e2eincrementalupgrade/TestRayServiceIncrementalUpgrade": _ISTIO,
    "e2eincrementalupgrade/TestRayServiceIncrementalUpgradeWithLocust": _ISTIO,
    "e2eincrementalupgrade/TestRayServiceIncrementalUpgradeRollback": _ISTIO,
    "e2erayservice/TestOldHeadPodFailDuringUpgrade": (
        "adds ephemeral containers (image istio/iptables) to the head pod to drop traffic with "
        "iptables; the process runtime runs no ephemeral containers"
    ),
    "e2erayjobsubmitter/TestRayJobSubmitter": (
        "runs `/submitter` from the kuberay/submitter image's file system; the process runtime "
        "has no image file systems (it maps images to Python environments)"
    ),
    "e2erayjob/TestRayJobSidecarMode/Successful_RayJob_in_Sidecar_mode_with_auth_token": (
        "a race upstream has too (ray-project/kuberay#4945): it waits for the RayCluster to be "
        "Ready, which a SidecarMode cluster never is once its submitter has ended (the head pod "
        "is then not Ready), and counter.py ends about 15 s after the head starts, before a "
        "worker on two shared cores is Ready; the cluster is then deleted "
        "(shutdownAfterJobFinishes)"
    ),
    "sampleyaml/TestRayCluster/ray-cluster.fluentbit.yaml": (
        "a fluent/fluent-bit sidecar; no fluent-bit on this machine"
    ),
}


@dataclass
class TestResult:
    suite: str
    name: str
    status: str  # "pass", "fail", "skip" (t.Skip), "not runnable", "not run" (not reached)
    seconds: float = 0.0
    cause: str = ""
    output: list[str] = field(default_factory=list)


@dataclass
class SuiteResult:
    suite: str
    seconds: float = 0.0
    exit_code: int | None = None
    tests: list[TestResult] = field(default_factory=list)


# ---------------------------------------------------------------------- go test -json parsing
_ERROR_LINE = re.compile(r"^\s*(Error:|Timed out|Expected|panic:|--- FAIL)")


def failure_cause(output: Iterable[str], limit: int = 400) -> str:
    """A short why from a failed test's output: the first assertion message, else its last line.

    testify prints ``Error Trace:``/``Error:`` blocks and Gomega ``Timed out after ...`` /
    ``Expected`` lines; the first such line plus what directly follows is the cause a reader
    needs, the rest (object dumps) is in the run log.
    """
    lines = [line.rstrip() for line in output if line.strip()]
    lines = [line for line in lines if not line.lstrip().startswith(("=== ", "--- PASS"))]
    for i, line in enumerate(lines):
        if _ERROR_LINE.match(line):
            text = " ".join(part.strip() for part in lines[i : i + 4])
            return _clip(text, limit)
    return _clip(lines[-1].strip(), limit) if lines else ""


def skip_cause(output: Iterable[str]) -> str:
    lines = [line.strip() for line in output if line.strip()]
    lines = [line for line in lines if not line.startswith(("=== ", "--- "))]
    return _clip(lines[-1], 300) if lines else ""


def _clip(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_events(suite: str, events: Iterable[dict[str, Any]]) -> SuiteResult:
    """One result per top-level test from ``test2json`` events (subtests fold into their parent:
    a failed subtest's name leads the parent's cause)."""
    result = SuiteResult(suite)
    tests: dict[str, TestResult] = {}
    output: dict[str, list[str]] = {}
    failed_subtests: dict[str, list[str]] = {}
    for ev in events:
        name = ev.get("Test")
        action = ev.get("Action")
        if not name:
            if action in ("pass", "fail") and "Elapsed" in ev:
                result.seconds = float(ev["Elapsed"])
            continue
        top = name.split("/", 1)[0]
        if action == "output":
            output.setdefault(top, []).append(str(ev.get("Output", "")))
        elif action == "run" and name == top:
            tests[top] = TestResult(suite, top, "running")
        elif action in ("pass", "fail", "skip"):
            if name != top:
                if action == "fail":
                    failed_subtests.setdefault(top, []).append(name.split("/", 1)[1])
                continue
            test = tests.setdefault(top, TestResult(suite, top, action))
            test.status = action
            test.seconds = float(ev.get("Elapsed", 0.0))
    for top, test in tests.items():
        test.output = output.get(top, [])
        if test.status == "running":
            test.status = "fail"
            test.cause = "did not finish: the suite binary exited (timeout or panic) first; " + (
                failure_cause(test.output)
            )
        elif test.status == "fail":
            cause = failure_cause(test.output)
            subs = failed_subtests.get(top)
            test.cause = (f"subtests {', '.join(subs)}: " if subs else "") + cause
        elif test.status == "skip":
            test.cause = skip_cause(test.output)
    result.tests = list(tests.values())
    return result


def read_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


# ---------------------------------------------------------------------- running
def list_tests(binary: Path) -> list[str]:
    proc = subprocess.run(
        [str(binary), "-test.list", ".*"], capture_output=True, text=True, check=True
    )
    return [line for line in proc.stdout.split() if line.startswith(("Test", "Example"))]


def run_suite(
    suite: str,
    binary: Path,
    go: str,
    env: dict[str, str],
    out_dir: Path,
    run: str | None = None,
    timeout: str = "30m",
) -> SuiteResult:
    """Runs each top-level test of one suite binary in its own process under test2json.

    One process per test: several upstream tests end in ``panic`` when a subtest calls FailNow
    on its parent, which would otherwise take every later test of the suite down with it.
    ``out_dir/<suite>.json`` keeps the raw events of all of them.
    """
    # "Top/sub": Top selects the top-level tests, sub is handed to -test.run for their subtests.
    top, _, sub = (run or "").partition("/")
    wanted = re.compile(top) if top else None
    names = [n for n in list_tests(binary) if wanted is None or wanted.search(n)]
    result = SuiteResult(suite, exit_code=0)
    raw = out_dir / f"{suite}.json"
    raw.write_text("")
    cwd = _suite_dir(go, suite)
    for name in names:
        reason = NOT_RUNNABLE.get(f"{suite}/{name}")
        if reason is not None:
            result.tests.append(TestResult(suite, name, "not runnable", cause=reason))
            continue
        # Again before each test: a plane that created one for a mount point removes it on stop.
        for directory in IMAGE_DIRS:
            Path(directory).mkdir(parents=True, exist_ok=True)
        argv = [go, "tool", "test2json", "-t", "-p", suite, str(binary), "-test.v=test2json"]
        argv += [
            f"-test.timeout={timeout}",
            "-test.count=1",
            f"-test.run=^{re.escape(name)}$" + (f"/{sub}" if sub else ""),
        ]
        subs = _not_runnable_subtests(suite, name)
        if subs:
            pattern = "|".join(re.escape(sub) for sub in subs)
            argv.append(f"-test.skip=^{re.escape(name)}$/^({pattern})$")
        lines: list[str] = []
        start = time.monotonic()
        with raw.open("a") as sink:
            # Its own process group: an interrupted run ends go, test2json and the test binary.
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    sink.write(line)
                    sink.flush()
                    lines.append(line)
                    _progress(suite, line)
                code = proc.wait()
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        seconds = time.monotonic() - start
        result.seconds += seconds
        tests = parse_events(suite, read_events(lines)).tests
        if not tests:
            tail = failure_cause(lines[-20:])
            tests = [TestResult(suite, name, "fail", seconds, f"exit {code} before it ran: {tail}")]
        if code != 0:
            result.exit_code = code
        for test in tests:
            # Wall time: Go's Elapsed of a test whose subtests run in parallel leaves them out.
            test.seconds = max(test.seconds, seconds)
            if subs:
                left_out = "; ".join(f"{sub}: {why}" for sub, why in subs.items())
                test.cause = f"{test.cause} (subtests not runnable here: {left_out})".lstrip()
        result.tests.extend(tests)
    return result


def _not_runnable_subtests(suite: str, test: str) -> dict[str, str]:
    """``NOT_RUNNABLE`` entries ``suite/Test/subtest`` of one test: subtest name -> reason (Go
    writes a subtest's spaces as underscores in its name)."""
    prefix = f"{suite}/{test}/"
    return {key[len(prefix) :]: why for key, why in NOT_RUNNABLE.items() if key.startswith(prefix)}


def _progress(suite: str, line: str) -> None:
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        return
    test = ev.get("Test", "")
    if ev.get("Action") in ("pass", "fail", "skip") and test and "/" not in test:
        print(f"[{suite}] {ev['Action'].upper()} {test} ({ev.get('Elapsed', 0)}s)", flush=True)


def _suite_dir(go: str, suite: str) -> str:
    """The working directory of a suite's binary: its package directory, as ``go test`` does
    (tests read ``testdata/`` relative to it), except ``sampleyaml``, which finds
    ``config/samples`` from its own source path; built with ``-trimpath`` that path is
    module-relative (``github.com/...@v1.6.1/test/sampleyaml``), so it runs from the module
    cache root."""
    out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True)
    cache = out.stdout.strip()
    if suite == "sampleyaml":
        return cache
    return str(Path(cache, f"{MODULE}@{binaries.GO_OPERATOR_VERSION}", "test", suite))


def pod_python_env(directory: Path) -> Path:
    """A Python environment for the suites' Ray pods that sees this one's packages (Ray) but
    installs into itself: several tests ``pip install`` inside the head pod, and the process
    runtime has no image layers, so without this they would write into the project's venv.

    A bare venv of the same base interpreter, a ``.pth`` naming this environment's
    site-packages (after its own, so what a test installs wins), and this environment's console
    scripts (``ray``, ``serve``, ``pip``) re-pointed at the new interpreter, and what the
    image has that this environment lacks (``IMAGE_PACKAGES``, installed from the registry).
    """
    python = directory / "bin" / "python"
    if not python.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(directory)],
            check=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    base = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]
    (Path(own) / "_kuberay_base_env.pth").write_text("\n".join(base) + "\n")
    host_bin = Path(sys.prefix) / "bin"
    for script in host_bin.iterdir():
        target = directory / "bin" / script.name
        if target.exists() or not script.is_file():
            continue
        try:
            text = script.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        first, _, rest = text.partition("\n")
        if first.startswith("#!/") and Path(first[2:].strip()).parent.resolve() == (
            host_bin.resolve()
        ):
            target.write_text(f"#!{python}\n{rest}")
            target.chmod(0o755)
    missing = [
        req
        for module, req in IMAGE_PACKAGES.items()
        if subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode
    ]
    if missing:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *missing], check=True)
    return directory


# Packages the rayproject/ray image carries that the suites' pods use and this project's
# environment may lack: module -> requirement (test/support's locust_runner.py imports tqdm).
IMAGE_PACKAGES = {"tqdm": "tqdm==4.70.1"}


# Seconds a Ray node drains on SIGTERM before its clean shutdown (see image_map).
DRAIN_SECONDS = "15"
RAY_HOME = "/home/ray"  # the rayproject/ray images' HOME and working directory
# Directories the suites' images have that their pods rely on, made on the host: /home/ray, and
# the redis image's /data (the samples' redis.conf says `dir /data`).
IMAGE_DIRS = (RAY_HOME, "/data")


def image_map(path: Path, python_env: Path, ray_env: dict[str, str] | None = None) -> Path:
    """Every ``rayproject/ray`` image is ``python_env`` (this Ray) in ``/home/ray``, as in the
    image: tests run files by relative path (``python samples/x.py``) from there. ``redis`` runs
    the host's ``redis-server`` (the GCS fault-tolerance tests' external Redis).

    ``/home/ray`` is created on the host (the process runtime's containers share its file
    system), and again before each test since any plane that created it as a mount point's
    parent removes it when it stops. ``ray_env``: variables of the Ray image (the GitHub
    stand-in's CA bundle).
    """
    for directory in IMAGE_DIRS:
        Path(directory).mkdir(parents=True, exist_ok=True)
    data = {
        "rayproject/ray": {
            "python_env": str(python_env),
            "working_dir": RAY_HOME,
            "home": RAY_HOME,
            # Newer Ray than the suites' 2.52 drains a node on SIGTERM for up to 30 s by
            # default, the pod's whole grace period: the SIGKILL then cuts connections that a
            # clean shutdown closes (a deleted head's `ray job logs --follow` fails and its
            # submitter retries instead of ending). A shorter drain still lets Serve quiesce
            # its proxies (zero-downtime upgrades) and always ends in a clean shutdown.
            "env": {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": DRAIN_SECONDS, **(ray_env or {})},
        },
        # The image's entrypoint script turns protected mode off (without a password Redis
        # would refuse every client that is not on loopback). Its working directory (where Redis
        # saves and reloads dump.rdb) is the container's own /tmp: on the host's / every Redis
        # would load the keys the previous one saved, as a fresh image's /data never does.
        "redis:": {
            "entrypoint": ["redis-server", "--protected-mode", "no"],
            "working_dir": "/tmp",
        },
    }
    path.write_text(json.dumps(data, indent=2))
    return path


async def _install(kubeconfig: Path, timeout: float = 300.0) -> None:
    """Our CRDs and the Gateway API's, each waited on until Established; generous, since on a
    busy two-core machine the apiserver can take minutes to serve a new CRD."""
    async with KubeClient(load_kubeconfig(kubeconfig), user_agent="upstream-e2e") as kube:
        await install_crds(kube, timeout=timeout)
        await install_gateway_api(kube, timeout=timeout)


def run(
    suites: Sequence[str],
    out_dir: Path,
    run_filter: str | None = None,
    log: Any = print,
    results: list[SuiteResult] | None = None,
) -> list[SuiteResult]:
    """Runs ``suites``; each finished suite is appended to ``results`` as soon as it ends, so an
    interrupted caller still has them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tests_bin = binaries.ensure([f"{s}.test" for s in suites], log=log)
    kubectl = binaries.ensure(["kubectl"], log=log)["kubectl"]
    go = binaries._find_go([f"{s}.test" for s in suites])
    python_env = pod_python_env(out_dir / "pod-python")
    # The bundle inside the pods' Python environment: pods see it (their /tmp is private).
    github = GitHubStandIn(out_dir / "github-pki", python_env / "github-stand-in-ca.pem")
    github.start()
    config = PlaneConfig(
        directory=out_dir / "plane",
        runtime="process",
        egress_dns=(github.resolver.address,),
        image_map=image_map(out_dir / "images.json", python_env, github.pod_env),
        log=log,
    )
    results = [] if results is None else results
    try:
        with running_plane(config) as plane:
            github.serve(plane.pod_gateway)
            log(f"github.com stand-in at https://{plane.pod_gateway}:{github.port}")
            _run_suites(
                plane,
                suites,
                {**tests_bin, "kubectl": kubectl},
                go,
                out_dir,
                run_filter,
                log,
                results,
            )
    finally:
        github.stop()
        (out_dir / "github-requests.log").write_text("\n".join(github.requests) + "\n")
    return results


def _run_suites(
    plane: Plane,
    suites: Sequence[str],
    binaries_of: dict[str, Path],
    go: str,
    out_dir: Path,
    run_filter: str | None,
    log: Any,
    results: list[SuiteResult],
) -> None:
    """Installs the CRDs, starts our operator and runs ``suites`` on a running ``plane``."""
    asyncio.run(_install(plane.kubeconfig))
    # On the host, cluster DNS names do not resolve: the operator reaches dashboards through
    # the apiserver's service proxy (as in tests/e2e).
    operator = OperatorProcess(
        plane, out_dir, f"--feature-gates={FEATURE_GATES}", "--use-kubernetes-proxy"
    )
    operator.start()
    try:
        artifacts = out_dir / "artifacts"
        artifacts.mkdir(exist_ok=True)
        env = dict(os.environ)
        for key, value in DEFAULT_TIMEOUTS.items():
            env.setdefault(key, value)
        env.setdefault("KUBERAY_TEST_RAY_IMAGE", RAY_IMAGE)
        env.update(
            KUBECONFIG=str(plane.kubeconfig),
            KUBERAY_TEST_OUTPUT_DIR=str(artifacts),
            PATH=f"{binaries_of['kubectl'].parent}:{env.get('PATH', '')}",
        )
        for suite in suites:
            log(f"== upstream suite {suite}")
            results.append(
                run_suite(suite, binaries_of[f"{suite}.test"], go, env, out_dir, run_filter)
            )
            if operator.proc is not None and operator.proc.poll() is not None:
                log(f"operator exited ({operator.proc.returncode}); restarting it")
                operator.start()
    finally:
        operator.stop()


# ---------------------------------------------------------------------- report
def counts(results: Iterable[SuiteResult]) -> dict[str, int]:
    out = {"pass": 0, "fail": 0, "skip": 0, "not runnable": 0, "not run": 0}
    for suite in results:
        for test in suite.tests:
            out[test.status] = out.get(test.status, 0) + 1
    return out


def markdown(results: Sequence[SuiteResult], title: str = "Upstream e2e run") -> str:
    total = counts(results)
    n = sum(total.values())
    lines = [
        f"# {title}",
        "",
        f"{n} top-level tests: {total['pass']} passed, {total['fail']} failed, "
        f"{total['skip']} skipped by the test itself, {total['not runnable']} not runnable here"
        + (f", {total['not run']} not run." if total["not run"] else "."),
        "",
        "| suite | tests | passed | failed | skipped | not runnable | not run | minutes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for suite in results:
        c = counts([suite])
        lines.append(
            f"| {suite.suite} | {len(suite.tests)} | {c['pass']} | {c['fail']} | {c['skip']} | "
            f"{c['not runnable']} | {c['not run']} | {suite.seconds / 60:.1f} |"
        )
    lines += ["", "| suite | test | result | seconds | cause |", "| --- | --- | --- | --- | --- |"]
    for suite in results:
        for test in sorted(suite.tests, key=lambda t: t.name):
            cause = test.cause.replace("|", "\\|")
            lines.append(
                f"| {suite.suite} | {test.name} | {test.status} | {test.seconds:.0f} | {cause} |"
            )
    return "\n".join(lines) + "\n"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def results_json(results: Sequence[SuiteResult]) -> list[dict[str, Any]]:
    """Machine-readable results (``results.json``): what a caller such as the CI slice asserts."""
    return [
        {
            "suite": suite.suite,
            "seconds": round(suite.seconds, 1),
            "exit_code": suite.exit_code,
            "tests": [
                {"name": t.name, "status": t.status, "seconds": t.seconds, "cause": t.cause}
                for t in suite.tests
            ],
        }
        for suite in results
    ]


def load_results(path: Path) -> list[SuiteResult]:
    """The inverse of ``results_json`` (to merge the reports of several runs into one)."""
    return [
        SuiteResult(
            suite["suite"],
            float(suite["seconds"]),
            suite["exit_code"],
            [
                TestResult(suite["suite"], t["name"], t["status"], float(t["seconds"]), t["cause"])
                for t in suite["tests"]
            ],
        )
        for suite in json.loads(path.read_text())
    ]


def complete(results: Sequence[SuiteResult]) -> list[SuiteResult]:
    """Every suite and top-level test, in suite order: those no run reached are "not run" (the
    test lists come from the built binaries, ``-test.list``). A test in several runs keeps the
    result of the last one (a rerun after a fix); a suite's minutes are the sum of its tests'."""
    paths = binaries.ensure([f"{s}.test" for s in SUITES])
    latest: dict[tuple[str, str], TestResult] = {}
    for res in results:
        for test in res.tests:
            latest[(res.suite, test.name)] = test
    by_suite: dict[str, SuiteResult] = {}
    for (suite, _), test in latest.items():
        into = by_suite.setdefault(suite, SuiteResult(suite, exit_code=0))
        into.seconds += test.seconds
        into.tests.append(test)
    out = []
    for suite in SUITES:
        res = by_suite.get(suite, SuiteResult(suite))
        seen = {t.name for t in res.tests}
        for name in list_tests(paths[f"{suite}.test"]):
            if name in seen:
                continue
            reason = NOT_RUNNABLE.get(f"{suite}/{name}")
            if reason is not None:
                res.tests.append(TestResult(suite, name, "not runnable", cause=reason))
            else:
                res.tests.append(TestResult(suite, name, "not run", cause="not reached by the run"))
        out.append(res)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="upstream-e2e", description="Run upstream KubeRay e2e suites against this operator."
    )
    parser.add_argument("suites", nargs="*", help=f"default: all of {', '.join(SUITES)}")
    parser.add_argument(
        "--run",
        help="regular expression for the top-level tests; after a slash, one for their subtests",
    )
    parser.add_argument("--out", type=Path, help="output directory (default: a new temp dir)")
    parser.add_argument("--build-only", action="store_true", help="build the test binaries")
    parser.add_argument(
        "--report-from",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="print one report merged from earlier runs' results.json (runs nothing)",
    )
    args = parser.parse_args(argv)
    if args.report_from:
        merged = [s for d in args.report_from for s in load_results(d / "results.json")]
        print(markdown(complete(merged)), end="")
        return 0
    suites = list(args.suites) or list(SUITES)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITES)}")
    logger = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    # SIGTERM unwinds like Ctrl-C so that the plane's bridge and the pods are cleaned up.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if args.build_only:
        for name, path in binaries.ensure([f"{s}.test" for s in suites], log=logger).items():
            print(f"{name}\t{path}")
        return 0
    out = args.out or Path(
        os.environ.get("TMPDIR", "/tmp"), f"upstream-e2e-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    results: list[SuiteResult] = []
    interrupted = False
    try:
        run(suites, out.resolve(), args.run, log=logger, results=results)
    except KeyboardInterrupt:
        interrupted = True  # report the suites that finished, then fail
    report = out / "report.md"
    report.write_text(markdown(results))
    (out / "results.json").write_text(json.dumps(results_json(results), indent=2))
    total = counts(results)
    print(report.read_text())
    print(f"report: {report}")
    print(f"upstream-e2e: {total['pass']} passed, {total['fail']} failed")
    return 1 if total["fail"] or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
