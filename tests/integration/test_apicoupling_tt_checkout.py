"""The API coupling diff on the real case: Tenstorrent's plugin at e3fc849 moved from vLLM
0.25.1 to 0.26.0 (`vpr bump --dry-run` of buildspec/tt.toml pinned back to 0.25.1, both
sdists from PyPI, verified). Its tests fail on 0.26.0 with `MultiGroupBlockTable.__init__()
got an unexpected keyword argument 'max_model_len'` (docs/upstream.md); the static diff
names that very break, and the bump stops until it is approved. Then the report between
released cores (0.25.1 to 0.29.0) against what the plugin's imports hit there.
Runs only with a vllm-tt-plugin checkout in VPR_TT_PLUGIN_CHECKOUT; the released cores'
sdists come from PyPI, verified by their pinned sha256."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomlkit

from tests.required import tt_checkout
from tests.support import REPO, vpr
from vllm_plugin_release.buildspec.model import SdistSource
from vllm_plugin_release.conform.lib import apicoupling as ac
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.edges.fetch import Fetcher

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


# The released cores' sdists from PyPI (sha256 pinned), read from VPR_VLLM_SDISTS, a folder
# of vllm-VERSION.tar.gz files: `pip download --no-deps --no-binary :all: vllm==0.29.0`.
SDISTS = {
    "0.25.1": SDIST_0251,
    "0.26.0": "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502",
    "0.27.1": "eec2d54d137ac1e59cb4c39226dfee1943eefc8f4788f5821d7300d6acbdb646",
    "0.28.0": "ac96dd0ec5be9c13f2aa4bfb50498c4727110406f6e4980b58a4097e4d18634a",
    "0.29.0": "c03feb07943ecae9e69e7dc424d7c5569ecf8d1292513aef2a4de67af381cd97",
}
PAIRS = [("0.25.1", "0.26.0"), ("0.26.0", "0.27.1"), ("0.27.1", "0.28.0"), ("0.28.0", "0.29.0")]
LAUNCHER = ("vllm.v1.engine.utils.CoreEngineLauncher", "vllm.v1.engine.utils.EngineLaunchPlan")


def _core_tree(version: str, cache_root: Path) -> Path:
    """vLLM `version`'s sdist from PyPI, verified against its pinned sha256 and extracted
    once into the tests' cache (the fetch stage's own download and extraction)."""
    source = SdistSource(
        index="https://pypi.org/simple", filename=f"vllm-{version}.tar.gz", sha256=SDISTS[version]
    )
    return Fetcher(Cache(cache_root)).source_tree(source, "vllm")


@tt_checkout()
@pytest.mark.parametrize(("old", "new"), PAIRS)
def test_the_tt_plugin_against_released_cores(old: str, new: str, cache_root: Path):
    """The report between released cores finds what the plugin's import really hits: the
    launcher names it needs are in none of these cores, and vLLM 0.29.0 dropped the module
    `vllm.entrypoints.openai.engine` its tool and reasoning parsers import from."""
    old_tree, new_tree = _core_tree(old, cache_root), _core_tree(new, cache_root)
    plugin = Path(os.environ["VPR_TT_PLUGIN_CHECKOUT"])
    report = ac.coupling(plugin, old_tree, new_tree, versions=(old, new))
    found = {c.id: c for c in report.changes}
    for name in LAUNCHER:
        assert found[f"missing:{name}"].detail == (
            f"{name}: missing in {new}; missing in the old core too ({old})"
        )
        assert found[f"missing:{name}"].uses[0] == "src/vllm_tt_plugin/launcher.py:19"
    observed = {"vllm_tt_plugin.launcher": "ImportError: cannot import name 'CoreEngineLauncher' "
                "from 'vllm.v1.engine.utils'"}  # fmt: skip
    module = "removed:vllm.entrypoints.openai.engine.protocol"
    if new == "0.29.0":
        assert found[module].detail.endswith("; the module vllm.entrypoints.openai.engine is gone")
        observed["vllm_tt_plugin.gemma4_tool_parser"] = (
            "ModuleNotFoundError: No module named 'vllm.entrypoints.openai.engine'"
        )
    else:
        assert module not in found
    if old == "0.25.1":
        assert BREAK in found  # the break bump stops at (above), found statically too
    traced = ac.trace_failures(report, observed, {})
    assert traced.recall == 1.0, traced.missed
    assert f"missing:{LAUNCHER[0]}" in traced.traced["vllm_tt_plugin.launcher"]
