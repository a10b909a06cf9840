"""Isolation scans of the real vLLM 0.26.0 source tree and wheel."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vllm_plugin_release.cli import main
from vllm_plugin_release.conform.lib.symbols import TT_SYMBOLS, scan_tree, scan_wheel

# ---------------------------------------------------------------------------
# The real vLLM 0.26.0 tree: known good, and a known-bad mutation of a copy


def test_real_tree_has_no_failing_hit(vllm_source_tree: Path) -> None:
    report = scan_tree(vllm_source_tree, TT_SYMBOLS)
    failing = [h for h in report.hits if h.severity == "fail"]
    assert failing == [], [f"{h.path}:{h.line} {h.kind} {h.text}" for h in failing]
    assert report.files_scanned > 5000
    # the substring `ttnN` in AttnNvfp4QuantPattern is not a hit
    assert not any("AttnNvfp4" in h.context for h in report.hits)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def test_real_tree_copy_with_vendor_import_fails(
    vllm_source_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "core"
    shutil.copytree(vllm_source_tree, copy, symlinks=True, copy_function=_link_or_copy)
    target = copy / "vllm" / "platforms" / "__init__.py"
    original = target.read_text(encoding="utf-8")
    target.unlink()  # never write through a hard link into the real tree
    target.write_text("import ttnn  # injected\n" + original, encoding="utf-8")

    report = scan_tree(copy, TT_SYMBOLS)
    failing = [h for h in report.hits if h.severity == "fail"]
    assert [(h.path, h.line, h.kind, h.text) for h in failing] == [
        ("vllm/platforms/__init__.py", 1, "import", "ttnn")
    ]
    assert main(["scan-core", str(copy), "--symbols", ",".join(TT_SYMBOLS), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["import"] == 1
    assert (vllm_source_tree / "vllm" / "platforms" / "__init__.py").read_text(
        encoding="utf-8"
    ) == original


def test_real_wheel_has_no_failing_hit(vllm_wheel: Path) -> None:
    report = scan_wheel(vllm_wheel, TT_SYMBOLS)
    assert not report.failed, [f"{h.path}:{h.line} {h.kind}" for h in report.hits]
    assert report.files_scanned > 1000
