"""Issue 16 targets: a cold `vpr release` <= 60 s; a warm one (nothing changed) <= 0.02x
of a cold one (it was 0.010x: keep it).

cold: a fresh cache folder and dist (uv's download cache stays warm, as on a CI
      machine that has run before): fetch, lock check, two parallel core builds, plugin
      builds, pairing env, every conformance check, manifest, publish to a loopback index;
warm: the same command again with nothing changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import REPO, installed_env, report, run, timed

SPEC = str(REPO / "buildspec" / "reference.toml")


def main(cold_repeats: int = 2, warm_repeats: int = 3) -> dict:
    import sys

    work = Path(tempfile.mkdtemp(prefix="bench-release-"))

    def release(cache: Path) -> None:
        env = installed_env({**os.environ, "VPR_CACHE_DIR": str(cache)})
        run(
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "release",
            "--spec",
            SPEC,
            "--dist",
            str(work / "dist"),
            "--store",
            str(work / "store"),
            env=env,
            cwd=REPO,
        )

    counter = iter(range(100))

    def cold() -> None:
        cache = work / f"cache-{next(counter)}"
        release(cache)
        shutil.rmtree(cache, ignore_errors=True)

    warm_cache = work / "warm"
    release(warm_cache)  # prime
    rows = {
        "cold release (fresh .vpr)": timed(cold, cold_repeats),
        "warm release (nothing changed)": timed(lambda: release(warm_cache), warm_repeats),
    }
    shutil.rmtree(work, ignore_errors=True)
    return report(
        "vpr release (reference pairing)",
        rows,
        [("warm / cold", "warm release (nothing changed)", "cold release (fresh .vpr)", 0.02)],
    )


if __name__ == "__main__":
    main()
