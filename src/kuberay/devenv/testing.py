"""Helpers for tests and benchmarks that run against a real apiserver.

A wait that times out must explain itself: ``wait_for`` fails with the object as last seen and the
most recent Events about it, which is usually enough to see why something did not converge
without re-running the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

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
