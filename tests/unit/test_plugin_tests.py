"""Plugin test reports: JUnit outcomes, runtime deferral, regressions."""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.conform.checks import plugin_tests as pt

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
    absent = pt.Deferrals(tuple(pt.absence_signatures("ttnn")), runtime_module="ttnn")
    counts, outcomes, _ = pt.classify_junit(path, absent)
    assert counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "deferred": 1, "total": 5}
    assert outcomes["tests.test_a::test_needs_device"] == "deferred"
    # without a runtime to excuse it (runtime present, or hardware runner) it is a failure
    counts, outcomes, _ = pt.classify_junit(path, pt.Deferrals())
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


# -- with the runtime present: deferred from what a test did -----------------------------

PRESENT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="2" failures="2" skipped="2" tests="8">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_api_break" time="0.1">
  <failure message="TypeError: unexpected keyword argument">TypeError</failure></testcase>
<testcase classname="tests.test_dev" name="test_opens_device" time="0.1">
  <failure message="RuntimeError: TT_FATAL">RuntimeError: TT_FATAL @ tt_cluster.cpp:129
info: No chips detected in the cluster</failure></testcase>
<testcase classname="tests.live.test_server.TestServer" name="test_logprobs[1]" time="0.0">
  <error message="failed on setup">AttributeError: 'NoneType' object has no attribute 'rstrip'
</error></testcase>
<testcase classname="tests.test_a" name="test_setup_broke" time="0.0">
  <error message="fixture exploded">boom</error></testcase>
<testcase classname="tests.test_launcher" name="test_mpi" time="0.0">
  <skipped message="vendor_plugin.launcher unavailable: cannot import name 'X' from
 'vllm.v1.engine.utils' (/tmp/env/lib/python3.10/site-packages/vllm/v1/engine/utils.py)"
 /></testcase>
<testcase classname="tests.test_b" name="test_later" time="0.0">
  <skipped message="later"/></testcase>
