"""vLLM's load_general_plugins() raising in the pairing env is a finding about the plugin
(`vllm serve` fails the same way wherever its runtime is absent), not a deferral, and the
scorecard gets no host path from it. The synthetic plugin is
tests/plugins/eager_runtime, made importable as an installed distribution."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from vllm_plugin_release.conform.checks import api
from vllm_plugin_release.conform.lib import apicontract

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "eager_runtime"


def _site(folder: Path) -> Path:
    site = folder / "site"
    shutil.copytree(PLUGIN / "src" / "eager_plugin", site / "eager_plugin")
    info = site / "eager_runtime_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: eager-runtime-plugin\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\neager_ops = eager_plugin:register_ops\n"
    )
    return site


def test_a_crashing_general_plugin_fails_the_api_check(vllm_python: Path, tmp_path: Path) -> None:
    site = _site(tmp_path)
    captured = apicontract.capture(
        vllm_python, ["generate"], None, env={"PYTHONPATH": str(site)}, timeout=600
    )
    crash = captured.crash.raw
    assert crash["error"] == "ModuleNotFoundError: No module named 'eager_sdk'"
    assert crash["entry_points"] == ["eager_ops = eager_plugin:register_ops"]
    assert any(f.startswith("eager_plugin/__init__.py:") for f in crash["frames"]), crash
    result = api.general_plugins_crash(captured, "buildspec/contracts/x.json")
    assert result.status == "fail"
    assert "load_general_plugins() raises" in result.summary
    text = json.dumps(result.to_json())
    assert str(tmp_path) not in text and str(vllm_python.parent) not in text
