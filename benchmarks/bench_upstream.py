"""Tag to verdict, the pipeline's own part: `vpr bump` to a new core release plus the CPU
pipeline (`vpr release --site cpu --no-publish`) on the bumped spec, on a warm runner.

The runner is warm as a CI runner that has run before is: uv's download cache and the
sdists already fetched (`.vpr/cas`, hard-linked from $VPR_CACHE_DIR) are there, but the
new release has never been built: no stage result, environment or checkout. Each run
starts from a clean clone of this repository (committed state) whose reference spec is
moved back to vLLM 0.25.1, bumps it to 0.26.0 (sdist from the index, locks re-resolved,
migration report) and runs the CPU pipeline on the bumped spec (two core builds
compared, plugin build, pairing environment, every cpu check, signed manifest). Side by
side: the same with every stage cached (a re-run). Printed: medians, and the new
release's share of the 24 hours the issue allows from a tag to a signed verdict (the
workflow's queueing and the hardware runner come on top).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def _fresh_stages(base: Path, target: Path) -> Path:
    """A cache folder with the runner's downloads (sdists, by sha256) but no stage result,
    environment or checkout: the new release has never been built here."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    if (base / "cas").is_dir():
        shutil.copytree(base / "cas", target / "cas", copy_function=os.link)
    return target


def main(repeats: int = 3) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-upstream-"))
    base = Path(os.environ.get("VPR_CACHE_DIR", str(REPO / ".vpr")))
    state: dict[str, Any] = {"cache": base}

    def env() -> dict[str, str]:
        return {**os.environ, "VPR_CACHE_DIR": str(state["cache"])}

    def bump() -> None:
        repo = _clone(work)  # inside the timing: a clone is what a CI checkout costs
        state["repo"] = repo
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
            str(work / "migration.md"),
            env=env(),
            cwd=repo,
        )

    def pipeline() -> None:
        run(
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "release",
            "--spec",
            "buildspec/bumped.toml",
            "--site",
            "cpu",
            "--no-publish",
            env=env(),
            cwd=state["repo"],
        )

    counter = iter(range(1000))

    def new_release() -> None:
        state["cache"] = _fresh_stages(base, work / f"cache-{next(counter)}")
        bump()
        pipeline()
        shutil.rmtree(state["cache"], ignore_errors=True)

    def again() -> None:
        state["cache"] = base
        bump()
        pipeline()

    again()  # prime: the runner has run this pipeline before
    rows = {
        "bump + CPU pipeline, new release (stages not cached)": timed(new_release, repeats),
        "bump + CPU pipeline, re-run (stages cached)": timed(again, repeats),
    }
    result = report(
        f"tag to verdict, vLLM {OLD[0]} -> {NEW} (warm runner)",
        rows,
        [
            (
                "re-run / new release",
                "bump + CPU pipeline, re-run (stages cached)",
                "bump + CPU pipeline, new release (stages not cached)",
                1.0,
            )
        ],
    )
    total = median(rows["bump + CPU pipeline, new release (stages not cached)"])
    share = total / DAY
    console.print(
        f"  tag-to-verdict, the pipeline's own part: {total:.1f} s = {share:.3%} of the 24 h "
        "budget (queueing and the hardware runner come on top)"
    )
    result["ratios"]["share of 24 h"] = {"ratio": share, "target": 1.0, "met": share <= 1.0}
    shutil.rmtree(work, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
