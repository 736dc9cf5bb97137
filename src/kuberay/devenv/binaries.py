"""Find or build the control-plane binaries: apiserver, controller-manager, scheduler, etcd, kwok.

Also, on demand only, the upstream Go KubeRay operator (``ray-operator``), so that tests can run it
side by side with ours against the same plane and compare what the two do, and upstream's own
e2e test packages of the same version as test binaries (``<suite>.test``, ``go test -c``; run by
``kuberay.devenv.upstream_e2e``), which share its module and build caches.

Nothing on this machine ships a kube-apiserver, so the binaries are compiled from the wrapper Go
modules under ``controlplane/`` in the repository and cached outside the work tree, keyed by
version, so that a new checkout (and CI) reuses them.

Invariants and failure modes:
- A binary is only ever visible at its cache path once it is complete: the build writes into a
  temporary directory and renames each file into place, so an interrupted build is rebuilt rather
  than used half-written.
- ``KUBERAY_CONTROLPLANE_BINDIR`` (or envtest's ``KUBEBUILDER_ASSETS``) points at binaries the
  user already has; any binary found there wins and nothing is built for it.
- Without Go the error names the exact Go version and the alternative (the environment variable),
  instead of a bare ``FileNotFoundError``.
- A cold build takes many minutes on two cores; progress (packages compiled out of the total) is
  printed so that it is never a silent wait.
- On-demand components (the Go operator) are never part of the default set: ``ensure()`` with no
  arguments, ``kuberay dev build`` and the plane only need ``ALL_BINARIES``, so a plane never
  waits for, or fails on, a build it does not use. ``go_operator_binary()`` builds it when asked.
- One process builds a component at a time (a lock file beside its cache directory); another
  that needs it meanwhile (a second terminal, a test) waits and then uses that build.
- A component may carry patches (unified diffs in its wrapper module's ``patches/``) for bugs in
  the pinned release that the dev plane trips over. They are applied to a copy of that module
  which a copy of the wrapper module ``replace``s it with, never to the module cache; the cache
  directory's name carries their hash; a patch that no longer applies fails the build by name
  rather than being skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
GO_OPERATOR_VERSION = "v1.6.1"  # github.com/ray-project/kuberay/ray-operator, the reference
GO_OPERATOR_BINARY = "ray-operator"
# ray-operator/test/<suite> packages of that version built as test binaries "<suite>.test".
UPSTREAM_E2E_SUITES = (
    "e2e",
    "e2erayjob",
    "e2erayservice",
    "e2eautoscaler",
    "e2eraycronjob",
    "e2erayjobsubmitter",
    "e2eincrementalupgrade",
    "sampleyaml",
)
# github.com/prometheus/prometheus: Go module v0.3MM.P is Prometheus 3.MM.P.
PROMETHEUS_VERSION = "v0.316.0"
CERT_MANAGER_VERSION = "v1.21.2"  # github.com/cert-manager/cert-manager, for RayClusterMTLS
CERT_MANAGER_BINARY = "cert-manager-controller"
KUEUE_VERSION = "v0.17.0"  # sigs.k8s.io/kueue, its manager beside the plane (tests/integration)
HELM_VERSION = "v3.22.0"  # helm.sh/helm/v3, renders and lints deploy/helm in the chart tests
# The Kubernetes release Helm assumes when no cluster is reachable (`helm template`,
# `.Capabilities.KubeVersion`): the minor of the client-go that Helm is built against, the way
# Helm's own Makefile derives it (client-go v0.37 -> Kubernetes 1.37).
HELM_KUBE_VERSION = ("1", "37")
MIN_GO = (1, 26)

BINDIR_ENV = "KUBERAY_CONTROLPLANE_BINDIR"
CACHE_ENV = "KUBERAY_CACHE_DIR"
SOURCE_ENV = "KUBERAY_CONTROLPLANE_SRC"


class BuildError(RuntimeError):
    """The binaries are neither present nor buildable; the message says what to do."""


@dataclass(frozen=True)
class Component:
    """One wrapper Go module and the binaries built from it."""

    name: str
    version: str
    module_dir: str
    packages: dict[str, str]  # binary name -> Go package path
    ldflags: tuple[str, ...] = field(default_factory=tuple)
    # Go build tags (`-tags`), e.g. to leave out code the dev plane never runs.
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Built only when one of its binaries is asked for by name; not in ALL_BINARIES.
    on_demand: bool = False
    # The packages are test packages, compiled with `go test -c` into test binaries.
    test_binaries: bool = False
    # Fixes to the pinned module's source, as unified diffs under ``<module_dir>/patches/``,
    # applied to a copy of it that the build uses instead (the module cache stays pristine).
    patches: tuple[str, ...] = field(default_factory=tuple)
    # The module those diffs' paths are relative to (its root in the module cache).
    patched_module: str = ""


def _kube_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    prefix = "k8s.io/component-base/version"
    return (
        f"-X {prefix}.gitVersion={version}",
        f"-X {prefix}.gitMajor={major}",
        f"-X {prefix}.gitMinor={minor}",
        f"-X {prefix}.gitTreeState=clean",
        f"-X {prefix}.buildDate=1970-01-01T00:00:00Z",
    )


def _prometheus_ldflags(module_version: str) -> tuple[str, ...]:
    minor, patch = module_version.lstrip("v").split(".")[1:3]
    release = f"3.{int(minor) - 300}.{patch}"
    return (f"-X github.com/prometheus/common/version.Version={release}",)


def _helm_ldflags(version: str, kube: tuple[str, str]) -> tuple[str, ...]:
    major, minor = kube
    return (
        f"-X helm.sh/helm/v3/internal/version.version={version}",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
        *(
            f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
            for pkg in ("chartutil", "lint/rules")
            for part, value in (("Major", major), ("Minor", minor))
        ),
    )


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="kubernetes",
        version=KUBERNETES_VERSION,
        module_dir="kubernetes",
        packages={
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        },
        ldflags=_kube_ldflags(KUBERNETES_VERSION),
    ),
    Component(
        name="etcd",
        version=ETCD_VERSION,
        module_dir="etcd",
        packages={"etcd": "go.etcd.io/etcd/server/v3"},
    ),
    Component(
        name="kwok",
        version=KWOK_VERSION,
        module_dir="kwok",
        packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        # v0.8.0 plays a pod's stage job even after a newer event replaced it (Cancel cannot
        # take a due job out of its FIFO); the stale job then patches from an old copy of the
        # pod. The race is real, but it is not what makes the scale benchmark's slow runs.
        patches=("0001-drop-replaced-pod-jobs.patch",),
        patched_module="sigs.k8s.io/kwok",
    ),
    Component(
        name="kuberay-operator",
        version=GO_OPERATOR_VERSION,
        module_dir="kuberay-operator",
        # main.go is at the module root; utils.KUBERAY_VERSION is a constant, no ldflags needed.
        packages={GO_OPERATOR_BINARY: "github.com/ray-project/kuberay/ray-operator"},
        on_demand=True,
    ),
    Component(
        name="upstream-e2e",
        version=GO_OPERATOR_VERSION,
        module_dir="upstream-e2e",
        # Upstream KubeRay's own end-to-end suites (test binaries), run against our operator by
        # kuberay.devenv.upstream_e2e. Same module version as the Go operator, same caches.
        packages={
            f"{suite}.test": f"github.com/ray-project/kuberay/ray-operator/test/{suite}"
            for suite in UPSTREAM_E2E_SUITES
        },
        on_demand=True,
        test_binaries=True,
    ),
    Component(
        name="prometheus",
        version=PROMETHEUS_VERSION,
        module_dir="prometheus",
        packages={
            "prometheus": "github.com/prometheus/prometheus/cmd/prometheus",
            "promtool": "github.com/prometheus/prometheus/cmd/promtool",
        },
        ldflags=_prometheus_ldflags(PROMETHEUS_VERSION),
        # Only Kubernetes service discovery (the scrape config in kuberay.devenv.prometheus uses
        # kubernetes_sd_configs). Prometheus's own build tags drop the cloud SDKs of the other
        # discovery plugins, the bulk of a cold compile.
        tags=("remove_all_sd", "enable_kubernetes_sd"),
        # Monitoring is opt-in (`kuberay dev up --with-prometheus`, the monitoring tests).
        on_demand=True,
    ),
    Component(
        name="helm",
        version=HELM_VERSION,
        module_dir="helm",
        packages={"helm": "helm.sh/helm/v3/cmd/helm"},
        ldflags=_helm_ldflags(HELM_VERSION, HELM_KUBE_VERSION),
        # Only the chart tests (and people installing the chart) need it.
        on_demand=True,
    ),
    Component(
        name="cert-manager",
        version=CERT_MANAGER_VERSION,
        module_dir="cert-manager",
        # The wrapper module's own main package (selfSigned and ca issuance; see its main.go).
        packages={CERT_MANAGER_BINARY: "kuberay.local/controlplane/cert-manager"},
        # Only the mTLS tests (RayClusterMTLS) run cert-manager.
        on_demand=True,
    ),
    Component(
        name="kueue",
        version=KUEUE_VERSION,
        module_dir="kueue",
        packages={"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
        ldflags=(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}",),
        # Only the Kueue integration tests (kuberay.devenv.kueue) run it.
        on_demand=True,
    ),
)

# The plane's binaries: what ``ensure()`` and ``kuberay dev build`` provide by default.
ALL_BINARIES: tuple[str, ...] = tuple(b for c in COMPONENTS if not c.on_demand for b in c.packages)
KNOWN_BINARIES: tuple[str, ...] = tuple(b for c in COMPONENTS for b in c.packages)


def cache_root() -> Path:
    base = os.environ.get(CACHE_ENV)
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kuberay"


def component_dir(component: Component) -> Path:
    """``<name>-<version>``, plus ``+<hash>`` of the patches for a patched build, so that a
    changed patch is rebuilt and an unpatched binary is never taken for a patched one."""
    key = f"{component.name}-{component.version}"
    if component.patches:
        key += f"+{patch_digest(component)}"
    return cache_root() / "controlplane" / key


def patch_digest(component: Component) -> str:
    """The first 12 hex digits of the SHA-256 over the component's patch files, in order."""
    digest = hashlib.sha256()
    for name in component.patches:
        digest.update(name.encode() + b"\0")
        digest.update(_patch_file(component, name).read_bytes())
    return digest.hexdigest()[:12]


