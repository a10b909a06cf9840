"""Skips that must not happen: where the run set up what a group of tests needs, a test
of that group that skips is a failure (the tool is there, so the skip hides a broken
test or a broken set-up, not a missing tool).

- `VPR_REQUIRE_ENGINE=1` (set by `nox -s tests` when `scripts/engine.sh` started a
  container engine for the run): the `docker` tests. A test may name one skip that
  has nothing to do with the engine, `@pytest.mark.docker(may_skip="REASON PREFIX")`
  (e.g. a registry this machine cannot reach); any other skip fails.
- `VPR_REQUIRE_CHROMIUM=1` (set by `.ci/run` once Chromium is installed): the
  `screenshot` tests.

Loaded by tests/conftest.py (and by `-p tests.required` in a run of its own).
"""

from __future__ import annotations

import os

import pytest

REQUIRED = {  # marker -> (the variable that requires it, what the run set up)
    "docker": ("VPR_REQUIRE_ENGINE", "a container engine was started for this run"),
    "screenshot": ("VPR_REQUIRE_CHROMIUM", "Chromium was installed for this run"),
}


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    for name, (variable, why) in REQUIRED.items():
        marker = item.get_closest_marker(name)
        if marker is None or os.environ.get(variable) != "1":
            continue
        reason = _reason(report)
        allowed = marker.kwargs.get("may_skip")
        if allowed and reason.startswith(allowed):
            continue
        report.outcome = "failed"
        report.longrepr = f"{why} ({variable}=1), but this {name} test skipped: {reason}"
