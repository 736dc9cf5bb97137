"""Helpers for tests and benchmarks that run against a real apiserver.

A wait that times out must explain itself: ``wait_for`` fails with the object as last seen and the
most recent Events about it, which is usually enough to see why something did not converge
without re-running the test.

A test that checks that something did *not* happen must first prove that the operator looked:
``ReconcileTrace`` records, per object, what the operator's informers applied and which
reconciles ran, so such a test waits for a reconcile that saw its write instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import orjson

from kuberay.runtime.client import (
    CRDS,
    EVENTS,
    NAMESPACES,
    SERVICEACCOUNTS,
    KubeClient,
    Resource,
)
from kuberay.runtime.errors import AlreadyExists, ApiError, NotFound

Predicate = Callable[[dict[str, Any]], bool]


def tcp_connections(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` whose remote port is ``port`` (its own
    sockets, matched by inode in /proc): how benchmarks and tests count apiserver connections."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            remote_port = int(cols[2].rsplit(":", 1)[1], 16)
            if cols[3] == "01" and remote_port == port and cols[9] in inodes:
                count += 1
    return count


def small_raycluster(name: str, workers: int, cpu: str = "100m") -> dict[str, Any]:
    """A RayCluster of a head and ``workers`` workers with small requests: the shape the
    scale benchmarks create by the thousand (KWOK pods)."""

    def container(n: str) -> dict[str, Any]:
        res = {"cpu": cpu, "memory": "128Mi"}
        return {
            "name": n,
            "image": "rayproject/ray:2.52.0",
            "resources": {"limits": res, "requests": res},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-head")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": 0,
                    "maxReplicas": 100000,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}},
                }
            ],
        },
    }


def unique_name(prefix: str, max_len: int = 40) -> str:
    clean = "".join(ch if ch.isalnum() else "-" for ch in prefix.lower()).strip("-")
    suffix = uuid.uuid4().hex[:6]
    return f"{clean[: max_len - 7].rstrip('-')}-{suffix}"


async def describe(kube: KubeClient, res: Resource, name: str, namespace: str | None) -> str:
    """The object (if any) and its recent events, formatted for an assertion message."""
    try:
        obj: Any = await kube.get(res, name, namespace)
        obj.get("metadata", {}).pop("managedFields", None)
        text = orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()
    except ApiError as exc:
        text = f"(could not read {res.plural}/{name}: {exc})"
    lines = [f"--- {res.kind or res.plural} {namespace}/{name}:", text]
    if namespace:
        try:
            events = await kube.list(
                EVENTS, namespace, field_selector=f"involvedObject.name={name}"
            )
            items = sorted(
                events["items"],
                key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
            )[-15:]
            lines.append(f"--- last {len(items)} events:")
            lines.extend(
                f"{e.get('type')} {e.get('reason')}: {e.get('message')} (x{e.get('count', 1)})"
                for e in items
            )
        except ApiError as exc:
            lines.append(f"(could not list events: {exc})")
    return "\n".join(lines)


async def wait_for(
    kube: KubeClient,
    res: Resource,
    name: str,
    namespace: str | None,
    predicate: Predicate,
    *,
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.2,
) -> dict[str, Any]:
    """Polls until ``predicate(obj)`` holds; returns the object. Fails with object and events."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        try:
            obj = await kube.get(res, name, namespace)
            if predicate(obj):
                return obj
        except NotFound:
            last_error = "not found"
        if time.monotonic() >= deadline:
            detail = await describe(kube, res, name, namespace)
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what} on "
                f"{res.plural}/{name} ({last_error or 'predicate false'})\n{detail}"
            )
        await asyncio.sleep(interval)


