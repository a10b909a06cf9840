"""The API coupling diff on the real case: Tenstorrent's plugin at e3fc849 moved from vLLM
0.25.1 to 0.26.0 (`vpr bump --dry-run` of buildspec/tt.toml pinned back to 0.25.1, both
sdists from PyPI, verified). Its tests fail on 0.26.0 with `MultiGroupBlockTable.__init__()
got an unexpected keyword argument 'max_model_len'` (docs/upstream.md); the static diff
names that very break, and the bump stops until it is approved.
Runs only with a vllm-tt-plugin checkout in VPR_TT_PLUGIN_CHECKOUT."""

from __future__ import annotations

import os
from pathlib import Path

import tomlkit

from tests.required import tt_checkout
from tests.support import REPO, vpr

SDIST_0251 = "ddbdec3f1c0f21afa70b7eb6ddf3faa29d26b1302ee4b5d5e00ec3af41b0c2e4"
BREAK = "keyword:vllm.v1.worker.block_table.MultiGroupBlockTable.__init__:max_model_len"


@tt_checkout()
def test_the_tt_plugins_break_is_found_and_stops_the_bump(cache_root: Path, tmp_path: Path):
    spec = tomlkit.parse((REPO / "buildspec" / "tt.toml").read_text())
    spec["name"] = "tt-0.25.1"
    spec["core"]["version"] = "0.25.1"
    spec["core"]["source"]["filename"] = "vllm-0.25.1.tar.gz"
    spec["core"]["source"]["sha256"] = SDIST_0251
    spec["build"]["constraints"] = str(REPO / spec["build"]["constraints"])
    path = tmp_path / "tt-0.25.1.toml"
    path.write_text(tomlkit.dumps(spec))
    done = vpr("bump", "--spec", str(path), "--core", "0.26.0", "--dry-run", "--plugin-source",
               os.environ["VPR_TT_PLUGIN_CHECKOUT"], "--cache-dir", str(cache_root),
               cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"{BREAK}: vllm.v1.worker.block_table.MultiGroupBlockTable.__init__ no longer " \
        "takes the keyword 'max_model_len' the plugin passes" in done.stderr  # fmt: skip
    assert "src/vllm_tt_plugin/input_batch.py:" in done.stderr
    assert f"--approve {BREAK}" in done.stderr
    assert "### Core API the plugin uses" in done.stdout
