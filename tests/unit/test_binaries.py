"""Finding and building the control-plane binaries: overrides, cache keys, clear errors."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
from pathlib import Path

import pytest

from kuberay.devenv import binaries


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(binaries.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(binaries.BINDIR_ENV, raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    return tmp_path


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_cache_is_keyed_by_component_version(isolated: Path) -> None:
    for comp in binaries.COMPONENTS:
        suffix = f"+{binaries.patch_digest(comp)}" if comp.patches else ""
        assert binaries.component_dir(comp).name == f"{comp.name}-{comp.version}{suffix}"
        assert binaries.component_dir(comp).is_relative_to(isolated / "cache")


def test_override_directory_wins_and_nothing_is_built(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = isolated / "mine"
    for name in binaries.ALL_BINARIES:
        _exe(bindir / name)
    monkeypatch.setenv(binaries.BINDIR_ENV, str(bindir))
    monkeypatch.setenv("PATH", "/nonexistent")  # a build would fail without go
    paths = binaries.ensure()
    assert paths == {name: bindir / name for name in binaries.ALL_BINARIES}


def test_envtest_assets_are_used_for_what_they_hold(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets = isolated / "envtest"
    _exe(assets / "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert binaries.locate("etcd") == assets / "etcd"
    assert binaries.locate("kwok") is None


def test_missing_go_is_a_clear_error(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(isolated / "empty"))
    with pytest.raises(binaries.BuildError) as info:
        binaries.ensure(["kwok"], log=lambda _: None)
    message = str(info.value)
    assert "`go` is not on PATH" in message
    assert "Go 1.26 or newer" in message
    assert binaries.BINDIR_ENV in message


def test_old_go_is_a_clear_error(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin = isolated / "bin"
    fake = _exe(fake_bin / "go")
    fake.write_text("#!/bin/sh\necho go1.19.3\n")
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}/usr/bin:/bin")
    with pytest.raises(binaries.BuildError, match=r"Go 1\.19; the build needs Go 1\.26"):
        binaries.ensure(["kwok"], log=lambda _: None)


def test_unknown_binary_is_rejected() -> None:
    with pytest.raises(KeyError, match="unknown control-plane binary"):
        binaries.locate("kubelet")


def test_wrapper_modules_pin_the_documented_versions() -> None:
    root = binaries.source_root()
    k8s = (root / "kubernetes" / "go.mod").read_text()
    assert f"k8s.io/kubernetes {binaries.KUBERNETES_VERSION}" in k8s
    minor = binaries.KUBERNETES_VERSION.removeprefix("v1.")
    # every staging module is replaced by the matching v0.x release
    assert k8s.count(f" v0.{minor}") >= 31
    assert (
        f"go.etcd.io/etcd/server/v3 {binaries.ETCD_VERSION}"
        in (root / "etcd" / "go.mod").read_text()
    )
    assert f"sigs.k8s.io/kwok {binaries.KWOK_VERSION}" in (root / "kwok" / "go.mod").read_text()


def test_go_operator_is_an_on_demand_component_pinned_to_its_version() -> None:
    comp = next(c for c in binaries.COMPONENTS if binaries.GO_OPERATOR_BINARY in c.packages)
    assert binaries.GO_OPERATOR_VERSION == "v1.6.1"
    assert comp.version == binaries.GO_OPERATOR_VERSION
    assert (
        comp.packages[binaries.GO_OPERATOR_BINARY] == "github.com/ray-project/kuberay/ray-operator"
    )
    assert comp.on_demand
    # the plane (and `kuberay dev build`) never needs it
    assert binaries.GO_OPERATOR_BINARY not in binaries.ALL_BINARIES
    assert binaries.GO_OPERATOR_BINARY in binaries.KNOWN_BINARIES
    on_demand = {c.name for c in binaries.COMPONENTS if c.on_demand}
    assert on_demand == {
        "kuberay-operator",
        "prometheus",
        "helm",
        "upstream-e2e",
        "cert-manager",
        "kueue",
    }
    go_mod = (binaries.source_root() / comp.module_dir / "go.mod").read_text()
    assert f"github.com/ray-project/kuberay/ray-operator {binaries.GO_OPERATOR_VERSION}" in go_mod


def test_prometheus_is_on_demand_and_pinned() -> None:
    comp = next(c for c in binaries.COMPONENTS if "promtool" in c.packages)
    assert comp.on_demand
    assert set(comp.packages) == {"prometheus", "promtool"}
    assert "prometheus" not in binaries.ALL_BINARIES
    go_mod = (binaries.source_root() / comp.module_dir / "go.mod").read_text()
    assert f"github.com/prometheus/prometheus {binaries.PROMETHEUS_VERSION}" in go_mod
    # Go module v0.316.0 is Prometheus 3.16.0: `prometheus --version` says the release.
    assert "common/version.Version=3.16.0" in " ".join(comp.ldflags)


def test_prometheus_keeps_only_the_service_discovery_the_plane_scrapes_with() -> None:
    comp = next(c for c in binaries.COMPONENTS if "promtool" in c.packages)
    assert comp.tags == ("remove_all_sd", "enable_kubernetes_sd")
    # A scrape config using any other discovery would be rejected by this build: add its tag.
    from kuberay.devenv import prometheus

    used = set(re.findall(r"\b(\w+)_sd_configs\b", Path(prometheus.__file__).read_text()))
    assert used == {"kubernetes"}


def test_build_tags_reach_go_build(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = isolated / "calls"
    # Records each invocation; `build ... -o FILE PKG` creates FILE, as go would.
    _fake_go(
        isolated,
        monkeypatch,
        f'echo "$*" >> {calls}\n'
        'prev=""; for a in "$@"; do [ "$prev" = -o ] && : > "$a"; prev="$a"; done\n',
    )
    _wrapper_module(isolated, monkeypatch)
    tagged = binaries.Component(
        name="t", version="v1", module_dir="m", packages={"t": "m/cmd/t"}, tags=("a", "b")
    )
    plain = binaries.Component(name="p", version="v1", module_dir="m", packages={"p": "m/p"})
    binaries.build_component(tagged, log=lambda _: None)
    binaries.build_component(plain, log=lambda _: None)
    builds = [line.split() for line in calls.read_text().splitlines() if line.startswith("build")]
    assert len(builds) == 2
    assert builds[0][builds[0].index("-tags") + 1] == "a,b"
    assert "-tags" not in builds[1]
    assert (binaries.component_dir(tagged) / "t").is_file()


def test_cert_manager_is_on_demand_pinned_and_prebuilt_by_the_test_script() -> None:
    comp = next(c for c in binaries.COMPONENTS if binaries.CERT_MANAGER_BINARY in c.packages)
    assert comp.on_demand
    assert binaries.CERT_MANAGER_BINARY not in binaries.ALL_BINARIES
    go_mod = (binaries.source_root() / comp.module_dir / "go.mod").read_text()
    assert f"github.com/cert-manager/cert-manager {binaries.CERT_MANAGER_VERSION}" in go_mod
    # The wrapper's own main package: cert-manager's cmd/controller module is not on the proxy.
    assert (binaries.source_root() / comp.module_dir / "main.go").is_file()
    script = (binaries.source_root().parent / "scripts" / "test.sh").read_text()
    assert binaries.CERT_MANAGER_BINARY in script


def test_helm_is_on_demand_and_pinned() -> None:
    comp = next(c for c in binaries.COMPONENTS if "helm" in c.packages)
    assert comp.on_demand
    assert comp.packages == {"helm": "helm.sh/helm/v3/cmd/helm"}
    assert "helm" not in binaries.ALL_BINARIES
    go_mod = (binaries.source_root() / comp.module_dir / "go.mod").read_text()
    assert f"helm.sh/helm/v3 {binaries.HELM_VERSION}" in go_mod
    # `helm version` names the release; offline rendering assumes the Kubernetes of its client-go.
    flags = " ".join(comp.ldflags)
    assert f"internal/version.version={binaries.HELM_VERSION}" in flags
    client_go = next(line for line in go_mod.splitlines() if "k8s.io/client-go " in line)
    minor = client_go.split()[1].split(".")[1]
    assert f"pkg/chartutil.k8sVersionMinor={minor}" in flags
    assert f"pkg/lint/rules.k8sVersionMinor={minor}" in flags


def test_go_operator_is_found_on_demand_without_building(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = isolated / "mine"
    _exe(bindir / binaries.GO_OPERATOR_BINARY)
    monkeypatch.setenv(binaries.BINDIR_ENV, str(bindir))
    monkeypatch.setenv("PATH", "/nonexistent")  # a build would fail without go
    assert binaries.go_operator_binary(log=lambda _: None) == bindir / "ray-operator"
    cached = _exe(isolated / "cache" / "controlplane" / "kuberay-operator-v1.6.1" / "ray-operator")
    monkeypatch.delenv(binaries.BINDIR_ENV)
    assert binaries.go_operator_binary(log=lambda _: None) == cached


def test_missing_go_for_the_go_operator_names_only_its_binary(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(isolated / "empty"))
    with pytest.raises(binaries.BuildError) as info:
        binaries.go_operator_binary(log=lambda _: None)
    message = str(info.value)
    assert "holds ray-operator." in message
    assert "kube-apiserver" not in message


def test_kueue_is_on_demand_and_pinned() -> None:
    comp = next(c for c in binaries.COMPONENTS if "kueue" in c.packages)
    assert comp.on_demand
    assert comp.packages == {"kueue": "sigs.k8s.io/kueue/cmd/kueue"}
    go_mod = (binaries.source_root() / comp.module_dir / "go.mod").read_text()
    assert f"sigs.k8s.io/kueue {binaries.KUEUE_VERSION}" in go_mod
    assert f"pkg/version.GitVersion={binaries.KUEUE_VERSION}" in " ".join(comp.ldflags)


_DIFF = """--- a/pkg/q.go
+++ b/pkg/q.go
@@ -2,3 +2,4 @@
 func f() {
-\tdrop()
+\tif keep() {
+\t\tplay()
 \t}
--- a/pkg/m.go
+++ b/pkg/m.go
@@ -1,2 +1,3 @@
 package m
+// added
 var x = 1
"""


def _fake_go(isolated: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A `go` first on PATH: Go 1.26 for `go env GOVERSION`, then the shell ``body``."""
    fake = _exe(isolated / "bin" / "go")
    fake.write_text('#!/bin/sh\nif [ "$1" = env ]; then echo go1.26.7; exit 0; fi\n' + body)
    monkeypatch.setenv("PATH", f"{isolated / 'bin'}{os.pathsep}/usr/bin:/bin")


def _wrapper_module(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty wrapper module ``m`` under a source root of its own; returns the root."""
    src = isolated / "src"
    (src / "m").mkdir(parents=True)
    (src / "m" / "go.mod").write_text("module m\n")
    monkeypatch.setenv(binaries.SOURCE_ENV, str(src))
    return src


def _patched_component(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[binaries.Component, Path]:
    """A wrapper module ``m`` whose component carries ``_DIFF`` as patches/fix.patch."""
    src = _wrapper_module(isolated, monkeypatch)
    (src / "m" / "patches").mkdir()
    (src / "m" / "patches" / "fix.patch").write_text(_DIFF)
    comp = binaries.Component(
        name="up",
        version="v1",
        module_dir="m",
        packages={"up": "example.com/up/cmd/up"},
        patches=("fix.patch",),
        patched_module="example.com/up",
    )
    return comp, src


def test_unified_diff_applies_hunks_by_content() -> None:
    files = {
        "pkg/q.go": "package q\nfunc f() {\n\tdrop()\n\t}\n",
        "pkg/m.go": "package m\nvar x = 1\n",
    }
    out = binaries.apply_unified_diff(_DIFF, files.__getitem__)
    assert out["pkg/q.go"] == "package q\nfunc f() {\n\tif keep() {\n\t\tplay()\n\t}\n"
    assert out["pkg/m.go"] == "package m\n// added\nvar x = 1\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("package q\nfunc f() {\n\tother()\n\t}\n", "not found"),
        ("func f() {\n\tdrop()\n\t}\nfunc f() {\n\tdrop()\n\t}\n", "found 2 times"),
    ],
)
def test_unified_diff_refuses_a_hunk_that_is_missing_or_ambiguous(text: str, why: str) -> None:
    files = {"pkg/q.go": text, "pkg/m.go": "package m\nvar x = 1\n"}
    with pytest.raises(binaries.PatchError, match=f"pkg/q.go: a hunk's old lines are {why}"):
        binaries.apply_unified_diff(_DIFF, files.__getitem__)


def test_patched_module_is_built_from_a_copy_and_keys_the_cache(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pristine = isolated / "modcache" / "example.com" / "up@v1"
    (pristine / "pkg").mkdir(parents=True)
    (pristine / "pkg" / "q.go").write_text("package q\nfunc f() {\n\tdrop()\n\t}\n")
    (pristine / "pkg" / "m.go").write_text("package m\nvar x = 1\n")
    for path in (pristine / "pkg", *(pristine / "pkg").iterdir(), pristine):
        path.chmod(0o555)  # read-only, like the module cache
    # `go list -m -f {{.Dir}} MOD` names the pinned module's root; `mod edit -replace=MOD=DIR`
    # is remembered in the working directory; `build` compiles "what DIR holds": it writes the
    # replacement's files into the output, so the test sees exactly what would be compiled.
    _fake_go(
        isolated,
        monkeypatch,
        f'if [ "$1" = list ] && [ "$2" = -m ]; then echo {pristine}; exit 0; fi\n'
        'if [ "$1" = mod ]; then echo "${3#-replace=}" > replace.txt; exit 0; fi\n'
        'if [ "$1" != build ]; then exit 0; fi\n'
        'prev=""; for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
        'dir="$(cut -d= -f2- replace.txt)"\n'
        'cat "$dir/pkg/q.go" "$dir/pkg/m.go" > "$out"\n',
    )
    comp, src = _patched_component(isolated, monkeypatch)
    target = binaries.component_dir(comp)
    assert target.name == f"up-v1+{binaries.patch_digest(comp)}"
    binaries.build_component(comp, log=lambda _: None)
    assert (target / "up").read_text() == (
        "package q\nfunc f() {\n\tif keep() {\n\t\tplay()\n\t}\npackage m\n// added\nvar x = 1\n"
    )
    assert (pristine / "pkg" / "m.go").read_text() == "package m\nvar x = 1\n"
    assert (src / "m" / "go.mod").read_text() == "module m\n"  # the wrapper itself is untouched
    assert sorted(p.name for p in target.iterdir()) == ["build.json", "up"]  # staging removed
    assert json.loads((target / "build.json").read_text())["patches"] == ["fix.patch"]
    # a changed patch is another cache entry
    (src / "m" / "patches" / "fix.patch").write_text(_DIFF.replace("// added", "// other"))
    assert binaries.component_dir(comp) != target


def test_a_patch_that_no_longer_applies_fails_the_build_by_name(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pristine = isolated / "modcache"
    (pristine / "pkg").mkdir(parents=True)
    (pristine / "pkg" / "q.go").write_text("package q\n")
    _fake_go(
        isolated, monkeypatch, f'if [ "$1" = list ] && [ "$2" = -m ]; then echo {pristine}; fi\n'
    )
    comp, _ = _patched_component(isolated, monkeypatch)
    with pytest.raises(binaries.BuildError, match=r"patch fix\.patch does not apply"):
        binaries.build_component(comp, log=lambda _: None)
    assert list(binaries.component_dir(comp).iterdir()) == []  # no binary, no staging left


def test_a_second_caller_waits_for_the_running_build_and_reuses_it(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = isolated / "calls"
    # A slow build: the second caller asks while the first is still compiling.
    _fake_go(
        isolated,
        monkeypatch,
        f'if [ "$1" = build ]; then echo build >> {calls}; sleep 1; fi\n'
        'prev=""; for a in "$@"; do [ "$prev" = -o ] && : > "$a"; prev="$a"; done\n',
    )
    _wrapper_module(isolated, monkeypatch)
    comp = binaries.Component(
        name="slow", version="v1", module_dir="m", packages={"slow": "m/slow"}, on_demand=True
    )
    monkeypatch.setattr(binaries, "COMPONENTS", (comp,))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: binaries.ensure(["slow"], log=lambda _: None), [1, 2]))
    assert results[0] == results[1] == {"slow": binaries.component_dir(comp) / "slow"}
    assert calls.read_text().splitlines() == ["build"]
