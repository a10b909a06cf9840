"""`vpr bisect` on the real case: Tenstorrent's plugin at e3fc849 passes its cpu tests on
vLLM 0.25.1 and fails 14 in tests/test_lane_input_batch.py on 0.26.0. Over the versions
published on PyPI between them (none today: the range is already as narrow as it gets).
Runs only with a vllm-tt-plugin checkout in VPR_TT_PLUGIN_CHECKOUT, and builds both cores."""

from __future__ import annotations

import json
import os
from collections import Counter
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
    # every host test runs with the runtime present (no hand list), as in the release: the
    # model-runner tests that build the block table regress with the lane tests
    files = Counter(t.split("::")[0] for t in failing)
    assert files == {
        "tests.test_lane_input_batch": 14,
        "tests.test_model_runner": 7,
        "tests.test_lane_model_runner": 5,
    }, files
    first_lines = {lines[0] for lines in report["first_bad"]["errors"].values()}
    assert all(
        "MultiGroupBlockTable.__init__() got an unexpected keyword" in x for x in first_lines
    )
