"""`vpr bisect` on the real case: Tenstorrent's plugin at e3fc849 passes its cpu tests on
vLLM 0.25.1 and fails 14 in tests/test_lane_input_batch.py on 0.26.0. Over the versions
published on PyPI between them (none today: the range is already as narrow as it gets).
Runs only with a vllm-tt-plugin checkout in VPR_TT_PLUGIN_CHECKOUT, and builds both cores."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.required import tt_checkout
from tests.support import vpr


@tt_checkout()
def test_tt_regression_narrowed_to_the_published_versions(
    repo_root: Path, cache_root: Path, tmp_path: Path
) -> None:
    checkout = os.environ["VPR_TT_PLUGIN_CHECKOUT"]
    common = ["--spec", str(repo_root / "buildspec" / "tt.toml"), "--plugin-source", checkout]
    common += ["--dist", str(tmp_path / "dist"), "--cache-dir", str(cache_root)]
    vpr("build-plugin", *common)
    done = vpr("bisect", *common, "--good", "0.25.1", "--bad", "0.26.0", "--json")
    report = json.loads(done.stdout)
    assert report["mode"] == "index" and report["last_good"] == "0.25.1"
    assert report["first_bad"]["candidate"] == "0.26.0"
    failing = report["first_bad"]["failing"]
    assert len(failing) == 14
    assert all(t.startswith("tests.test_lane_input_batch::") for t in failing)
    first_lines = {lines[0] for lines in report["first_bad"]["errors"].values()}
    assert any("MultiGroupBlockTable" in line for line in first_lines)
