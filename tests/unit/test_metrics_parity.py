"""The runtime's /metrics matches controller-runtime v0.22 in names, label names and the series
that exist before anything happened, so dashboards and alerts written for the Go operator work."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kuberay.runtime.client import ClientConfig, KubeClient
from kuberay.runtime.controller import Controller, Request, Result
from kuberay.runtime.errors import ApiError
from kuberay.runtime.metrics import RuntimeMetrics
from kuberay.runtime.workqueue import WorkQueue


def _samples(m: RuntimeMetrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


# name -> label names, as controller-runtime v0.22 (and client-go's adapter) register them.
UPSTREAM = {
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_terminal_reconcile_errors_total": {"controller"},
    "controller_runtime_reconcile_panics_total": {"controller"},
    "controller_runtime_max_concurrent_reconciles": {"controller"},
    "controller_runtime_active_workers": {"controller"},
    "workqueue_depth": {"name", "controller", "priority"},
    "workqueue_adds_total": {"name", "controller"},
    "workqueue_retries_total": {"name", "controller"},
    "workqueue_unfinished_work_seconds": {"name", "controller"},
    "workqueue_longest_running_processor_seconds": {"name", "controller"},
    "workqueue_queue_duration_seconds_count": {"name", "controller"},
    "workqueue_work_duration_seconds_count": {"name", "controller"},
    "controller_runtime_reconcile_time_seconds_count": {"controller"},
    "process_cpu_seconds_total": set(),
    "process_resident_memory_bytes": set(),
    "process_open_fds": set(),
    "process_start_time_seconds": set(),
}


async def test_series_exist_at_zero_with_upstream_labels() -> None:
    m = RuntimeMetrics()
    ctl = Controller("raycluster", _ok, concurrency=8, metrics=m)
    ctl.queue.add("ns/a")
    key = await ctl.queue.get()
    assert key is not None
    await ctl._process(key)  # one reconcile, so the histograms have a labelled child
    ctl.queue.done(key)
    got = _samples(m)
    for name, labels in UPSTREAM.items():
        assert name in got, name
        assert {k for k, _ in next(iter(got[name]))} == labels, name
    results = {dict(k)["result"]: v for k, v in got["controller_runtime_reconcile_total"].items()}
    assert results == {"error": 0, "requeue_after": 0, "requeue": 0, "success": 1}
    assert got["controller_runtime_max_concurrent_reconciles"] == {
        (("controller", "raycluster"),): 8
    }
    assert not [n for n in got if n.endswith("_created")], "Go exports no *_created series"


async def test_panics_count_bugs_not_api_answers() -> None:
    m = RuntimeMetrics()

    async def bug(_req: Request) -> None:
        raise KeyError("spec")

    async def refused(_req: Request) -> None:
        raise ApiError(422, {"reason": "Invalid", "message": "no"}, "PATCH", "/x")

    for name, fn in (("buggy", bug), ("refused", refused)):
        ctl = Controller(name, fn, metrics=m)
        await ctl._process("ns/a")
        ctl.queue.shutdown()
    got = _samples(m)
    panics = {
        dict(k)["controller"]: v
        for k, v in got["controller_runtime_reconcile_panics_total"].items()
    }
    errors = {
        dict(k)["controller"]: v
        for k, v in got["controller_runtime_reconcile_errors_total"].items()
    }
    assert panics == {"buggy": 1, "refused": 0}
    assert errors == {"buggy": 1, "refused": 1}


def test_unfinished_and_longest_running_follow_the_clock() -> None:
    now = [100.0]
    q = WorkQueue("q", clock=lambda: now[0])
    q._started_at.update({"a": 90.0, "b": 97.0})  # two items in progress since t=90 and t=97
    assert q.unfinished_work_seconds() == 13.0
    assert q.longest_running_processor_seconds() == 10.0
    q._started_at.clear()
    assert (q.unfinished_work_seconds(), q.longest_running_processor_seconds()) == (0.0, 0.0)


async def test_rest_client_requests_carry_the_host() -> None:
    m = RuntimeMetrics()
    async with KubeClient(ClientConfig(server="http://127.0.0.1:6443")) as client:
        m.instrument_client(client)
        for observe in client.observers:
            observe("GET", 200, 0.01, "pods")
    got = _samples(m)
    assert got["rest_client_requests_total"] == {
        (("code", "200"), ("host", "127.0.0.1:6443"), ("method", "GET")): 1
    }


async def _ok(_req: Request) -> None:
    return None


async def test_a_failed_pass_with_its_own_requeue_counts_as_an_error() -> None:
    """A reconciler that reports a refused write in status and requeues itself (as RayCluster
    does) still shows in the error series, as upstream's returned error does."""
    m = RuntimeMetrics()

    async def refused_write(_req: Request) -> Result:
        return Result(requeue_after=2.0, failed=True)

    ctl = Controller("raycluster", refused_write, metrics=m)
    await ctl._process("ns/a")
    ctl.queue.shutdown()
    got = _samples(m)
    results = {dict(k)["result"]: v for k, v in got["controller_runtime_reconcile_total"].items()}
    assert results["error"] == 1
    assert got["controller_runtime_reconcile_errors_total"] == {(("controller", "raycluster"),): 1}
    assert ctl.queue.delayed == 1, "the requeue it asked for still happens"
