"""Tag to verdict, the pipeline's own part: `vpr bump` to a new core release plus the CPU
pipeline (`vpr release --runner cpu --no-publish`) on the bumped spec, on a warm runner.

The runner is warm as a CI runner that has run the pipeline before is: the cache folder
($VPR_CACHE_DIR, default .vpr) holds earlier downloads, builds and environments. Each run
starts from a clean clone of this repository (committed state) whose reference spec is
moved back to vLLM 0.25.1, then bumps it to 0.26.0 (sdist from the index, locks
re-resolved, migration report) and runs the CPU pipeline on the bumped spec. Printed:
the median of each part and of the sum, and the sum's share of the 24 hours the issue
allows from a tag to a signed verdict (the workflow's queueing and the hardware runner
come on top).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import REPO, console, median, report, run, timed

OLD = ("0.25.1", "ddbdec3f1c0f21afa70b7eb6ddf3faa29d26b1302ee4b5d5e00ec3af41b0c2e4")
NEW = "0.26.0"
DAY = 24 * 3600.0


def _clone(work: Path) -> Path:
    """A clean clone of the committed repository, its reference spec pinned to OLD."""
    target = work / "repo"
    shutil.rmtree(target, ignore_errors=True)
    run("git", "clone", "--quiet", "--", str(REPO), str(target))
    spec = "buildspec/reference.toml"
    for key, value in (
        ("core.version", f'"{OLD[0]}"'),
        ("core.source.filename", f'"vllm-{OLD[0]}.tar.gz"'),
        ("core.source.sha256", f'"{OLD[1]}"'),
    ):
        run(
            sys.executable, "-m", "vllm_plugin_release", "spec", "set", spec, key, value, cwd=target
        )
    return target


def main(repeats: int = 3) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-upstream-"))
    env = {**os.environ, "VPR_CACHE_DIR": os.environ.get("VPR_CACHE_DIR", str(REPO / ".vpr"))}
    state: dict[str, Path] = {}

    def bump() -> None:
        repo = _clone(work)  # not timed apart: a clone is what a CI checkout costs
        state["repo"] = repo
        report_path = work / "migration.md"
        run(
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "bump",
            "--spec",
            "buildspec/reference.toml",
            "--core",
            NEW,
            "--out",
            "buildspec/bumped.toml",
            "--report",
            str(report_path),
            env=env,
            cwd=repo,
        )

    def pipeline() -> None:
        repo = state["repo"]
        run(
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "release",
            "--spec",
            "buildspec/bumped.toml",
            "--runner",
            "cpu",
            "--no-publish",
            env=env,
            cwd=repo,
        )

    bump()
    pipeline()  # prime: the runner is warm
    rows: dict[str, list[float]] = {"vpr bump (clone, re-lock, report)": [], "CPU pipeline": []}
    for _ in range(repeats):
        rows["vpr bump (clone, re-lock, report)"] += timed(bump, 1)
        rows["CPU pipeline"] += timed(pipeline, 1)
    rows["bump + CPU pipeline"] = [a + b for a, b in zip(*rows.values())]
    result = report(f"tag to verdict, vLLM {OLD[0]} -> {NEW} (warm runner)", rows, [])
    total = median(rows["bump + CPU pipeline"])
    share = total / DAY
    console.print(
        f"  tag-to-verdict, the pipeline's own part: {total:.1f} s = {share:.4%} of the 24 h budget"
    )
    result["ratios"]["share of 24 h"] = {"ratio": share, "target": 1.0, "met": share <= 1.0}
    shutil.rmtree(work, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
