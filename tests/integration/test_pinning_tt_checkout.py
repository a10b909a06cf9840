"""Pinning against a real vllm-tt-plugin checkout (VPR_TT_PLUGIN_CHECKOUT)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.required import tt_checkout
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning


@tt_checkout()
def test_tt_plugin_checkout(repo_root: Path) -> None:
    checkout = Path(os.environ["VPR_TT_PLUGIN_CHECKOUT"])
    spec = load_spec(repo_root / "buildspec" / "tt.toml")
    result = pinning.check(spec, checkout)
    assert result.status == "fail"
    assert "0.25.1" in result.summary and "0.26.0" in result.summary
    assert any("common.txt" in f["url"] for f in result.details["unhashed_fetches"])
    assert any(e["target"] == "." for e in result.details["editable_installs"])
