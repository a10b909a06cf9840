"""The plugin's tests where its runtime is absent (issue 12, item 4), with the synthetic
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

from vllm_plugin_release.conform import plugin_tests as pt
from vllm_plugin_release.conform.testscan import imports_at_import_time, runtime_importers

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
    return pt.run_tests(Path(sys.executable), root, "cpu", cfg, tmp_path / "j.xml", "eager_sdk")


def test_import_time_scan() -> None:
    tests = PLUGIN / "tests"
    assert imports_at_import_time(tests / "test_ops.py", "eager_sdk")
    assert not imports_at_import_time(tests / "test_config.py", "eager_sdk")
    # imported inside a function: only when that test runs
    assert not imports_at_import_time(PLUGIN / "src" / "eager_plugin" / "__init__.py", "eager_sdk")
    assert runtime_importers(PLUGIN, ["tests"], [], "eager_sdk") == ["tests/test_ops.py"]
    assert runtime_importers(PLUGIN, ["tests"], ["tests/test_ops.py"], "eager_sdk") == []


def test_absent_runtime_offline_and_collection_errors(plugin: Path, tmp_path: Path) -> None:
    run = _run(plugin, tmp_path, absence_signatures=["EagerSDKUnavailable"])
    outcomes = {k.rsplit("::", 1)[-1]: v for k, v in run.outcomes.items()}
    assert outcomes["test_platform_is_inactive_without_the_runtime"] == "passed"
    assert outcomes["test_kernel_table"] == "deferred"
    assert outcomes["test_tokenizer_from_the_hub"] == "network"
    assert "tests/test_ops.py" in run.deferred  # found by the scan, not collected
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
        ignore=["tests/test_broken.py"],
        absence_signatures=["EagerSDKUnavailable"],
    )
    ops = [v for k, v in run.outcomes.items() if "test_ops" in k]
    assert ops == ["deferred"]
    assert "tests/test_ops.py" not in run.deferred
    assert not run.failing
