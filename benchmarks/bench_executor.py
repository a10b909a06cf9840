"""A warm `vpr release` and `vpr --help` by this code against the code at `--base REV`,
each <= 1.05x (first written for the stage graph's executor; `--base` names any change).

A warm `vpr release` (nothing changed: every stage reuses its cached result) by this code
and by the code before the stage graph (the parent of the commit that added
core/stagegraph.py, or `--base REV`), in turn, A B A B ..., each with its own dist and
store folders and one shared cache (the project's `.vpr`, or `--cache DIR`; a cold
release fills it first when it is empty). Both read the same spec, so the ratio is the
executor's cost and whatever else changed between the two; its median is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_install import unpack
from benchmarks.common import REPO, base_commit, console, cpu_seconds, installed_env, median, run

TARGET = 1.05  # graph / before, end to end
FIRST_FILE = "src/vllm_plugin_release/core/stagegraph.py"
SPEC = str(REPO / "buildspec" / "reference.toml")


def _release(src: Path, cache: Path, folder: Path) -> tuple[float, float]:
    """One release by the code in `src` (wall, CPU seconds of its processes)."""
    env = installed_env(
        {
            **os.environ,
            "VPR_CACHE_DIR": str(cache),
            "PYTHONPATH": str(src),
            "VPR_GUARD_SOURCE": str(REPO / "guard"),  # one guard for both (its own wheel)
        }
    )
    cpu = cpu_seconds(own=False)
    start = time.perf_counter()
    run(sys.executable, "-m", "vllm_plugin_release", "release", "--spec", SPEC,
        "--dist", str(folder / "dist"), "--store", str(folder / "store"), env=env, cwd=REPO,
        ok=(0, 1))  # fmt: skip
    return time.perf_counter() - start, cpu_seconds(own=False) - cpu


def _help(src: Path) -> float:
    """One `vpr --help` by the code in `src`: the start-up every command pays."""
    env = installed_env({**os.environ, "PYTHONPATH": str(src)})
    start = time.perf_counter()
    run(sys.executable, "-m", "vllm_plugin_release", "--help", env=env, cwd=REPO)
    return time.perf_counter() - start


def main(repeats: int = 7, base: str | None = None, cache: Path | None = None) -> dict[str, Any]:
    rev = base_commit(base, FIRST_FILE)
    cache = cache or Path(os.environ.get("VPR_CACHE_DIR") or REPO / ".vpr")
    with tempfile.TemporaryDirectory(prefix="vpr-bench-executor-") as tmp:
        root = Path(tmp)
        sources = {"graph": REPO / "src", "before": unpack(rev, root / "before")}
        for name, src in sources.items():  # fills the cache, then delivers into each dist
            _release(src, cache, root / name)
        rows: dict[str, list[float]] = {k: [] for k in ("graph", "before", "graph cpu",
                                                        "before cpu", "graph help",
                                                        "before help")}  # fmt: skip
        for i in range(repeats):  # interleaved, in turn first: both see the same load
            for name in ("graph", "before")[:: 1 if i % 2 else -1]:
                wall, cpu = _release(sources[name], cache, root / name)
                rows[name].append(wall)
                rows[f"{name} cpu"].append(cpu)
                rows[f"{name} help"].extend(_help(sources[name]) for _ in range(3))
    ratio = median(rows["graph"]) / median(rows["before"])
    ratio_cpu = median(rows["graph cpu"]) / median(rows["before cpu"])
    ratio_help = median(rows["graph help"]) / median(rows["before help"])
    for name, values in rows.items():
        console.print(
            f"  {name}: median {median(values):.3f} s ({' '.join(f'{v:.2f}' for v in values)})"
        )
    ok = "meets" if ratio <= TARGET else "MISSES"
    console.print(f"  warm release, graph / before ({rev}): {ratio:.3f}x (target <= {TARGET}x: "
                  f"{ok}); CPU time {ratio_cpu:.3f}x; vpr --help {ratio_help:.3f}x")  # fmt: skip
    return {
        "base": rev,
        "medians": {k: median(v) for k, v in rows.items()},
        "ratios": {
            "graph / before": {"ratio": ratio, "target": TARGET, "met": ratio <= TARGET},
            "graph / before, cpu": {"ratio": ratio_cpu, "target": None, "met": None},
            "help / before": {"ratio": ratio_help, "target": TARGET, "met": ratio_help <= TARGET},
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--base", default=None, help="the code before (default: see above)")
    parser.add_argument("--cache", type=Path, default=None, help="the shared cache folder")
    args = parser.parse_args()
    print(json.dumps(main(args.repeats, args.base, args.cache), indent=2))
