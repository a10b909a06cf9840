"""Targets: a cold `vpr release` <= 45 s; a warm one (nothing changed) <= 0.02x of a cold
one.

cold: a fresh cache folder, dist and store (uv's download cache stays warm, as on a CI
      machine that has run before): fetch, lock check, two parallel core builds, plugin
      builds, pairing env, every conformance check, manifest, publish to a loopback index;
warm: the same command again with nothing changed.

Next to the cold wall time: the CPU time (user + system) of every process a cold release
ran and waited for, and that time over the usable cores: the floor of the wall time on
this machine, however well the work is spread (a cold release is CPU-bound here).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import (
    REPO,
    console,
    cpu_seconds,
    installed_env,
    median,
    report,
    run,
    timed,
)

SPEC = str(REPO / "buildspec" / "reference.toml")


def main(cold_repeats: int = 2, warm_repeats: int = 3) -> dict:
    import sys

    work = Path(tempfile.mkdtemp(prefix="bench-release-"))

    def release(run_dir: Path) -> None:
        """One release with its own cache, dist and store (a cold run is a fresh clone:
        the store's ledger is signed with its cache's key, so runs never share one)."""
        env = installed_env({**os.environ, "VPR_CACHE_DIR": str(run_dir / "cache")})
        run(
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "release",
            "--spec",
            SPEC,
            "--dist",
            str(run_dir / "dist"),
            "--store",
            str(run_dir / "store"),
            env=env,
            cwd=REPO,
        )

    counter = iter(range(100))
    cpu: list[float] = []

    def cold() -> None:
        run_dir = work / f"cold-{next(counter)}"
        before = cpu_seconds(own=False)
        release(run_dir)
        cpu.append(cpu_seconds(own=False) - before)
        shutil.rmtree(run_dir, ignore_errors=True)

    warm_dir = work / "warm"
    release(warm_dir)  # prime
    rows = {
        "cold release (fresh .vpr)": timed(cold, cold_repeats),
        "warm release (nothing changed)": timed(lambda: release(warm_dir), warm_repeats),
    }
    shutil.rmtree(work, ignore_errors=True)
    result = report(
        "vpr release (reference pairing)",
        rows,
        [("warm / cold", "warm release (nothing changed)", "cold release (fresh .vpr)", 0.02)],
    )
    cores = len(os.sched_getaffinity(0))
    result["cold_cpu_s"] = median(cpu)
    result["cores"] = cores
    result["cpu_floor_s"] = median(cpu) / cores
    console.print(
        f"  cold release CPU (user + sys, every process): median {median(cpu):.1f} s "
        f"({' '.join(f'{c:.1f}' for c in cpu)}); over {cores} cores: {median(cpu) / cores:.1f} s, "
        "the floor of its wall time here"
    )
    return result


if __name__ == "__main__":
    main()
