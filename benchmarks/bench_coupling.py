"""The API coupling report of `vpr bump` for two released cores (vLLM 0.28.0 -> 0.29.0):
cold (no module facts cached), warm (every module's facts cached by sha256) and, side by
side, the report before the facts cache (the code of `base_commit`).

The plugin is the TT plugin's checkout when VPR_TT_PLUGIN_CHECKOUT names one, else this
repository's reference plugin. The sdists come from the pipeline's verified cache, fetched
when missing (or taken from VPR_VLLM_SDISTS, a folder of vllm-VERSION.tar.gz, and checked
against the same sha256). Targets: cold <= 10 s, warm <= 2 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, base_commit, console, report, timed

CORES = {
    "0.28.0": "ac96dd0ec5be9c13f2aa4bfb50498c4727110406f6e4980b58a4097e4d18634a",
    "0.29.0": "c03feb07943ecae9e69e7dc424d7c5569ecf8d1292513aef2a4de67af381cd97",
}
TARGETS = {"cold": 10.0, "warm": 2.0}


def core_tree(version: str) -> Path:
    """vLLM `version`'s verified sdist, extracted by the pipeline's own fetcher."""
    from vllm_plugin_release.buildspec.model import SdistSource
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges.fetch import Fetcher

    cache = Cache(Path(os.environ.get("VPR_CACHE_DIR", REPO / ".vpr")))
    filename = f"vllm-{version}.tar.gz"
    given = Path(os.environ.get("VPR_VLLM_SDISTS", "/nonexistent")) / filename
    cas = cache.cas_path(CORES[version])
    if given.is_file() and not cas.exists():  # checked against its sha256 by the fetcher
        cas.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(given, cas)
    source = SdistSource("https://pypi.org/simple", filename, CORES[version])
    return Fetcher(cache).source_tree(source, "vllm")


def _plugin() -> Path:
    given = os.environ.get("VPR_TT_PLUGIN_CHECKOUT")
    return Path(given) if given else REPO / "plugin" / "reference"


def _before(commit: str) -> Any:
    """The coupling module as it was at `commit` (stdlib only: loaded from its text)."""
    path = "src/vllm_plugin_release/conform/lib/apicoupling.py"
    text = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("apicoupling_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(text, f"{commit[:12]}:{path}", "exec"), module.__dict__)
    return module


def main(repeats: int = 5, before: str | None = None) -> dict[str, Any]:
    from vllm_plugin_release.conform.lib import apicoupling as ac

    old, new = core_tree("0.28.0"), core_tree("0.29.0")
    plugin = _plugin()
    work = Path(tempfile.mkdtemp(prefix="bench-coupling-"))
    counter = iter(range(10_000))
    warm_cache = work / "warm"
    found = ac.coupling(plugin, old, new, cache_dir=warm_cache)  # fills the warm cache

    def cold() -> None:
        ac.coupling(plugin, old, new, cache_dir=work / f"cold-{next(counter)}")

    def warm() -> None:
        ac.coupling(plugin, old, new, cache_dir=warm_cache)

    commit = subprocess.run(
        ["git", "rev-parse", base_commit(before, "src/vllm_plugin_release/conform/lib/apicore.py")],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    earlier = _before(commit)
    rows = {
        "cold (no module facts cached)": timed(cold, repeats),
        "warm (module facts cached)": timed(warm, repeats),
        f"before the facts cache ({commit[:12]})": timed(
            lambda: earlier.coupling(plugin, old, new), repeats
        ),
    }
    shutil.rmtree(work, ignore_errors=True)
    result = report(f"API coupling report, vLLM 0.28.0 -> 0.29.0, {plugin.name}", rows, [])
    medians = result["medians"]
    result["cold_s"] = medians["cold (no module facts cached)"]
    result["warm_s"] = medians["warm (module facts cached)"]
    result["before_s"] = medians[f"before the facts cache ({commit[:12]})"]
    result["report"] = {
        "symbols": found.symbols,
        "breaking": len(found.changes),
        "review": len(found.review),
        "unresolved": len(found.unresolved),
    }
    for case, target in TARGETS.items():
        value = result[f"{case}_s"]
        verdict = "meets" if value <= target else "MISSES"
        console.print(f"{case}: {value:.2f} s (target <= {target} s): {verdict}")
    result["accuracy"] = _accuracy()
    return result


def _accuracy() -> dict[str, Any] | None:
    """The report's accuracy across the TT matrix, when one was run here (`vpr matrix run
    --spec buildspec/tt.toml`): recall and precision as matrix.json has them."""
    path = REPO / "dist" / "tt" / "matrix.json"
    if not path.is_file():
        console.print("coupling accuracy: no dist/tt/matrix.json here (run the TT matrix)")
        return None
    acc = json.loads(path.read_text())["accuracy"]
    console.print(
        f"coupling accuracy across the TT matrix: recall {acc['recall']} ({acc['traced']} of "
        f"{acc['observed']} failures traced), precision {acc['precision']} ({acc['confirmed']} "
        f"of {acc['breaking']} breaking changes confirmed); missed: {'; '.join(acc['missed'])}"
    )
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", help="the commit to compare with (default: before apicore)")
    args = parser.parse_args()
    main(args.repeats, args.before)
