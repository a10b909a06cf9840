"""The headline pairing's speed: a cold TT release (vLLM 0.26.0 + vllm-tt-plugin
on CPython 3.10 with the real ttnn, uv's cache already holding torch) against a
cold reference release, run alternately in this one process run, and a warm TT release
(nothing changed) against the cold one. Targets: TT cold <= 2.0x reference cold; TT warm
<= 0.05x TT cold.

Needs a vllm-tt-plugin clone holding the pinned commit: VPR_TT_PLUGIN_CHECKOUT (else the
bench says so and is skipped). Nothing is published (`--no-publish`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import REPO, console, installed_env, median, report, run, timed


def _release(spec: str, run_dir: Path, checkout: str | None) -> None:
    env = installed_env({**os.environ, "VPR_CACHE_DIR": str(run_dir / "cache")})
    extra = ["--plugin-source", checkout] if checkout else []
    run(
        sys.executable,
        "-m",
        "vllm_plugin_release",
        "release",
        "--spec",
        spec,
        "--dist",
        str(run_dir / "dist"),
        "--no-publish",
        *extra,
        env=env,
        cwd=REPO,
        ok=(0, 1),  # a verdict: pilot, or lab for the plugin's findings
    )


def main(cold_repeats: int = 2, warm_repeats: int = 3) -> dict:
    checkout = os.environ.get("VPR_TT_PLUGIN_CHECKOUT")
    if not checkout:
        console.print("[yellow]bench tt skipped: set VPR_TT_PLUGIN_CHECKOUT to a clone")
        return {"skipped": "VPR_TT_PLUGIN_CHECKOUT not set"}
    tt = str(REPO / "buildspec" / "tt.toml")
    reference = str(REPO / "buildspec" / "reference.toml")
    work = Path(tempfile.mkdtemp(prefix="bench-tt-"))
    counter = iter(range(1000))

    def cold(spec: str, source: str | None):
        def once() -> None:
            run_dir = work / f"cold-{next(counter)}"
            _release(spec, run_dir, source)
            shutil.rmtree(run_dir, ignore_errors=True)

        return once

    warm_dir = work / "warm"
    _release(tt, warm_dir, checkout)  # prime: the downloads are in uv's cache from here on
    rows: dict[str, list[float]] = {"tt cold": [], "reference cold": []}
    for _ in range(cold_repeats):  # alternately, so both see the same machine
        rows["tt cold"] += timed(cold(tt, checkout), 1)
        rows["reference cold"] += timed(cold(reference, None), 1)
    rows["tt warm"] = timed(lambda: _release(tt, warm_dir, checkout), warm_repeats)
    shutil.rmtree(work, ignore_errors=True)
    result = report(
        "vpr release: TT (3.10, real ttnn) against the reference pairing",
        rows,
        [
            ("tt cold / reference cold", "tt cold", "reference cold", 2.0),
            ("tt warm / tt cold", "tt warm", "tt cold", 0.05),
        ],
    )
    result["tt_cold_median_s"] = median(rows["tt cold"])
    return result


if __name__ == "__main__":
    main()