def _patch_file(component: Component, name: str) -> Path:
    return source_root() / component.module_dir / "patches" / name


class PatchError(ValueError):
    """A patch does not apply to the file it names."""


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def apply_unified_diff(diff: str, read: Callable[[str], str]) -> dict[str, str]:
    """Apply a unified diff strictly: ``{path: new text}`` for every file it changes.

    ``read(path)`` gives a file's current text (paths as in the diff, with the ``a/``/``b/``
    prefix dropped). Line numbers in the hunk headers are not trusted; each hunk's old lines
    (context and removals) must occur exactly once after the previous hunk, so a patch written
    for another release fails loudly instead of landing in the wrong place.
    """
    out: dict[str, str] = {}
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"line {i + 1}: '--- ' not followed by '+++ '")
        path = lines[i + 1][4:].split("\t")[0].strip()
        path = path[2:] if path.startswith("b/") else path
        text = out[path] if path in out else read(path)
        ends_with_newline = text.endswith("\n")
        body = text.splitlines()
        cursor = 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            counts = _HUNK.match(lines[i])
            if counts is None:
                raise PatchError(f"line {i + 1}: malformed hunk header {lines[i]!r}")
            want_old = int(counts.group(1) or 1)
            want_new = int(counts.group(2) or 1)
            old: list[str] = []
            new: list[str] = []
            i += 1
            while len(old) < want_old or len(new) < want_new:
                if i >= len(lines):
                    raise PatchError(f"{path}: the diff ends inside a hunk")
                tag, rest = lines[i][:1], lines[i][1:]
                if tag in (" ", ""):
                    old.append(rest)
                    new.append(rest)
                elif tag == "-":
                    old.append(rest)
                elif tag == "+":
                    new.append(rest)
                elif tag != "\\":  # "\ No newline at end of file"
                    raise PatchError(f"line {i + 1}: unexpected {lines[i]!r} inside a hunk")
                i += 1
            hits = [
                k for k in range(cursor, len(body) - len(old) + 1) if body[k : k + len(old)] == old
            ]
            if len(hits) != 1:
                found = "not found" if not hits else f"found {len(hits)} times"
                raise PatchError(f"{path}: a hunk's old lines are {found}")
            at = hits[0]
            body[at : at + len(old)] = new
            cursor = at + len(new)
        out[path] = "\n".join(body) + ("\n" if ends_with_newline else "")
    if not out:
        raise PatchError("no file changes in the diff")
    return out


