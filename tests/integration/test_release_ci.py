"""`vpr release` as a GitHub Actions step shows its result on the run page: stages as
`::group::` blocks, the scorecard in the job summary, and `next:` lines at the end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import REFERENCE_SPEC, vpr


def test_release_in_github_actions(reference_env: dict, cache_root: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step-summary.md"
    dist = tmp_path / "dist"
    done = vpr(
        "release", "--spec", str(REFERENCE_SPEC), "--dist", str(dist),
        "--cache-dir", str(cache_root), "--no-publish",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "CI": "true"},
    )  # fmt: skip
    groups = re.findall(r"^::group::stage (\d)/7: ([a-z-]+)$", done.stdout, re.M)
    assert [name for _, name in groups] == ["lock", "build-core", "env", "conform", "manifest"]
    assert done.stdout.count("::endgroup::") == 5
    # build-plugin and build-guard run side by side: groups cannot interleave, so theirs
    # are plain rules, each naming the other
    assert "stage 3/7: build-plugin (beside build-guard)" in done.stderr
    assert "stage 4/7: build-guard (beside build-plugin)" in done.stderr
    card = (dist / "reference" / "scorecard.md").read_text()
    assert summary.read_text().startswith(card.rstrip("\n"))  # the scorecard, as written
    assert "::error" not in done.stdout  # verdict pilot: no check failed
    nexts = [line for line in done.stderr.splitlines() if line.startswith("vpr next: ")]
    assert nexts and "scorecard.html" in nexts[0]
    assert any("vpr manifest verify" in line for line in nexts)
