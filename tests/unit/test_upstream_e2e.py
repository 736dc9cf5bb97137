"""The upstream-e2e harness's pure parts: test2json events -> per-test results -> report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries, upstream_e2e
from kuberay.devenv.upstream_e2e import failure_cause, markdown, parse_events


def _events(*rows: tuple[str, str | None, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for action, test, text in rows:
        ev: dict[str, Any] = {"Action": action, "Package": "e2e"}
        if test:
            ev["Test"] = test
        if action == "output":
            ev["Output"] = text
        elif text:
            ev["Elapsed"] = float(text)
        out.append(ev)
    return out


def test_top_level_results_with_subtest_failure_and_skip() -> None:
    events = _events(
        ("run", "TestA", ""),
        ("output", "TestA", "=== RUN   TestA\n"),
        ("pass", "TestA", "3.5"),
        ("run", "TestB", ""),
        ("run", "TestB/case_1", ""),
        ("output", "TestB/case_1", "    raycluster_test.go:40: \n"),
        ("output", "TestB/case_1", "        \tError Trace:\t/x/raycluster_test.go:40\n"),
        ("output", "TestB/case_1", "        \tError:      \tReceived unexpected error:\n"),
        ("output", "TestB/case_1", "        \t            \tpods is forbidden\n"),
        ("fail", "TestB/case_1", "1"),
        ("fail", "TestB", "2"),
        ("run", "TestC", ""),
        ("output", "TestC", "    x_test.go:9: needs a TPU\n"),
        ("output", "TestC", "--- SKIP: TestC (0.00s)\n"),
        ("skip", "TestC", "0"),
        ("fail", None, "7.25"),
    )
    suite = parse_events("e2e", events)
    by_name = {t.name: t for t in suite.tests}
    assert suite.seconds == 7.25
    assert by_name["TestA"].status == "pass"
    assert by_name["TestA"].seconds == 3.5
    assert by_name["TestB"].status == "fail"
    assert by_name["TestB"].cause.startswith("subtests case_1: ")
    assert "Received unexpected error" in by_name["TestB"].cause
    assert "pods is forbidden" in by_name["TestB"].cause
    assert by_name["TestC"].status == "skip"
    assert "needs a TPU" in by_name["TestC"].cause


def test_unfinished_test_is_a_failure_naming_why() -> None:
    events = _events(
        ("run", "TestSlow", ""),
        ("output", "TestSlow", "panic: test timed out after 5m0s\n"),
        ("fail", None, "300"),
    )
    [test] = parse_events("e2erayjob", events).tests
    assert test.status == "fail"
    assert test.cause.startswith("did not finish")
    assert "timed out after 5m0s" in test.cause


def test_gomega_timeout_cause() -> None:
    output = [
        "=== RUN   TestX\n",
        "    rayjob_test.go:50: \n",
        "        Timed out after 180.001s.\n",
        "        Expected\n",
        "            <v1.JobDeploymentStatus>: Initializing\n",
        "        to equal\n",
        "            <v1.JobDeploymentStatus>: Running\n",
    ]
    cause = failure_cause(output)
    assert cause.startswith("rayjob_test.go:50:") or cause.startswith("Timed out")
    assert "Timed out after 180.001s." in cause


def test_report_counts_every_state() -> None:
    ok = upstream_e2e.TestResult("e2e", "TestA", "pass", 1.0)
    bad = upstream_e2e.TestResult("e2e", "TestB", "fail", 2.0, cause="a | b")
    nr = upstream_e2e.TestResult("e2e", "TestC", "not runnable", cause="needs a TPU")
    text = markdown([upstream_e2e.SuiteResult("e2e", 120.0, 1, [ok, bad, nr])])
    assert "3 top-level tests: 1 passed, 1 failed, 0 skipped by the test itself, 1 not" in text
    assert "| e2e | 3 | 1 | 1 | 0 | 1 | 0 | 2.0 |" in text
    assert "a \\| b" in text  # a cause never breaks the table


def test_not_runnable_entries_name_known_suites_and_say_why() -> None:
    for key, reason in upstream_e2e.NOT_RUNNABLE.items():
        suite, _, name = key.partition("/")
        assert suite in upstream_e2e.SUITES, key
        assert name.startswith("Test"), key
        assert reason.strip(), key


def test_suites_are_on_demand_test_binaries() -> None:
    comp = next(c for c in binaries.COMPONENTS if c.name == "upstream-e2e")
    assert comp.test_binaries
    assert comp.on_demand
    assert comp.version == binaries.GO_OPERATOR_VERSION
    assert set(comp.packages) == {f"{s}.test" for s in upstream_e2e.SUITES}
    assert not set(comp.packages) & set(binaries.ALL_BINARIES)


def test_results_round_trip_through_json(tmp_path: Path) -> None:
    suite = upstream_e2e.SuiteResult(
        "e2erayjob",
        61.5,
        1,
        [
            upstream_e2e.TestResult("e2erayjob", "TestRayJob", "pass", 60.0),
            upstream_e2e.TestResult("e2erayjob", "TestRayJobRetry", "fail", 1.5, cause="x"),
        ],
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps(upstream_e2e.results_json([suite])))
    [back] = upstream_e2e.load_results(path)
    assert back == suite