def source_root() -> Path:
    """The directory holding the wrapper Go modules (the repository's ``controlplane/``)."""
    env = os.environ.get(SOURCE_ENV)
    if env:
        return Path(env)
    # src/kuberay/devenv/binaries.py -> repository root is three levels above the package.
    return Path(__file__).resolve().parents[3] / "controlplane"


def _override_dirs() -> list[Path]:
    dirs = []
    for env in (BINDIR_ENV, "KUBEBUILDER_ASSETS"):
        value = os.environ.get(env)
        if value:
            dirs.append(Path(value))
    return dirs


def _component_of(binary: str) -> Component:
    for comp in COMPONENTS:
        if binary in comp.packages:
            return comp
    raise KeyError(f"unknown control-plane binary {binary!r}; known: {', '.join(KNOWN_BINARIES)}")


def locate(binary: str) -> Path | None:
    """Where ``binary`` already is (override directory first, then the cache), or None."""
    for d in _override_dirs():
        candidate = d / binary
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    cached = component_dir(_component_of(binary)) / binary
    return cached if cached.is_file() else None


def go_version(go: str) -> tuple[int, int]:
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True)
    text = out.stdout.strip().removeprefix("go")
    parts = text.split(".")
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)


def _find_go(binaries: Iterable[str] = ALL_BINARIES) -> str:
    go = shutil.which("go")
    need = f"Go {MIN_GO[0]}.{MIN_GO[1]} or newer"
    names = list(binaries)
    example = (
        " (for example envtest assets plus a kwok release)"
        if set(names) & set(ALL_BINARIES)
        else ""
    )
    hint = (
        f"Install {need} (https://go.dev/dl, or the `golang` package of your distribution) and "
        f"make sure `go` is on PATH, or set {BINDIR_ENV} to a directory that already holds "
        f"{', '.join(names)}{example}."
    )
    if go is None:
        raise BuildError(f"cannot build the local control plane: `go` is not on PATH. {hint}")
    try:
        have = go_version(go)
    except (subprocess.CalledProcessError, ValueError, IndexError) as exc:
        raise BuildError(f"cannot read the Go version from {go}: {exc}. {hint}") from exc
    if have < MIN_GO:
        raise BuildError(f"{go} is Go {have[0]}.{have[1]}; the build needs {need}. {hint}")
    return go


