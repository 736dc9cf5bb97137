"""FakeDashboard's test controls (timelines, overrides, failure injection, serve statuses) and
its registry. What it shares with real Ray is covered by tests/e2e/test_dashboard_contract.py;
these cases cover the controls controller tests lean on."""

from __future__ import annotations

import pytest

from kuberay.ray.dashboard import (
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    DashboardError,
    JobSubmitRequest,
)
from kuberay.ray.fake import (
    APP_DEPLOY_FAILED,
    APP_DEPLOYING,
    APP_RUNNING,
    FakeDashboard,
    FakeDashboardRegistry,
    JobStep,
    plan_from_entrypoint,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def req(sid: str, entrypoint: str = "echo hi") -> JobSubmitRequest:
    return JobSubmitRequest(entrypoint=entrypoint, submission_id=sid)


def test_plan_from_entrypoint() -> None:
    ok = plan_from_entrypoint("echo 'a b'; sleep 2 && sleep 0.5; python run.py")
    assert [s.status for s in ok] == [PENDING, RUNNING, SUCCEEDED]
    assert ok[1].seconds == 2.5
    assert ok[1].logs == "a b\n"
    failed = plan_from_entrypoint("echo x; exit 7; echo never")
    assert failed[-1].status == FAILED
    assert "exit code 7" in failed[-1].message
    assert "never" not in failed[1].logs
    assert plan_from_entrypoint("false")[-1].status == FAILED
    assert plan_from_entrypoint("exit 0")[-1].status == SUCCEEDED
    assert plan_from_entrypoint("echo 'unbalanced")[-1].status == SUCCEEDED


async def test_timeline_follows_the_clock() -> None:
    clock = Clock()
    fake = FakeDashboard(clock=clock)
    await fake.submit_job(req("j", "echo out; sleep 10"))
    assert fake.job_status("j") == PENDING
    assert await fake.get_job_logs("j") == ""
    clock.advance(0.2)
    assert fake.job_status("j") == RUNNING
    assert await fake.get_job_logs("j") == "out\n"
    clock.advance(9.9)
    assert fake.job_status("j") == RUNNING
    clock.advance(0.2)
    info = await fake.get_job_info("j")
    assert info is not None
    assert info.status == SUCCEEDED
    assert info.end_time is not None


async def test_time_scale_shrinks_sleeps() -> None:
    clock = Clock()
    fake = FakeDashboard(clock=clock, time_scale=0.01, pending_seconds=0)
    await fake.submit_job(req("j", "sleep 100"))
    clock.advance(0.5)
    assert fake.job_status("j") == RUNNING
    clock.advance(0.6)
    assert fake.job_status("j") == SUCCEEDED


async def test_scripted_job_and_overrides() -> None:
    clock = Clock()
    fake = FakeDashboard(clock=clock)
    fake.script_job(
        "j",
        [JobStep(PENDING, 5), JobStep(RUNNING, 5, logs="working\n"), JobStep(FAILED, message="m")],
    )
    await fake.submit_job(req("j"))
    assert fake.job_status("j") == PENDING
    clock.advance(5)
    assert fake.job_status("j") == RUNNING
    assert await fake.get_job_logs("j") == "working\n"
    fake.set_job_status("j", SUCCEEDED, logs="forced\n")
    clock.advance(100)
    info = await fake.get_job_info("j")
    assert info is not None
    assert (info.status, info.message) == (SUCCEEDED, "Job finished successfully.")
    assert await fake.get_job_logs("j") == "working\nforced\n"
    fake.set_job_status("j", RUNNING)  # a test may even revive it
    assert fake.job_status("j") == RUNNING
    revived = await fake.get_job_info("j")
    assert revived is not None
    assert revived.end_time is None
    fake.script_job("j", [JobStep(RUNNING, 1), JobStep(FAILED, message="boom")])
    clock.advance(1)
    info = await fake.get_job_info("j")
    assert info is not None
    assert (info.status, info.message) == (FAILED, "boom")
    with pytest.raises(ValueError, match="at least one step"):
        fake.script_job("x", [])
    with pytest.raises(KeyError):
        fake.set_job_status("nope", RUNNING)


async def test_stop_and_delete_rules() -> None:
    fake = FakeDashboard()
    await fake.submit_job(req("j", "sleep 60"))
    with pytest.raises(DashboardError) as raised:
        await fake.delete_job("j")
    assert raised.value.transient is False
    assert await fake.stop_job("j") is True
    assert fake.job_status("j") == STOPPED
    assert await fake.stop_job("j") is False
    assert await fake.delete_job("j") is True
    assert await fake.delete_job("j") is False
    # A deleted id may be used again; it then counts a second start.
    await fake.submit_job(req("j"))
    assert fake.jobs_started["j"] == 2


async def test_injected_failures_before_and_after_the_effect() -> None:
    fake = FakeDashboard()
    fake.fail("get_job_info", 2, status=503)
    for _ in range(2):
        with pytest.raises(DashboardError) as raised:
            await fake.get_job_info("j")
        assert (raised.value.status, raised.value.transient) == (503, True)
    assert await fake.get_job_info("j") is None

    fake.fail("submit_job", after=True, status=0)
    with pytest.raises(DashboardError):
        await fake.submit_job(req("s"))
    assert fake.jobs_started["s"] == 1  # it took effect although the caller saw a failure
    assert await fake.submit_job(req("s")) == "s"
    assert fake.jobs_started["s"] == 1
    assert fake.submissions["s"] == 2
    assert fake.calls["submit_job"] == 2

    fake.fail("stop_job", transient=False, status=400)
    with pytest.raises(DashboardError) as raised:
        await fake.stop_job("s")
    assert raised.value.transient is False


async def test_down_dashboard() -> None:
    fake = FakeDashboard()
    fake.down = True
    with pytest.raises(DashboardError) as raised:
        await fake.list_jobs()
    assert raised.value.status == 0
    assert await fake.gcs_healthy() is False
    fake.down = False
    fake.gcs_ok = False
    assert await fake.gcs_healthy() is False


async def test_serve_statuses() -> None:
    clock = Clock()
    fake = FakeDashboard(clock=clock)
    empty = await fake.get_serve_details()
    assert empty["applications"] == {}
    assert empty["controller_info"] == {}
    config = {
        "applications": [
            {"name": "a", "import_path": "m:a", "deployments": [{"name": "D"}]},
            {"name": "b", "import_path": "m:b"},
        ],
        "target_capacity": 50,
    }
    await fake.update_serve_config(config)
    details = await fake.get_serve_details()
    assert details["target_capacity"] == 50
    assert details["applications"]["a"]["status"] == APP_DEPLOYING
    assert details["applications"]["a"]["deployments"]["D"]["status"] == "UPDATING"
    fake.set_app_status("a", APP_RUNNING)
    fake.set_app_status("b", APP_DEPLOY_FAILED, message="import error", deployments={"X": "BAD"})
    apps = (await fake.get_serve_details())["applications"]
    assert apps["a"]["deployments"]["D"]["status"] == "HEALTHY"
    assert (apps["b"]["status"], apps["b"]["message"]) == (APP_DEPLOY_FAILED, "import error")
    assert apps["b"]["deployments"]["X"]["status"] == "BAD"
    fake.set_all_apps_status(APP_RUNNING)
    first_app = {"name": "a", "import_path": "m:a", "deployments": [{"name": "D"}]}
    await fake.update_serve_config({"applications": [first_app]})
    apps = (await fake.get_serve_details())["applications"]
    assert list(apps) == ["a"]
    assert apps["a"]["status"] == APP_DEPLOYING  # every PUT redeploys, as Ray does
    assert fake.serve_updates == 2
    with pytest.raises(KeyError):
        fake.set_app_status("b", APP_RUNNING)


async def test_serve_settles_by_itself_when_asked() -> None:
    clock = Clock()
    fake = FakeDashboard(clock=clock, serve_settle_seconds=2)
    await fake.update_serve_config({"applications": [{"name": "a", "import_path": "m:a"}]})
    assert (await fake.get_serve_details())["applications"]["a"]["status"] == APP_DEPLOYING
    clock.advance(2)
    assert (await fake.get_serve_details())["applications"]["a"]["status"] == APP_RUNNING


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"applications": [{"name": "a"}]},
        {"applications": [{"import_path": "m:a"}, {"import_path": "m:b"}]},
    ],
)
async def test_serve_config_validation(config: dict[str, object]) -> None:
    fake = FakeDashboard()
    with pytest.raises(DashboardError) as raised:
        await fake.update_serve_config(config)
    assert (raised.value.status, raised.value.transient) == (400, False)
    assert fake.serve_config is None


async def test_registry_hands_out_one_fake_per_url_and_checks_tokens() -> None:
    registry = FakeDashboardRegistry(time_scale=0.5)
    url = "http://rc-head-svc.ns.svc.cluster.local:8265"
    client = registry(url + "/", auth_token="tok")
    assert registry.get(url) is client.dashboard
    assert client.dashboard.time_scale == 0.5
    await client.submit_job(req("j"))
    other = registry("http://other-head-svc.ns.svc.cluster.local:8265")
    await other.submit_job(req("j"))
    assert registry.total_jobs_started("j") == 2
    assert registry.matching("rc-head") is client.dashboard
    with pytest.raises(KeyError):
        registry.matching("head-svc")
    assert registry.tokens[url] == ["tok"]

    registry.get(url).required_token = "tok"
    assert await client.get_job_info("j") is not None
    wrong = registry(url, auth_token="nope")
    with pytest.raises(DashboardError) as raised:
        await wrong.list_jobs()
    assert (raised.value.status, raised.value.transient) == (401, False)
    await wrong.close()
    assert wrong.closed
    assert registry.clients_made == 3
