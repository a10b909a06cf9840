"""The TT matrix (vllm-tt-plugin against every vLLM release from 0.25.1 to the newest, a column
per core): cold (a fresh .vpr, uv's download cache warm) and the warm re-run (every column's
record reused), with what each column's phases cost. Targets: cold <= 25 min, warm <= 90 s.

Opt-in by name (`nox -s bench -- matrix`): a cold run is many minutes. Needs a vllm-tt-plugin
clone holding the pinned commit: VPR_TT_PLUGIN_CHECKOUT (else the bench is skipped).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import REPO, console, installed_env, median, run, timed

LOWEST = "0.25.1"


def _vpr(work: Path, checkout: str, *args: str, ok: tuple[int, ...] = (0,)) -> None:
    env = installed_env({**os.environ, "VPR_CACHE_DIR": str(work / "cache")})
    spec = str(REPO / "buildspec" / "tt.toml")
    run(sys.executable, "-m", "vllm_plugin_release", *args, "--spec", spec, "--dist",
        str(work / "dist"), "--plugin-source", checkout, env=env, cwd=REPO, ok=ok)  # fmt: skip


def main(warm_repeats: int = 3) -> dict:
    checkout = os.environ.get("VPR_TT_PLUGIN_CHECKOUT")
    if not checkout:
        console.print("[yellow]bench matrix skipped: set VPR_TT_PLUGIN_CHECKOUT to a clone")
        return {"skipped": "VPR_TT_PLUGIN_CHECKOUT not set"}
    work = Path(tempfile.mkdtemp(prefix="bench-matrix-"))
    _vpr(work, checkout, "build-plugin")
    matrix = ("matrix", "run", "--lowest", LOWEST)
    cold = timed(lambda: _vpr(work, checkout, *matrix, ok=(0, 1)), 1)
    phases = json.loads((work / "dist" / "tt" / "matrix-timing.json").read_text())["columns"]
    warm = timed(lambda: _vpr(work, checkout, *matrix, ok=(0, 1)), warm_repeats)
    shutil.rmtree(work, ignore_errors=True)
    names = sorted({p for column in phases.values() for p in column})
    per_phase = {p: median([c.get(p, 0.0) for c in phases.values()]) for p in names}
    result = {
        "columns": len(phases),
        "cold_s": cold[0],
        "warm_s": median(warm),
        "warm / cold": median(warm) / cold[0],
        "phase_medians_s": per_phase,
        "phases_s": phases,
    }
    console.print(f"TT matrix, {len(phases)} columns: cold {cold[0]:.0f} s (target 1500 s), "
                  f"warm {median(warm):.1f} s (target 90 s)")  # fmt: skip
    for phase, seconds in per_phase.items():
        console.print(f"  a column's {phase}: median {seconds:.1f} s")
    return result


if __name__ == "__main__":
    main()