def _count_deps(go: str, module: Path, packages: Iterable[str], env: dict[str, str]) -> int:
    proc = subprocess.run(
        [go, "list", "-deps", *packages],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return 0
    return len([line for line in proc.stdout.splitlines() if line.strip()])


def _patched_module(
    go: str, module: Path, component: Component, staging: Path, env: dict[str, str]
) -> Path:
    """A copy of the wrapper module whose ``replace`` points at a patched copy of the pinned
    module; the build runs there. (`go build -overlay` refuses files in the module cache.)"""
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", component.patched_module],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
    )
    pristine = Path(proc.stdout.strip())
    if proc.returncode != 0 or not pristine.is_dir():
        raise BuildError(
            f"cannot find {component.patched_module} to patch it: {proc.stderr.strip()}"
        )
    patched: dict[str, str] = {}

    def current(rel: str) -> str:
        # A later patch sees the earlier ones' changes to the same file.
        return patched[rel] if rel in patched else (pristine / rel).read_text()

    for name in component.patches:
        diff = _patch_file(component, name).read_text()
        try:
            patched.update(apply_unified_diff(diff, current))
        except (PatchError, OSError) as exc:
            raise BuildError(f"patch {name} does not apply to {pristine}: {exc}") from exc
    # copyfile, not copy2: the module cache's files and directories are read-only.
    copy = staging / "patched"
    shutil.copytree(pristine, copy, copy_function=shutil.copyfile)
    for d, _, _ in os.walk(copy):
        os.chmod(d, 0o755)
    for rel, text in patched.items():
        (copy / rel).write_text(text)
    wrapper = staging / "wrapper"
    shutil.copytree(module, wrapper, ignore=shutil.ignore_patterns("patches"))
    edit = subprocess.run(
        [go, "mod", "edit", f"-replace={component.patched_module}={copy}"],
        cwd=wrapper,
        env=env,
        capture_output=True,
        text=True,
    )
    if edit.returncode != 0:
        raise BuildError(f"cannot point {wrapper} at the patched copy: {edit.stderr.strip()}")
    return wrapper


