"""Scheduling docs of a real vllm-tt-plugin checkout (VPR_TT_PLUGIN_CHECKOUT)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.required import tt_checkout
from vllm_plugin_release.conform.checks import scheduler as scheddocs


@tt_checkout()
def test_tt_plugin_checkout(tmp_path: Path) -> None:
    doc = Path(os.environ["VPR_TT_PLUGIN_CHECKOUT"]) / "docs" / "SCHEDULING.md"
    st = scheddocs.extract_statements(doc.read_text(), plugin_name="vllm-tt-plugin")
    stances = scheddocs.summarize(st)
    assert stances["mixed_batches"]["stance"] == "not_supported"
    assert stances["chunked_prefill"]["stance"] == "conditional"
    assert scheddocs.summarize(st, "upstream")["mixed_batches"]["stance"] == "supported"
