"""The plugin's tests where its runtime is absent, with the synthetic
plugin tests/plugins/eager_runtime run by real pytest in a child process:

- a test module importing the runtime at import time is found by reading it, left out
  and deferred (no hand-written `ignore`);
- a failure carrying a spec-declared absence signature is deferred;
- a test that needs the Hugging Face Hub runs offline and is classified `network`;
- a collection error that is not about the runtime does not stop the run, and fails it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.conform.lib.testscan import imports_at_import_time, runtime_importers

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "eager_runtime"


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "eager"
    shutil.copytree(PLUGIN, root)
    (root / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.setenv("PYTHONPATH", str(root / "src"))
    return root


def _run(root: Path, tmp_path: Path, **table: object) -> pt.TestRun:
    cfg = pt.settings({"cpu": ["tests"], **table})
    return pt.run_tests(
        Path(sys.executable), pt.Suite(root, "cpu", cfg, "eager_sdk"), tmp_path / "j.xml"
    )


def test_import_time_scan() -> None:
    tests = PLUGIN / "tests"
    assert imports_at_import_time(tests / "test_ops.py", "eager_sdk")
    assert not imports_at_import_time(tests / "test_config.py", "eager_sdk")
    # imported inside a function: only when that test runs
    assert not imports_at_import_time(PLUGIN / "src" / "eager_plugin" / "__init__.py", "eager_sdk")
    # also through the plugin's modules (loader -> kernels) and a helper of a conftest;
    # not through a module that guards its runtime import (eager_plugin.safe)
    found = ["tests/device", "tests/test_indirect.py", "tests/test_ops.py"]
    assert runtime_importers(PLUGIN, ["tests"], [], "eager_sdk") == found
    assert runtime_importers(PLUGIN, ["tests"], found, "eager_sdk") == []


def test_the_indirect_scan_follows_relative_imports_and_packages_bounded(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "__init__.py").write_text("from .deep import x\n")
    (root / "pkg" / "sub" / "deep.py").write_text("from vendor_sdk import torch\nx = 1\n")
    (root / "pkg" / "cycle_a.py").write_text("from pkg import cycle_b\n")
    (root / "pkg" / "cycle_b.py").write_text("from pkg import cycle_a\n")
    (root / "pkg" / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import vendor_sdk.torch\n"
    )
    tests = {
        "test_package_init.py": "import pkg.sub\n",  # pkg/sub/__init__ -> deep -> runtime
        "test_cycle.py": "from pkg import cycle_a\n",
        "test_typed.py": "import pkg.typed\n",
        "test_parent_only.py": "import vendor_sdk\n",  # the parent package is not the runtime
    }
    for name, text in tests.items():
        (root / "tests" / name).write_text(text)
    assert runtime_importers(root, ["tests"], [], "vendor_sdk.torch") == [
        "tests/test_package_init.py"
    ]


def test_absent_runtime_offline_and_collection_errors(plugin: Path, tmp_path: Path) -> None:
    run = _run(plugin, tmp_path, absence_signatures=["EagerSDKUnavailable"])
    outcomes = {k.rsplit("::", 1)[-1]: v for k, v in run.outcomes.items()}
    assert outcomes["test_platform_is_inactive_without_the_runtime"] == "passed"
    assert outcomes["test_kernel_table"] == "deferred"
    assert outcomes["test_tokenizer_from_the_hub"] == "network"
    assert "tests/test_ops.py" in run.deferred  # found by the scan, not collected
    assert {"tests/test_indirect.py", "tests/device"} <= set(run.deferred)  # through the plugin
    assert outcomes["test_runtime_is_reported_absent"] == "passed"  # a guarded import runs
    assert not any("test_ops" in k for k in run.outcomes)
    # the broken import is an error, and it fails the run
    assert [t for t in run.failing if "test_broken" in t], run.outcomes
    assert run.counts["network"] == 1 and run.counts["deferred"] == 1


def test_without_the_declared_signature_the_runtime_failure_is_a_failure(
    plugin: Path, tmp_path: Path
) -> None:
    run = _run(plugin, tmp_path)
    assert any(t.endswith("test_kernel_table") for t in run.failing)


def test_without_the_scan_the_import_time_runtime_is_a_deferred_collection_error(
    plugin: Path, tmp_path: Path
) -> None:
    run = _run(
        plugin,
        tmp_path,
        scan_imports=False,
        # a conftest that cannot be imported stops pytest itself: only the scan finds it
        ignore=["tests/test_broken.py", "tests/device"],
        absence_signatures=["EagerSDKUnavailable"],
    )
    ops = [v for k, v in run.outcomes.items() if "test_ops" in k or "test_indirect" in k]
    assert ops == ["deferred", "deferred"]
    assert "tests/test_ops.py" not in run.deferred
    assert not run.failing