def build_component(component: Component, log: Callable[[str], None] = print) -> float:
    """Compile every binary of ``component`` into its cache directory; returns seconds taken."""
    go = _find_go(component.packages if component.on_demand else ALL_BINARIES)
    module = source_root() / component.module_dir
    if not (module / "go.mod").is_file():
        raise BuildError(
            f"wrapper Go module {module} is missing; set {SOURCE_ENV} to the repository's "
            f"controlplane/ directory or {BINDIR_ENV} to prebuilt binaries"
        )
    target = component_dir(component)
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f".build-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod -buildvcs=false")
    start = time.monotonic()
    packages = list(component.packages.values())
    log(f"[build] {component.name} {component.version}: resolving modules in {module} ...")
    total = _count_deps(go, module, packages, env)
    workdir = module
    if component.patches:
        try:
            workdir = _patched_module(go, module, component, staging, env)
        except BuildError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    ldflags = " ".join(("-s", "-w", *component.ldflags))
    log(f"[build] {component.name}: compiling {total or '?'} packages -> {target}")
    done = 0
    last_report = 0.0
    for binary, package in component.packages.items():
        # One `go build -o FILE` per binary: the compile cache is shared, so only linking repeats.
        # Test binaries: `go test -c` (no -v there: it would be the test's own verbosity flag,
        # so no per-package progress lines either).
        verb = ["test", "-c", "-vet=off"] if component.test_binaries else ["build", "-v"]
        tags = ["-tags", ",".join(component.tags)] if component.tags else []
        cmd = [go, *verb, "-trimpath", *tags, "-ldflags", ldflags, "-o", str(staging / binary)]
        # The context closes the pipe on every path (a warning otherwise, an error in tests).
        with subprocess.Popen(
            [*cmd, package],
            cwd=workdir,
            env=env,
            stderr=subprocess.STDOUT,
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            tail: list[str] = []
            for raw in proc.stdout:
                line = raw.rstrip()
                tail = [*tail[-30:], line]
                if line and not line.startswith(("go: ", "#")) and " " not in line:
                    done += 1
                now = time.monotonic()
                if now - last_report >= 10:
                    last_report = now
                    pct = f" ({min(100, 100 * done // total)}%)" if total else ""
                    log(
                        f"[build] {component.name}: {done}/{total or '?'} packages{pct}, "
                        f"{now - start:.0f}s elapsed"
                    )
        if proc.wait() != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise BuildError(
                f"go build of {binary} failed (exit {proc.returncode}); last output:\n"
                + "\n".join(tail)
            )
    for binary in component.packages:
        os.replace(staging / binary, target / binary)
    shutil.rmtree(staging, ignore_errors=True)
    seconds = time.monotonic() - start
    (target / "build.json").write_text(
        json.dumps(
            {
                "version": component.version,
                "patches": list(component.patches),
                "seconds": round(seconds, 1),
                "go": go,
            }
        )
    )
    log(f"[build] {component.name} {component.version} done in {seconds:.0f}s")
    return seconds


def ensure(
    binaries: Iterable[str] = ALL_BINARIES, log: Callable[[str], None] = print
) -> dict[str, Path]:
    """Paths of the requested binaries, building the components that are missing."""
    wanted = list(binaries)
    result: dict[str, Path] = {}
    missing: list[Component] = []
    for binary in wanted:
        path = locate(binary)
        if path is not None:
            result[binary] = path
            continue
        comp = _component_of(binary)
        if comp not in missing:
            missing.append(comp)
    for comp in missing:
        with _build_lock(comp):
            # Another process may have built it while this one waited for the lock.
            if not all((component_dir(comp) / b).is_file() for b in comp.packages):
                build_component(comp, log=log)
        for binary in comp.packages:
            if binary in wanted:
                result[binary] = component_dir(comp) / binary
    return result


@contextlib.contextmanager
def _build_lock(component: Component) -> Iterator[None]:
    """One builder per component at a time, across processes: a second caller waits for the
    first build and then uses its result instead of compiling the same packages again."""
    target = component_dir(component)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def go_operator_binary(log: Callable[[str], None] = print) -> Path:
    """The upstream Go operator (``ray-operator`` v1.6.1), found or built on demand.

    An executable ``ray-operator`` in ``KUBERAY_CONTROLPLANE_BINDIR`` wins, as for the plane's
    binaries; otherwise it comes from (or is built into) the versioned cache directory.
    """
    return ensure([GO_OPERATOR_BINARY], log=log)[GO_OPERATOR_BINARY]


def prometheus_binaries(log: Callable[[str], None] = print) -> dict[str, Path]:
    """``prometheus`` and ``promtool``, found or built on demand (one Go module, one build)."""
    return ensure(["prometheus", "promtool"], log=log)


def helm_binary(log: Callable[[str], None] = print) -> Path:
    """``helm`` (v3.22.0), found or built on demand; an executable in the override dir wins."""
    return ensure(["helm"], log=log)["helm"]


def cert_manager_binary(log: Callable[[str], None] = print) -> Path:
    """cert-manager's controller (issuance only), found or built on demand."""
    return ensure([CERT_MANAGER_BINARY], log=log)[CERT_MANAGER_BINARY]


def build_times() -> dict[str, float]:
    """Seconds each cached component took to build, as recorded by its last build."""
    out: dict[str, float] = {}
    for comp in COMPONENTS:
        meta = component_dir(comp) / "build.json"
        if meta.is_file():
            out[comp.name] = float(json.loads(meta.read_text())["seconds"])
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m kuberay.devenv.binaries [BINARY...]``: build what is missing, print the paths.

    Without arguments this is the plane's set; name ``ray-operator`` to get the Go operator.
    """
    names = list(sys.argv[1:] if argv is None else argv) or list(ALL_BINARIES)
    try:
        paths = ensure(names, log=lambda m: print(m, file=sys.stderr, flush=True))
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