async def wait_until(
    check: Callable[[], Awaitable[bool]],
    *,
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.2,
    explain: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """Polls an arbitrary async check; on timeout ``explain()`` adds context to the failure."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() >= deadline:
            detail = await explain() if explain else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{detail}")
        await asyncio.sleep(interval)


async def wait_gone(
    kube: KubeClient, res: Resource, name: str, namespace: str | None, *, timeout: float = 30.0
) -> None:
    async def gone() -> bool:
        try:
            await kube.get(res, name, namespace)
        except NotFound:
            return True
        return False

    async def explain() -> str:
        return await describe(kube, res, name, namespace)

    await wait_until(
        gone, timeout=timeout, what=f"{res.plural}/{name} to be deleted", explain=explain
    )


async def create_namespace(kube: KubeClient, name: str, *, timeout: float = 30.0) -> None:
    """Creates a namespace and waits for its ``default`` ServiceAccount, without which the
    ServiceAccount admission plugin rejects pods (the same race exists on a real cluster)."""
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"kuberay-test": "1"}}})
    await wait_for(
        kube,
        SERVICEACCOUNTS,
        "default",
        name,
        lambda _: True,
        timeout=timeout,
        what="the default ServiceAccount",
    )


async def delete_namespace(kube: KubeClient, name: str) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACES, name)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def has_condition(obj: dict[str, Any], ctype: str, status: str = "True") -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == status


class TcpProxy:
    """A loopback TCP relay whose connections a test can cut, to simulate a network partition
    between a client and the apiserver (the TLS session passes through untouched)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.blocked = False

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        """Drops every open connection; new ones are refused until ``restore``."""
        self.blocked = True
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    def restore(self) -> None:
        self.blocked = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.discard(writer)
        self._writers.discard(up_writer)


def loose_crd(res: Resource, kind: str) -> dict[str, Any]:
    """A schema-less CRD standing in for another project's API (an OpenShift Route, a
    scheduler's PodGroup): the apiserver stores whatever the operator sends, which is what a
    test of the operator checks."""
    singular = kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{res.plural}.{res.group}"},
        "spec": {
            "group": res.group,
            "names": {"plural": res.plural, "singular": singular, "kind": kind},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": res.version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


async def install_loose_crd(kube: KubeClient, res: Resource, kind: str) -> str:
    """Creates (or finds) ``loose_crd`` and waits until it is served; returns its name."""
    crd = loose_crd(res, kind)
    name = str(crd["metadata"]["name"])
    with contextlib.suppress(AlreadyExists):
        await kube.create(CRDS, crd)
    await wait_for(kube, CRDS, name, None, lambda o: has_condition(o, "Established"))
    return name


STRICT_ENV = "KUBERAY_TESTS_STRICT"


def strict() -> bool:
    """Whether a missing prerequisite (root, network namespaces, Ray, Redis, Go) fails the run
    instead of skipping: in CI (``CI`` set) and when ``KUBERAY_TESTS_STRICT=1``, so a machine
    that lost one of them cannot turn the suite green by running less of it."""
    import os

    value = os.environ.get(STRICT_ENV)
    if value is not None:
        return value not in ("", "0", "false")
    return bool(os.environ.get("CI"))


def skip_unless_strict(reason: str) -> NoReturn:
    """``pytest.skip(reason)`` on a developer's machine, a failure naming the missing piece in
    strict runs."""
    import pytest

    if strict():
        pytest.fail(f"required by this run ({STRICT_ENV} / CI): {reason}", pytrace=False)
    pytest.skip(reason)


# --------------------------------------------------------------------------- reconcile trace

TRACE_ENV = "KUBERAY_TEST_RECONCILE_TRACE"

_last_tick = 0


def _tick() -> int:
    """A strictly increasing instant on ``CLOCK_MONOTONIC``, which all processes of the machine
    share: a mark taken in the test orders against records of an operator subprocess."""
    global _last_tick
    _last_tick = max(_last_tick + 1, time.monotonic_ns())
    return _last_tick


@dataclass(frozen=True)
class Applied:
    """An informer applied an event to its cache (then ran its handlers, which enqueue)."""

    tick: int
    plural: str
    etype: str
    key: str
    resource_version: str


@dataclass(frozen=True)
class Reconciled:
    """One reconcile of ``key`` by ``controller``; ``ok`` unless it raised."""

    start: int
    end: int
    controller: str
    key: str
    ok: bool


def _object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


# The in-process trace lives as long as the test session: keep what a wait can need (the
# recent records of recently active objects), not every event of a large test.
_PER_KEY = 200
_KEYS = 20_000
_R = TypeVar("_R")


def _keep(table: dict[tuple[str, str], list[_R]], key: tuple[str, str], rec: _R) -> None:
    records = table.pop(key, [])  # re-inserted last: the dict is ordered by recent activity
    records.append(rec)
    table[key] = records[-_PER_KEY:]
    while len(table) > _KEYS:
        del table[next(iter(table))]


class ReconcileTrace:
    """What an operator's informers applied and which reconciles ran, per object.

    A test that asserts that the operator did *not* do something (rewrite a converged object,
    delete a pod, create a second cluster) has to know the operator processed the change first;
    sleeping passes on a loaded machine whether or not a reconcile ran. The proof used here: the
    informer applied the written ``resourceVersion`` to its cache at instant ``a`` (its handlers
    enqueue the key right after), and a reconcile of the key that *started* after ``a`` has
    finished. Such a reconcile read a cache holding the write, and any write it decided on was
    sent before it ended.

    Fed in-process (``reconcile_trace()``) or from the file an operator subprocess writes
    (``OperatorProcess(..., trace=True)``; the file is read on each poll).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.applied: dict[tuple[str, str], list[Applied]] = {}
        self.reconciled: dict[tuple[str, str], list[Reconciled]] = {}
        self._offset = 0
        self._partial = b""

    # ---------------------------------------------------------------- recording
    def feed(self, line: str) -> None:
        """One record as written by the hooks (tab-separated, see ``install_reconcile_trace``)."""
        kind, *fields = line.rstrip("\n").split("\t")
        if kind == "A":
            tick, plural, etype, key, rv = fields
            _keep(self.applied, (plural, key), Applied(int(tick), plural, etype, key, rv))
        elif kind == "R":
            start, end, controller, key, ok = fields
            done = Reconciled(int(start), int(end), controller, key, ok == "1")
            _keep(self.reconciled, (controller, key), done)

    def refresh(self) -> None:
        if self.path is None or not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            if raw:
                self.feed(raw.decode())

    # ---------------------------------------------------------------- waiting
    @staticmethod
    def mark() -> int:
        """Now, to compare with the instants of later records."""
        return _tick()

    def names(self, plural: str, namespace: str | None) -> set[str]:
        """Every object of ``plural`` in ``namespace`` an informer ever applied."""
        self.refresh()
        prefix = f"{namespace}/" if namespace else ""
        return {
            key[len(prefix) :]
            for (res, key) in self.applied
            if res == plural and key.startswith(prefix) and "/" not in key[len(prefix) :]
        }

    def reconciles(self, controller: str, namespace: str | None, name: str) -> list[Reconciled]:
        self.refresh()
        return list(self.reconciled.get((controller, _object_key(namespace, name)), []))

    async def wait_applied(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        *,
        resource_version: str | None = None,
        deleted: bool = False,
        after: int = 0,
        timeout: float = 30.0,
    ) -> int:
        """Waits until an informer of ``plural`` applied the object at ``resource_version`` or
        later (resourceVersions are etcd revisions here, so they compare as integers), or its
        deletion, after the instant ``after``; returns the instant it did."""
        key = (plural, _object_key(namespace, name))

        def found() -> int | None:
            self.refresh()
            for rec in self.applied.get(key, []):
                if rec.tick <= after:
                    continue
                if deleted:
                    if rec.etype == "DELETED":
                        return rec.tick
                elif resource_version is None or int(rec.resource_version) >= int(resource_version):
                    return rec.tick
            return None

        async def check() -> bool:
            return found() is not None

        what = "its deletion" if deleted else f"resourceVersion {resource_version}"
        await wait_until(
            check,
            timeout=timeout,
            interval=0.05,
            what=f"the operator's {plural} informer to apply {key[1]} ({what})",
        )
        tick = found()
        assert tick is not None
        return tick

    async def wait_reconciled(
        self,
        controller: str,
        namespace: str | None,
        name: str,
        *,
        after: int,
        count: int = 1,
        timeout: float = 30.0,
    ) -> None:
        """Waits until ``count`` reconciles of the object by ``controller`` that started after
        the instant ``after`` have finished without raising."""

        def done() -> list[Reconciled]:
            return [
                r for r in self.reconciles(controller, namespace, name) if r.start > after and r.ok
            ]

        async def check() -> bool:
            return len(done()) >= count

        async def explain() -> str:
            recent = self.reconciles(controller, namespace, name)[-5:]
            return f"last reconciles (mark {after}): {recent}"

        await wait_until(
            check,
            timeout=timeout,
            interval=0.05,
            what=f"{count} {controller} reconcile(s) of {_object_key(namespace, name)}",
            explain=explain,
        )

    async def wait_processed(
        self,
        controller: str,
        plural: str,
        obj: dict[str, Any],
        *,
        owner: str | None = None,
        count: int = 1,
        after: int = 0,
        timeout: float = 30.0,
    ) -> None:
        """Waits until ``controller`` finished a reconcile that saw ``obj`` (as returned by a
        write or a read): its informer applied that resourceVersion, then a reconcile of the
        object (or of its ``owner``, for an owned object) started and ended. With ``after``, only
        what happened after that instant counts (e.g. the start of a new operator process)."""
        meta = obj["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        started = time.monotonic()
        seen = await self.wait_applied(
            plural,
            ns,
            name,
            resource_version=meta["resourceVersion"],
            after=after,
            timeout=timeout,
        )
        left = max(1.0, timeout - (time.monotonic() - started))
        await self.wait_reconciled(
            controller, ns, owner or name, after=seen, count=count, timeout=left
        )


def install_reconcile_trace(sink: Callable[[str], None]) -> None:
    """Hooks every ``Controller`` created from now on and every ``Informer`` of this process to
    report to ``sink`` (one line per applied event and per finished reconcile). Test
    instrumentation: it wraps the reconcile function and the informer's event dispatch and
    changes nothing else."""
    from kuberay.runtime.controller import Controller, Request, Result
    from kuberay.runtime.informer import Informer

    installed = getattr(Controller, "_kuberay_trace_sink", None) is not None
    setattr(Controller, "_kuberay_trace_sink", sink)  # noqa: B010 - a test-only attribute
    if installed:
        return

    def current() -> Callable[[str], None]:
        out: Callable[[str], None] = getattr(Controller, "_kuberay_trace_sink")  # noqa: B009
        return out

    original_init = Controller.__init__
    original_emit = Informer._emit

    def traced_init(
        self: Controller,
        name: str,
        reconcile: Callable[[Request], Awaitable[Result | None]],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        async def traced(req: Request) -> Result | None:
            start = _tick()
            ok = False
            try:
                result = await reconcile(req)
                ok = True
                return result
            finally:
                current()(f"R\t{start}\t{_tick()}\t{name}\t{req.key}\t{int(ok)}")

        original_init(self, name, traced, *args, **kwargs)

    def traced_emit(
        self: Informer, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        obj = new if new is not None else old
        meta = (obj or {}).get("metadata") or {}
        key = _object_key(meta.get("namespace"), str(meta.get("name")))
        rv = meta.get("resourceVersion") or "0"
        current()(f"A\t{_tick()}\t{self.resource.plural}\t{etype}\t{key}\t{rv}")
        original_emit(self, etype, old, new)

    setattr(Controller, "__init__", traced_init)  # noqa: B010 - mypy refuses method assignment
    setattr(Informer, "_emit", traced_emit)  # noqa: B010


_in_process: ReconcileTrace | None = None


def reconcile_trace() -> ReconcileTrace:
    """The trace of the operators running in this process (installed on first use: create the
    operator's Manager after calling this)."""
    global _in_process
    if _in_process is None:
        _in_process = ReconcileTrace()
        install_reconcile_trace(_in_process.feed)
    return _in_process


def install_reconcile_trace_file(path: str) -> None:
    """For an operator subprocess: appends the trace to ``path``, one flushed line a record."""
    fh = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's lifetime

    def sink(line: str) -> None:
        fh.write(line + "\n")

    install_reconcile_trace(sink)