</testsuite></testsuites>
"""


def test_with_the_runtime_present_a_test_is_deferred_only_for_what_it_did(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(PRESENT)
    deferrals = pt.Deferrals(
        no_device=("No chips detected in the cluster",),
        option_folders=(("tests/live", ("--server-url",)),),
    )
    counts, outcomes, reasons = pt.classify_junit(path, deferrals)
    assert outcomes["tests.test_dev::test_opens_device"] == "deferred"
    assert reasons["tests.test_dev::test_opens_device"] == (
        "needs a device: No chips detected in the cluster"
    )
    live = "tests.live.test_server.TestServer::test_logprobs[1]"
    assert outcomes[live] == "deferred" and "--server-url" in reasons[live]
    # the rest is what it is: the same error outside that folder is an error
    assert outcomes["tests.test_a::test_setup_broke"] == "error"
    assert outcomes["tests.test_a::test_api_break"] == "failed"
    # the suite's two errors are both testcases: none is counted twice
    assert counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 2, "deferred": 2, "total": 7}
    # known-bad: without the signatures both are failures
    counts, outcomes, _ = pt.classify_junit(path, pt.Deferrals())
    assert counts["deferred"] == 0 and counts["error"] == 2 and counts["failed"] == 2


def test_a_skip_because_a_module_does_not_import_is_that_finding(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(PRESENT)
    counts, outcomes, reasons = pt.classify_junit(path, pt.Deferrals())
    run = pt.TestRun("cpu", ["tests"], counts, outcomes, reasons=reasons)
    run.without_paths(Path("/tmp/env"), Path("/nowhere"))
    assert "<env>/lib/python3.10" in reasons["tests.test_launcher::test_mpi"]
    run.count_import_findings({"vendor_plugin.launcher": "ImportError: cannot import name 'X'"})
    assert run.outcomes["tests.test_launcher::test_mpi"] == "failed"
    assert run.outcomes["tests.test_b::test_later"] == "skipped"  # another reason: a skip
    assert run.counts["skipped"] == 1 and run.counts["failed"] == 3
    record = run.to_json()
    assert record["import_findings"]["tests.test_launcher::test_mpi"].startswith(
        "skipped because vendor_plugin.launcher does not import"
    )
    assert record["by_module"]["tests/test_launcher.py"] == {"failed": 1}
    assert record["by_module"]["tests/live/test_server.py"] == {"error": 1}
    # known-bad: no module failed to import, the skip stays a skip
    counts, outcomes, reasons = pt.classify_junit(path, pt.Deferrals())
    again = pt.TestRun("cpu", ["tests"], counts, outcomes, reasons=reasons)
    again.count_import_findings({})
    assert again.outcomes["tests.test_launcher::test_mpi"] == "skipped"


def test_a_conftest_that_requires_options_marks_its_folder(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.lib.testscan import option_folders

    live = tmp_path / "tests" / "live"
    live.mkdir(parents=True)
    (live / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--server-url', action='store', required=True)\n"
        "    parser.addoption('--batch', type=int, default=32)\n"
    )
    (tmp_path / "tests" / "conftest.py").write_text(
        "def pytest_addoption(parser):\n    parser.addoption('--slow', action='store_true')\n"
    )
    assert option_folders(tmp_path, ["tests"]) == {"tests/live": ["--server-url"]}


def test_the_test_file_of_a_test_id() -> None:
    assert pt.test_module("tests.tt.test_logprobs.TestLogprobs::test_x[1-0]") == (
        "tests/tt/test_logprobs.py"
    )
    assert pt.test_module("tests.test_a::test_ok") == "tests/test_a.py"


# -- typed settings and record ----------------------------------------------------------


def test_settings_fill_defaults_and_refuse_a_wrong_kind() -> None:
    import pytest

    cfg = pt.settings({"cpu": ["tests/unit"], "timeout": 60}, ["No chips detected"])
    assert cfg == pt.TestSettings(
        cpu=("tests/unit",), hardware=("tests/unit",), timeout=60, no_device=("No chips detected",)
    )
    assert cfg.paths("cpu") == ["tests/unit"] and cfg.paths("hardware") == ["tests/unit"]
    assert pt.settings({}) == pt.TestSettings()
    # hostile: a bare path where a list belongs (the old dict ran pytest on "t", "e", ...)
    with pytest.raises(pt.BadInput, match=r"\[conformance.plugin_tests\] cpu: expected a list"):
        pt.settings({"cpu": "tests"})
    with pytest.raises(pt.BadInput, match=r"\[runtime\] no_device: expected a list"):
        pt.settings({}, "No chips detected")
    with pytest.raises(pt.BadInput, match="timeout: expected seconds"):
        pt.settings({"timeout": "soon"})
    with pytest.raises(pt.BadInput, match="no test paths for the runner 'gpu'"):
        cfg.paths("gpu")


def test_the_record_writes_the_keys_it_always_had(tmp_path: Path) -> None:
    import json

    run = pt.TestRun(
        "cpu",
        ["tests"],
        {"passed": 1, "failed": 1},
        {"t::b": "failed", "t::a": "passed", "t::d": "deferred"},
        exit_code=1,
        reasons={"t::d": "needs a device: X"},
    )
    base = pt.TestRun("cpu", ["tests"], {"passed": 1}, {"t::b": "passed"})
    record = pt.write_record(tmp_path, run, base, "0.9.0", "0.10.0")
    expected = {
        "stage": "plugin-tests",
        "core_version": "0.10.0",
        "runner": "cpu",
        "paths": ["tests"],
        "counts": {"passed": 1, "failed": 1},
        "failing": ["t::b"],
        "pytest_exit_code": 1,
        "deferred": [],
        "outcomes": {"t::a": "passed", "t::b": "failed", "t::d": "deferred"},
        "by_module": {"t.py": {"deferred": 1, "failed": 1, "passed": 1}},
        "deferred_tests": {"t::d": "needs a device: X"},
        "import_findings": {},
        "baseline": {"core_version": "0.9.0", **base.to_json()},
        "regressions": ["t::b"],
    }
    assert list(record.to_json().items()) == list(expected.items())  # keys in this order
    written = (tmp_path / pt.RECORD).read_text()
    assert json.loads(written) == expected and record.regressions == ["t::b"]
    alone = pt.write_record(tmp_path, run, None, None, "0.10.0")
    assert "baseline" not in alone.to_json() and alone.regressions == []
