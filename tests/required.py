"""Skips that must not happen: where the run set up what a group of tests needs, a test
of that group that skips is a failure (the tool is there, so the skip hides a broken
test or a broken set-up, not a missing tool).

- `VPR_REQUIRE_ENGINE=1` (set by `nox -s tests` when `scripts/engine.sh` started a
  container engine for the run): the `docker` tests. A test may name one skip that
  has nothing to do with the engine, `@pytest.mark.docker(may_skip="REASON PREFIX")`
  (e.g. a registry this machine cannot reach); any other skip fails.
- `VPR_REQUIRE_CHROMIUM=1` (set by `.ci/run` once Chromium is installed): the
  `screenshot` tests.
- `VPR_TT_PLUGIN_CHECKOUT=PATH` (a vllm-tt-plugin checkout at buildspec/tt.toml's commit:
  `.ci/run` clones one from the fixtures' bundle, the workflows check one out): the
  `tt_checkout` tests, which skip only where no checkout is given (`TT_CHECKOUT`).

Loaded by tests/conftest.py (and by `-p tests.required` in a run of its own).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

REQUIRED = {  # marker -> (the variable that requires it, what the run set up)
    "docker": ("VPR_REQUIRE_ENGINE", "a container engine was started for this run"),
    "screenshot": ("VPR_REQUIRE_CHROMIUM", "Chromium was installed for this run"),
    "tt_checkout": ("VPR_TT_PLUGIN_CHECKOUT", "a vllm-tt-plugin checkout was given"),
}
# Variables that require by naming what was given (a path), not by being "1".
GIVEN = ("VPR_TT_PLUGIN_CHECKOUT",)


def tt_checkout(may_skip: str | None = None) -> Callable[[T], T]:
    """The marks of a test of the TT pairing: it reads the vllm-tt-plugin checkout named by
    VPR_TT_PLUGIN_CHECKOUT and skips where none is given; where one is, a skip fails but
    the one that `may_skip` names (a reason that has nothing to do with the checkout)."""
    needs = pytest.mark.tt_checkout(may_skip=may_skip) if may_skip else pytest.mark.tt_checkout
    skip = pytest.mark.skipif(
        not os.environ.get("VPR_TT_PLUGIN_CHECKOUT"),
        reason="set VPR_TT_PLUGIN_CHECKOUT to a vllm-tt-plugin checkout to run",
    )
    return lambda test: needs(skip(test))


def _requires(variable: str) -> bool:
    value = os.environ.get(variable)
    return bool(value) if variable in GIVEN else value == "1"


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
        if marker is None or not _requires(variable):
            continue
        reason = _reason(report)
        allowed = marker.kwargs.get("may_skip")
        if allowed and reason.startswith(allowed):
            continue
        report.outcome = "failed"
        given = f"{variable}={os.environ[variable]}"
        report.longrepr = f"{why} ({given}), but this {name} test skipped: {reason}"
