"""A dotted runtime module (`vendor_sdk.torch`): found in the plugin's imports, absent
without a crash, and a crash of an inenv module keeps its traceback.

The synthetic plugin is tests/plugins/dotted_runtime (its runtime exists nowhere)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC
from tests.unit.test_envrun import Probe
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import BadInput, OutsideFailure
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.inenv import envcheck

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "dotted_runtime" / "src"
PACKAGE = PLUGIN / "dotted_plugin"


def test_dotted_runtime_is_found_in_both_import_forms() -> None:
    assert envcheck._imports_runtime(PACKAGE / "ops.py", "vendor_sdk.torch")
    assert envcheck._imports_runtime(PACKAGE / "kernels.py", "vendor_sdk.torch")
    # a module that shares only a prefix of the name is not the runtime
    assert not envcheck._imports_runtime(PACKAGE / "tools.py", "vendor_sdk.torch")
    assert not envcheck._imports_runtime(PACKAGE / "tools.py", "vendor_sdk")


def test_absent_dotted_runtime_is_not_a_crash() -> None:
    assert envcheck.runtime_importable("vendor_sdk.torch") is False
    assert envcheck.runtime_importable("json.decoder") is True


def test_envcheck_lists_dotted_runtime_modules_in_a_child() -> None:
    """The real inenv script in a child Python with the synthetic plugin on its path."""
    request = {
        "core_version": "0.26.0",
        "packages": ["dotted_plugin"],
        "entry_points": {},
        "runtime_module": "vendor_sdk.torch",
        "expect_runtime": "absent",
    }
    result = envrun.run_in_env(
        sys.executable, Probe("envcheck", request), env={"PYTHONPATH": str(PLUGIN)}, timeout=120
    )
    listed = {m["module"]: m["status"] for m in result["runtime_modules"]}
    assert listed == {"dotted_plugin.kernels": "skipped", "dotted_plugin.ops": "skipped"}
    check = next(c for c in result["checks"] if c["name"] == "runtime modules")
    assert check["status"] == "skipped" and "2 modules import vendor_sdk.torch" in check["detail"]


def test_a_crash_in_the_child_keeps_its_traceback() -> None:
    """envcheck exits 3 with the traceback in its result and nothing on stderr."""
    with pytest.raises(OutsideFailure) as err:
        envrun.run_in_env(sys.executable, Probe("envcheck", {"core_version": "0"}), timeout=120)
    assert "KeyError: 'packages'" in str(err.value)


@pytest.mark.parametrize("module", ["vendor-sdk.torch", "vendor_sdk..torch", "1vendor", "a.b."])
def test_runtime_module_that_is_not_a_dotted_identifier_is_bad_input(
    tmp_path: Path, module: str
) -> None:
    text = REFERENCE_SPEC.read_text().replace('module = "refrt"', f'module = "{module}"')
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        load_spec(path)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith("module = "))
    assert f"{path}:{line}:" in str(err.value) and "runtime" in str(err.value)


def test_dotted_runtime_module_is_valid_in_a_spec(tmp_path: Path) -> None:
    text = REFERENCE_SPEC.read_text().replace('module = "refrt"', 'module = "vendor_sdk.torch"')
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert load_spec(path).runtime_module == "vendor_sdk.torch"


JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest" errors="0" failures="3" tests="4">
<testcase classname="tests.test_a" name="test_parent"><failure
 message="ModuleNotFoundError: No module named 'vendor_sdk'">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_child"><failure
 message="ModuleNotFoundError: No module named 'vendor_sdk.torch'">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_other"><failure
 message="ModuleNotFoundError: No module named 'vendor_sdk_tools'">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_ok"/>
</testsuite></testsuites>
"""


def test_junit_defers_a_missing_parent_of_a_dotted_runtime(tmp_path: Path) -> None:
    from vllm_plugin_release.conform.checks import plugin_tests as pt

    (tmp_path / "j.xml").write_text(JUNIT)
    absent = pt.Deferrals(tuple(pt.absence_signatures("vendor_sdk.torch")))
    counts, outcomes, _ = pt.classify_junit(tmp_path / "j.xml", absent)
    assert outcomes["tests.test_a::test_parent"] == "deferred"
    assert outcomes["tests.test_a::test_child"] == "deferred"
    assert outcomes["tests.test_a::test_other"] == "failed"
    assert counts["deferred"] == 2 and counts["passed"] == 1
