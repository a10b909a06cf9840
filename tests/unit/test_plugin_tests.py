"""Plugin test reports: JUnit outcomes, runtime deferral, regressions."""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.conform import plugin_tests as pt

# -- test reports ---------------------------------------------------------------------

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="2" skipped="1" tests="5">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad" time="0.1">
  <failure message="assert 1 == 2">assert 1 == 2</failure></testcase>
<testcase classname="tests.test_a" name="test_needs_device" time="0.1">
  <failure message="ModuleNotFoundError: No module named 'ttnn'">E ModuleNotFoundError: No module
  named 'ttnn'</failure></testcase>
<testcase classname="tests.test_b" name="test_skip" time="0.0">
  <skipped message="later"/></testcase>
<testcase classname="tests.test_b" name="test_err" time="0.0">
  <error message="fixture exploded">boom</error></testcase>
</testsuite></testsuites>
"""


def test_junit_outcomes_and_runtime_deferral(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    counts, outcomes = pt.parse_junit(path, "ttnn")
    assert counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "deferred": 1, "total": 5}
    assert outcomes["tests.test_a::test_needs_device"] == "deferred"
    # without a runtime to excuse it (runtime present, or hardware runner) it is a failure
    counts, outcomes = pt.parse_junit(path, None)
    assert counts["failed"] == 2 and counts["deferred"] == 0


def test_regressions_are_pass_then_fail_only() -> None:
    base = pt.TestRun(
        "cpu", ["tests"], outcomes={"a": "passed", "b": "failed", "c": "passed", "d": "deferred"}
    )
    new = pt.TestRun(
        "cpu",
        ["tests"],
        outcomes={"a": "failed", "b": "failed", "c": "passed", "d": "failed", "e": "error"},
    )
    assert pt.regressions(base, new) == ["a"]
